#!/bin/sh
# exports.t - simcuda exports every function of the toolkit's cuda.h (and the interop headers), as a driver does.
# The list is read afresh from the headers, preprocessed as the driver is built (__CUDA_API_VERSION_INTERNAL);
# a name missing from libcuda.so.1 means tools/simcuda/cuda-api.def is stale: rerun scripts/gen-cuda-api.
B=${ROTA_BUILD:?ROTA_BUILD must name the build folder}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIB=$B/lib/libcuda.so.1
[ -r "$LIB" ] || { echo "Bail out! $LIB not built"; exit 255; }
[ -r "$CUDA_HOME/include/cuda.h" ] || { echo "1..0 # SKIP no $CUDA_HOME/include/cuda.h"; exit 0; }
command -v nm >/dev/null || { echo "1..0 # SKIP no nm"; exit 0; }
tmp=$(mktemp -d) || exit 255
trap 'rm -rf "$tmp"' EXIT

echo 1..3
for h in cuda.h cudaGL.h cudaEGL.h cudaProfiler.h; do
    ${CC:-cc} -E -P -D__CUDA_API_VERSION_INTERNAL -I"$CUDA_HOME/include" "$CUDA_HOME/include/$h" 2>/dev/null
done | tr '\n' ' ' | grep -oE 'CUresult +(CUDAAPI +)?cu[A-Za-z0-9_]+ *\(' | grep -oE 'cu[A-Za-z0-9_]+' |
    sort -u >"$tmp/want"
nm -D --defined-only "$LIB" | awk '{print $3}' | sort -u >"$tmp/have"
n=$(wc -l <"$tmp/want")
if [ "$n" -gt 600 ]; then echo "ok 1 - $n functions declared by the headers"; else echo "not ok 1 - only $n functions read"; fi
missing=$(comm -23 "$tmp/want" "$tmp/have")
if [ -z "$missing" ]; then echo "ok 2 - libcuda.so.1 exports every one"
else echo "not ok 2 - libcuda.so.1 lacks $(echo $missing | wc -w):"; echo "$missing" | head -20 | sed 's/^/#   /'; fi
extra=$(comm -13 "$tmp/want" "$tmp/have" | grep -v '^cuVDPAU\|^cuGraphicsVDPAU')
if [ -z "$extra" ]; then echo "ok 3 - and nothing else"
else echo "not ok 3 - libcuda.so.1 exports names no header declares:"; echo "$extra" | sed 's/^/#   /'; fi
