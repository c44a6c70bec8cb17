#!/bin/sh
# shim-overhead.sh - librota's per-call overhead over simcuda: wall ns and callgrind instructions, with and
# without the shim. Usage: tools/bench/shim-overhead.sh [BUILD_DIR] [ITERATIONS] [ALLOC_BYTES]
# (defaults: build 200000 1048576; ALLOC_BYTES is the size of each cuMemAlloc_v2 of the alloc+free pairs)
# Prints one line per configuration and the differences. Needs valgrind for the instruction counts. Starts a
# rotad of its own (BUILD_DIR/bin/rotad, private socket) for the "gated" configuration.
set -eu
B=${1:-build}
N=${2:-200000}
A=${3:-1048576}
bin="$B/bin/shim-overhead"
lib="$(cd "$B/lib" && pwd)/librota.so"
if [ ! -x "$bin" ] || [ tools/bench/shim-overhead.c -nt "$bin" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -I"${CUDA_HOME:-/usr/local/cuda}/include" -I. -o "$bin" \
        tools/bench/shim-overhead.c "$B/obj/gen/kernels-ptx.o" "$B/obj/tools/kernels/load.o" "$B/obj/librota-common.a" -L"$B/lib" -lcuda
fi
export LD_LIBRARY_PATH="$B/lib" SIMCUDA_LAUNCH_NS=0 SIMCUDA_NODE="rota-bench-shim-$$" ROTA_LOG=error
tmp=/tmp/rota-cg-$$
rotad_pid=
cleanup() {
    [ -z "$rotad_pid" ] || kill "$rotad_pid" 2>/dev/null || true
    rm -f /dev/shm/rota-bench-shim-$$ "$tmp".*
}
trap cleanup EXIT
# "gated": connected to a rotad of its own, alone on its GPU (the uncontended gate). "rota": librota with no
# rotad to reach. "disabled": ROTA_DISABLE=1.
"$B/bin/rotad" --foreground --no-probe --socket "$tmp.sock" >"$tmp.rotad" 2>&1 &
rotad_pid=$!
i=0
while [ ! -S "$tmp.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -S "$tmp.sock" ] || { echo "shim-overhead.sh: rotad did not start:"; cat "$tmp.rotad"; exit 1; }
configs="none rota gated disabled"
run_cfg() { # run_cfg CONFIG COMMAND...: COMMAND under CONFIG's environment
    cfg=$1
    shift
    case $cfg in
        none) env LD_PRELOAD= "$@" ;;
        rota) env LD_PRELOAD="$lib" ROTA_SOCKET="$tmp.none" "$@" ;;
        gated) env LD_PRELOAD="$lib" ROTA_SOCKET="$tmp.sock" "$@" ;;
        disabled) env LD_PRELOAD="$lib" ROTA_DISABLE=1 "$@" ;;
    esac
}

# Wall clock: the configurations interleaved, 7 rounds; each figure is the minimum over the rounds (on a shared
# machine the minimum is the least disturbed run).
for r in 1 2 3 4 5 6 7; do
    for cfg in $configs; do run_cfg $cfg "$bin" "$N" "$A" | sed "s/^/$cfg /"; done
done > "$tmp.wall"
echo "wall clock, minimum of 7 interleaved runs of $N iterations (ns per call; allocations of $A bytes):"
for cfg in $configs; do
    awk -v c=$cfg '$1 == c { for (i = 2; i <= NF; i++) { split($i, kv, "="); v = kv[2] + 0;
        if (!(kv[1] in m) || v < m[kv[1]]) m[kv[1]] = v } }
        END { printf "  %-9s gate %6.1f   launch %7.1f (calls alone %7.1f)   alloc+free %7.1f   pass-through %6.1f\n",
              c, m["gate_ns"], m["launch_ns"], m["launch_call_ns"], m["alloc_free_ns"], m["passthrough_ns"] }' "$tmp.wall"
done
echo "  (gate: a launch the driver refuses at once, so what librota adds to every launch, uncontended;"
echo "   calls alone: the median over batches of 256 launches, synchronisation excluded)"

# Syscalls per alloc+free pair: strace -c over two loop lengths, the difference divided by the extra pairs (so
# start-up and connection calls cancel out).
if command -v strace >/dev/null; then
    for cfg in $configs; do
        for k in 1 2; do
            run_cfg $cfg strace -f -c -o "$tmp.st$k" "$bin" $((k * 2000)) "$A" allocs >/dev/null 2>&1 || true
        done
        awk -v c=$cfg 'FNR == 1 { f++ } (NF == 5 || NF == 6) && $4 ~ /^[0-9]+$/ && $NF != "total" {
                n[f, $NF] = $4; names[$NF] = 1 }
            END { line = ""; for (s in names) { d = n[2, s] - n[1, s]; if (d > 0) line = line sprintf(" %s %.3f", s, d / 2000) }
                  printf "  %-9s syscalls per alloc+free pair:%s\n", c, line == "" ? " none" : line }' "$tmp.st1" "$tmp.st2"
    done
fi

command -v valgrind >/dev/null || { echo "valgrind not installed: no instruction counts"; exit 0; }
n=$((N / 10))
ir() { # ir OUTFILE FUNCTION: inclusive instructions of FUNCTION
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null | grep -E "[: ]$2( |$)" | head -n 1 |
        awk '{gsub(",","",$1); print $1}'
}
for cfg in $configs; do
    run_cfg $cfg valgrind --tool=callgrind --callgrind-out-file="$tmp.$cfg" "$bin" "$n" "$A" >/dev/null 2>&1
done
calls=$((n + n / 10)) # warm-up + measured
for f in bench_launches bench_gate bench_allocs bench_passthrough; do
    a=$(ir "$tmp.none" $f)
    line="callgrind $f: $((a / calls)) instructions per iteration without librota"
    for cfg in rota gated disabled; do
        b=$(ir "$tmp.$cfg" $f)
        line="$line, $((b / calls)) $cfg (+$(((b - a) / calls)))"
    done
    echo "$line"
done
