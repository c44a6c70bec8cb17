#!/bin/sh
# simcuda-stat.t - simcuda-stat: usage and exit codes, text and --json output, --reset, --remove, reclaim of a dead
# process.
B=${ROTA_BUILD:?ROTA_BUILD must name the build folder}
STAT=$B/bin/simcuda-stat
NODET=$B/tests/simcuda/node-t
[ -x "$STAT" ] || { echo "Bail out! $STAT not built"; exit 255; }
[ -x "$NODET" ] || { echo "Bail out! $NODET not built"; exit 255; }
command -v python3 >/dev/null || { echo "Bail out! python3 is needed to validate JSON"; exit 255; }

tmp=$(mktemp -d) || exit 255
node=test-stat-$$
fix_pid=
cleanup() {
    [ -n "$fix_pid" ] && kill "$fix_pid" 2>/dev/null
    rm -rf "$tmp"
    rm -f "/dev/shm/$node" "/dev/shm/$node-bad"
}
trap cleanup EXIT

n=0
failed=0
# t NAME COMMAND...: one test, passing when COMMAND succeeds.
t() {
    name=$1
    shift
    n=$((n + 1))
    if "$@"; then echo "ok $n - $name"; else echo "not ok $n - $name"; failed=$((failed + 1)); fi
}
# field DEVICE KEY: a value from the text output in $tmp/out.
field() {
    sed -n "s/^device $1:.* $2=\([0-9]*\).*/\1/p" "$tmp/out"
}
# json EXPR: evaluate a Python expression over the parsed JSON in $tmp/json (d = the document).
json() {
    python3 -c "import json,sys; d=json.load(open('$tmp/json')); sys.exit(0 if ($1) else 1)"
}
exits() { # exits CODE COMMAND...: the command exits with CODE (output to $tmp/out, $tmp/err)
    want=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    [ $? -eq "$want" ]
}
grep_err() { grep -q -- "$1" "$tmp/err"; }
grep_out() { grep -q -- "$1" "$tmp/out"; }

t "unknown option: exit 2" exits 2 "$STAT" --bogus
t "  with the usage" grep_err "usage: simcuda-stat \[--json\] \[--reset\] \[--remove\] \[--node NAME\]"
t "stray argument: exit 2" exits 2 "$STAT" extra
t "bad node name: exit 2" exits 2 "$STAT" --node 'a/b'
t "--help: exit 0" exits 0 "$STAT" --help
t "  documents the exit codes" grep_out "Exit codes: 0 ok; 1 failure (including: the node does not exist); 2 usage error"
t "  lists the knobs" grep_out "SIMCUDA_TIMESLICE_US"
t "missing node: exit 1" exits 1 "$STAT" --node "$node"
t "  says it does not exist" grep_err "simcuda-stat: fatal: unable to open node '$node': it does not exist"

printf 'garbage' >"/dev/shm/$node-bad"
t "foreign region: exit 1" exits 1 "$STAT" --node "$node-bad"
t "  says so" grep_err "simcuda-stat: fatal: unable to read node '$node-bad': node '$node-bad' (/dev/shm/$node-bad) is not a simcuda node"

# A live process: 1M reserved, one context, one 20 ms kernel, one 25 MB copy.
mkfifo "$tmp/fifo" || exit 255
SIMCUDA_NODE=$node SIMCUDA_DEVICES=2 SIMCUDA_MEM=4M "$NODET" --fixture <"$tmp/fifo" >"$tmp/fix" 2>&1 &
fix_pid=$!
exec 3>"$tmp/fifo"
i=0
while ! grep -q ready "$tmp/fix" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
t "fixture process ready" grep -q ready "$tmp/fix"

t "text output: exit 0" exits 0 "$STAT" --node "$node"
t "  header names the node" grep_out "^node $node: 2 device(s), timeslice 2000 us, switch 25 us"
t "  device 0: mem_used 1M" [ "$(field 0 mem_used)" = 1048576 ]
t "  device 0: mem_total 4M" [ "$(field 0 mem_total)" = 4194304 ]
t "  device 0: 1 live context" [ "$(field 0 contexts)" = 1 ]
t "  device 0: 1 kernel" [ "$(field 0 kernels)" = 1 ]
t "  device 0: busy_ns is the 20 ms kernel" [ "$(field 0 busy_ns)" = 20000000 ]
t "  device 0: 1 copy of 25 MB" [ "$(field 0 copies)" = 1 -a "$(field 0 copy_bytes)" = 25000000 ]
t "  device 0: copy_busy_ns = 2000 + 25e6 / 25" [ "$(field 0 copy_busy_ns)" = 1002000 ]
t "  device 1: nothing used" [ "$(field 1 mem_used)" = 0 -a "$(field 1 kernels)" = 0 ]

"$STAT" --json --node "$node" >"$tmp/json" 2>"$tmp/err"
t "--json: exit 0" [ $? -eq 0 ]
valid_json() { python3 -m json.tool "$tmp/json" >/dev/null; }
t "  is valid JSON (python3 -m json.tool)" valid_json
t "  node and 2 devices" json "d['node'] == '$node' and len(d['devices']) == 2"
t "  device fields" json "all(k in d['devices'][0] for k in ('busy_ns','wall_ns','kernels','switches','preemptions','mem_used','mem_total','contexts','copy_bytes','copy_busy_ns','switch_ns'))"
t "  busy_ns <= wall_ns" json "0 < d['devices'][0]['busy_ns'] <= d['devices'][0]['wall_ns']"
t "  mem_used 1M, 1 context" json "d['devices'][0]['mem_used'] == 1048576 and d['devices'][0]['contexts'] == 1"

# The process exits without freeing anything: its charge and context are reclaimed.
exec 3>&-
wait "$fix_pid"
t "fixture exited" [ $? -eq 0 ]
fix_pid=
t "after exit: exit 0" exits 0 "$STAT" --node "$node"
t "  its memory is reclaimed" [ "$(field 0 mem_used)" = 0 ]
t "  its context is reclaimed" [ "$(field 0 contexts)" = 0 ]
t "  one reclaim counted" [ "$(field 0 reclaims)" = 1 ]
t "  counters kept" [ "$(field 0 kernels)" = 1 ]

t "--reset: exit 0" exits 0 "$STAT" --reset --node "$node"
t "  prints the counters before the reset" [ "$(field 0 kernels)" = 1 ]
t "after reset: exit 0" exits 0 env SIMCUDA_NODE="$node" "$STAT"
t "  kernels 0 (SIMCUDA_NODE picks the node)" [ "$(field 0 kernels)" = 0 ]
t "  busy_ns 0" [ "$(field 0 busy_ns)" = 0 ]
t "  wall_ns restarted (< 5 s)" [ "$(field 0 wall_ns)" -lt 5000000000 ]
t "  memory capacity unchanged" [ "$(field 0 mem_total)" = 4194304 ]

t "--remove: exit 0" exits 0 "$STAT" --remove --node "$node"
t "  prints the counters before removing" [ "$(field 0 mem_total)" = 4194304 ]
t "  the node is gone from /dev/shm" [ ! -e "/dev/shm/$node" ]
t "  reading it again: exit 1" exits 1 "$STAT" --node "$node"

echo "1..$n"
[ $failed -eq 0 ]
