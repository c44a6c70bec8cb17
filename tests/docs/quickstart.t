#!/bin/sh
# quickstart.t - the README's quick start, run verbatim: the first ```sh block under "## Quick start". It runs in
# a scratch folder of the test's own (TMPDIR too) whose build/ is this build, with its own simcuda node, and
# must leave no rotad, socket, lock file or simcuda node behind.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
T=$(mktemp -d /tmp/rota-quickstart-t.XXXXXX)
NODE="quickstart-t-$$"
# rotads started by the block: their socket lies under the test's TMPDIR
rotads() {
    for p in $(pgrep -x rotad); do
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -q "^ROTA_SOCKET=$T/" && echo "$p"
    done
}
cleanup() {
    for p in $(rotads); do kill -9 "$p"; done
    rm -rf "$T" "/dev/shm/$NODE"
}
trap cleanup EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

# The block: from the heading "## Quick start" to the first fenced sh block's end.
awk '/^## Quick start/ {h = 1; next} h && /^```sh$/ {b = 1; next} b && /^```$/ {exit} b {print}' \
    "$ROTA_SRCDIR/README.md" >"$T/block.sh"
[ -s "$T/block.sh" ]; ok $? "README.md has a quick start block ($(wc -l <"$T/block.sh") lines)"

mkdir "$T/cwd" "$T/tmp"
ln -s "$ROTA_BUILD" "$T/cwd/build"
# The block's `make` builds this tree (already built: nothing to do). Sanitizer builds keep their runtime first.
cat >"$T/run.sh" <<EOS
make() { command make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" "\$@"; }
set -e
. "$T/block.sh"
set +e
echo "quickstart-done ROTA_SOCKET=\$ROTA_SOCKET"
EOS
(
    cd "$T/cwd" || exit 1
    unset LD_LIBRARY_PATH MAKEFLAGS MAKELEVEL MFLAGS ROTA_SOCKET
    [ -n "${ROTA_SANITIZER_RT:-}" ] && export LD_PRELOAD="$ROTA_SANITIZER_RT"
    SIMCUDA_NODE=$NODE TMPDIR=$T/tmp timeout 120 sh "$T/run.sh"
) >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^quickstart-done' "$T/out"; ok $? "the block runs to its end with status 0 (rc $rc)"
sed 's/^/# /' "$T/out"  # what a user would see
sock=$(sed -n 's/^quickstart-done ROTA_SOCKET=//p' "$T/out")
case $sock in "$T"/*) ok 0 "its socket is under the test's TMPDIR ($sock)" ;; *) ok 1 "its socket is under TMPDIR ($sock)" ;; esac
grep -q 'PRIORITY' "$T/out"; ok $? "rota status showed the clients"
log=${sock%/rotad.sock}/rotad.log
grep -q 'listening on' "$log" 2>/dev/null && ! grep -q '^rotad:' "$T/out"
ok $? "rotad logged to its --log file, and nothing to the terminal that started it"
# rotad stops within moments of its SIGTERM; give it 10 s
i=0
while [ -n "$sock" ] && { [ -e "$sock" ] || [ -e "$sock.lock" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -n "$sock" ] && [ ! -e "$sock" ] && [ ! -e "$sock.lock" ]; ok $? "rotad stopped and removed its socket and lock file"
[ ! -e "/dev/shm/$NODE" ]; ok $? "no simcuda node left in /dev/shm"
left=$(rotads)
[ -z "$left" ]; ok $? "no rotad of the quick start still runs${left:+: $left}"
echo "1..$n"
