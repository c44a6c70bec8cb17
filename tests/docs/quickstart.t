#!/bin/sh
# quickstart.t - the README's quick start, run verbatim (the first ```sh block under "## Quick start"), twice: from
# the build tree (the whole block), and from an install (make install into a DESTDIR of the test's own, PATH on its
# bin, the block without its first two lines, as the block's comment says). Each run has a scratch folder of its
# own (TMPDIR too) and its own simcuda node, shows both jobs in rota status and rota top, and must leave no rotad,
# socket, lock file or simcuda node behind.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
: "${ROTA_SRCDIR:?ROTA_SRCDIR must name the source folder}"
T=$(mktemp -d "${TMPDIR:-/tmp}/rota-quickstart-t.XXXXXX")
NODE="quickstart-t-$$"
# rotads started by the block: their socket lies under the test's folder
rotads() {
    for p in $(pgrep -x rotad); do
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -q "^ROTA_SOCKET=$T/" && echo "$p"
    done
}
cleanup() {
    for p in $(rotads); do kill -9 "$p"; done
    rm -rf "$T" "/dev/shm/$NODE-build" "/dev/shm/$NODE-install"
}
trap cleanup EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

# The block: from the heading "## Quick start" to the first fenced sh block's end.
awk '/^## Quick start/ {h = 1; next} h && /^```sh$/ {b = 1; next} b && /^```$/ {exit} b {print}' \
    "$ROTA_SRCDIR/README.md" >"$T/block.sh"
[ -s "$T/block.sh" ]; ok $? "README.md has a quick start block ($(wc -l <"$T/block.sh") lines)"
# From an install the block says to skip its first two lines: they must be the build and the PATH to build/bin.
sed -n 1p "$T/block.sh" | grep -q '^make ' && sed -n 2p "$T/block.sh" | grep -q 'build/bin' &&
    sed -n 2p "$T/block.sh" | grep -q 'after make install, skip these two lines'
ok $? "its first two lines build and put build/bin on PATH, and say to skip them after make install"
tail -n +3 "$T/block.sh" >"$T/block-install.sh"

# D/P: the install of this build (no toolkit needed, as a user's sudo make install).
D=$T/root
P=/opt/rota-qs
(unset MAKEFLAGS MAKELEVEL MFLAGS
 make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" DESTDIR="$D" PREFIX=$P install) \
    >"$T/install.log" 2>&1
ok $? "make install into $D$P"

# run_block NAME BLOCK PATH: runs BLOCK in a fresh scratch folder with PATH, then checks what it left.
run_block() {
    name=$1 block=$2 path=$3
    mkdir "$T/$name" "$T/$name/tmp"
    ln -s "$ROTA_BUILD" "$T/$name/build"
    # The block's `make` builds this tree (already built: nothing to do). Sanitizer builds keep their runtime first.
    cat >"$T/$name/run.sh" <<EOS
make() { command make -s -C "$ROTA_SRCDIR" B="$ROTA_BUILD" SANITIZER="${ROTA_SANITIZER:-}" "\$@"; }
set -e
. "$block"
set +e
echo "quickstart-done ROTA_SOCKET=\$ROTA_SOCKET"
EOS
    (
        cd "$T/$name" || exit 1
        unset LD_LIBRARY_PATH MAKEFLAGS MAKELEVEL MFLAGS ROTA_SOCKET
        [ -n "${ROTA_SANITIZER_RT:-}" ] && export LD_PRELOAD="$ROTA_SANITIZER_RT"
        # gcc's ASan build: rota run preloads librota.so ahead of the jobs' own libasan (as run.t allows too)
        [ "${ROTA_SANITIZER:-}" = address ] &&
            export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
        PATH=$path SIMCUDA_NODE=$NODE-$name TMPDIR=$T/$name/tmp timeout 120 sh "$T/$name/run.sh"
    ) >"$T/$name/out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q '^quickstart-done' "$T/$name/out"; ok $? "$name: the block runs to its end with status 0 (rc $rc)"
    sed 's/^/# /' "$T/$name/out" # what a user would see
    sock=$(sed -n 's/^quickstart-done ROTA_SOCKET=//p' "$T/$name/out")
    case $sock in "$T"/*) ok 0 "$name: its socket is under the test's TMPDIR ($sock)" ;;
        *) ok 1 "$name: its socket is under TMPDIR ($sock)" ;; esac
    grep -q '^PID .*CLASS' "$T/$name/out" && grep -q 'workload  *high ' "$T/$name/out" &&
        grep -q 'workload  *normal ' "$T/$name/out"
    ok $? "$name: rota status showed both jobs, the high one and the normal one"
    grep -q '^rota top - rotad pid [0-9]*, 2 client(s)' "$T/$name/out"
    ok $? "$name: rota top --once ran while both jobs ran"
    grep -q 'kernels' "$T/$name/out"; ok $? "$name: rota sim-stat printed the simulated GPU's counters"
    log=${sock%/rotad.sock}/rotad.log
    grep -q 'listening on' "$log" 2>/dev/null && ! grep -q '^rotad:' "$T/$name/out"
    ok $? "$name: rotad logged to its --log file, and nothing to the terminal that started it"
    # rotad stops within moments of its SIGTERM; give it 10 s
    i=0
    while [ -n "$sock" ] && { [ -e "$sock" ] || [ -e "$sock.lock" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -n "$sock" ] && [ ! -e "$sock" ] && [ ! -e "$sock.lock" ]; ok $? "$name: rotad stopped and removed its socket and lock file"
    [ ! -e "/dev/shm/$NODE-$name" ]; ok $? "$name: no simcuda node left in /dev/shm"
}

run_block build "$T/block.sh" "$PATH"
# from the install: its bin only, before the system's (no build/bin anywhere on PATH)
run_block install "$T/block-install.sh" "$D$P/bin:/usr/local/bin:/usr/bin:/bin"
left=$(rotads)
[ -z "$left" ]; ok $? "no rotad of the quick start still runs${left:+: $left}"
echo "1..$n"
