#!/bin/sh
# shim-overhead.sh - librota's per-call overhead over simcuda: wall ns and callgrind instructions, with and
# without the shim. Usage: tools/bench/shim-overhead.sh [BUILD_DIR] [ITERATIONS]   (defaults: build 200000)
# Prints one line per configuration and the differences. Needs valgrind for the instruction counts.
set -eu
B=${1:-build}
N=${2:-200000}
bin="$B/bin/shim-overhead"
lib="$(cd "$B/lib" && pwd)/librota.so"
if [ ! -x "$bin" ] || [ tools/bench/shim-overhead.c -nt "$bin" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -I"${CUDA_HOME:-/usr/local/cuda}/include" -I. -o "$bin" \
        tools/bench/shim-overhead.c "$B/obj/gen/kernels-ptx.o" -L"$B/lib" -lcuda
fi
export LD_LIBRARY_PATH="$B/lib" SIMCUDA_LAUNCH_NS=0 SIMCUDA_NODE="rota-bench-shim-$$" ROTA_LOG=error
trap 'rm -f /dev/shm/rota-bench-shim-$$ /tmp/rota-cg-$$.*' EXIT

# Wall clock: the three configurations interleaved, 7 rounds; each figure is the minimum over the rounds
# (on a shared machine the minimum is the least disturbed run).
for r in 1 2 3 4 5 6 7; do
    env LD_PRELOAD= "$bin" "$N" | sed 's/^/none /'
    env LD_PRELOAD="$lib" "$bin" "$N" | sed 's/^/rota /'
    env LD_PRELOAD="$lib" ROTA_DISABLE=1 "$bin" "$N" | sed 's/^/disabled /'
done > /tmp/rota-cg-$$.wall
echo "wall clock, minimum of 7 interleaved runs of $N iterations (ns per call):"
for cfg in none rota disabled; do
    awk -v c=$cfg '$1 == c { for (i = 2; i <= 4; i++) { split($i, kv, "="); v = kv[2] + 0;
        if (!(kv[1] in m) || v < m[kv[1]]) m[kv[1]] = v } }
        END { printf "  %-9s launch %7.1f   alloc+free %7.1f   pass-through %6.1f\n", c, m["launch_ns"],
              m["alloc_free_ns"], m["passthrough_ns"] }' /tmp/rota-cg-$$.wall
done

command -v valgrind >/dev/null || { echo "valgrind not installed: no instruction counts"; exit 0; }
n=$((N / 10))
ir() { # ir OUTFILE FUNCTION: inclusive instructions of FUNCTION
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null | grep -E "[: ]$2( |$)" | head -n 1 |
        awk '{gsub(",","",$1); print $1}'
}
for cfg in none rota disabled; do
    case $cfg in
        none) pre=""; dis="" ;;
        rota) pre="$lib"; dis="" ;;
        disabled) pre="$lib"; dis=1 ;;
    esac
    env LD_PRELOAD="$pre" ${dis:+ROTA_DISABLE=$dis} valgrind --tool=callgrind \
        --callgrind-out-file=/tmp/rota-cg-$$.$cfg "$bin" "$n" >/dev/null 2>&1
done
calls=$((n + n / 10)) # warm-up + measured
for f in bench_launches bench_allocs bench_passthrough; do
    a=$(ir /tmp/rota-cg-$$.none $f); b=$(ir /tmp/rota-cg-$$.rota $f); c=$(ir /tmp/rota-cg-$$.disabled $f)
    echo "callgrind $f: $((a / calls)) instructions per iteration without librota, $((b / calls)) with" \
         "(+$(((b - a) / calls))), $((c / calls)) with ROTA_DISABLE=1 (+$(((c - a) / calls)))"
done
