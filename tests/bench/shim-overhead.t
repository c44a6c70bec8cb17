#!/bin/sh
# shim-overhead.t - smoke test of the overhead benchmark (tools/bench/shim-overhead.c): usage errors, and a short
# run without librota, with librota and no rotad, and gated through a rotad of its own, and the allocations alone. It checks that each run
# works and reports every figure; the figures themselves are a benchmark's (README), never asserted here.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
BIN=$ROTA_BUILD/bin/shim-overhead
LIB=$ROTA_BUILD/lib/librota.so
T=$(mktemp -d /tmp/rota-overhead-t.XXXXXX)
S=$T/rotad.sock
RPID=
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
cleanup() { [ -z "$RPID" ] || kill -9 "$RPID" 2>/dev/null; rm -rf "$T" "/dev/shm/rota-overhead-t-$$"; }
trap cleanup EXIT
export LD_LIBRARY_PATH="$ROTA_BUILD/lib" SIMCUDA_NODE="rota-overhead-t-$$" SIMCUDA_LAUNCH_NS=0 ROTA_LOG=error
# verify_asan_link_order=0: under ASan the benchmark links the runtime itself, and LD_PRELOAD puts librota first.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0"

# fields OUTPUT: every figure the benchmark prints, as a positive number
fields() {
    for f in launch_ns alloc_free_ns passthrough_ns launch_call_ns gate_ns; do
        printf '%s\n' "$1" | grep -Eq "(^| )$f=[0-9]+\.[0-9]( |$)" || return 1
        printf '%s\n' "$1" | grep -Eq "(^| )$f=0\.0( |$)" && return 1
    done
    printf '%s\n' "$1" | grep -Eq "(^| )iterations=3000( |$)"
}

echo 1..9
"$BIN" 0 >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q usage "$T/err"; ok $? "0 iterations is a usage error (exit $rc)"
"$BIN" 10 0 >/dev/null 2>&1; rc=$?
r1=$rc
"$BIN" 10 20 bogus >/dev/null 2>&1; rc=$?
[ $r1 -eq 2 ] && [ $rc -eq 2 ]; ok $? "a zero ALLOC_BYTES or a third argument other than 'allocs' is a usage error (exit $r1, $rc)"

out=$(LD_PRELOAD= "$BIN" 3000); rc=$?
[ $rc -eq 0 ]; ok $? "runs without librota (exit $rc)"
fields "$out"; ok $? "... and reports every figure: $out"
out=$(LD_PRELOAD= "$BIN" 300 4096 allocs); rc=$?
[ $rc -eq 0 ] && [ "$out" = "alloc_bytes=4096 iterations=300" ]; ok $? "'allocs' runs the allocations alone (exit $rc): $out"

out=$(LD_PRELOAD="$LIB" ROTA_SOCKET="$T/none.sock" "$BIN" 3000); rc=$?
[ $rc -eq 0 ] && fields "$out"; ok $? "runs with librota and no rotad, every figure reported (exit $rc)"

rm -f "$T/ready"; mkfifo "$T/ready"
ROTA_LOG=quiet "$ROTA_BUILD/bin/rotad" --foreground --no-probe --socket "$S" --notify-fd 3 3>"$T/ready" 2>"$T/log" &
RPID=$!
line=$(timeout 10 head -c 1 "$T/ready" | od -An -c | tr -d ' ')
[ "$line" = '\n' ]; ok $? "rotad started for the gated run"
# ROTA_REQUIRE=1: a run that did not reach rotad fails its first driver call instead of passing uncoordinated.
out=$(LD_PRELOAD="$LIB" ROTA_SOCKET="$S" ROTA_REQUIRE=1 "$BIN" 3000); rc=$?
[ $rc -eq 0 ] && fields "$out"; ok $? "runs gated through rotad (ROTA_REQUIRE=1), every figure reported (exit $rc)"
out=$(LD_PRELOAD="$LIB" ROTA_SOCKET="$T/none.sock" ROTA_REQUIRE=1 "$BIN" 3000 2>/dev/null); rc=$?
[ $rc -eq 1 ]; ok $? "... and ROTA_REQUIRE=1 without a rotad does fail it (exit $rc), so the gated run was connected"
