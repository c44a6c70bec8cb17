#!/bin/sh
# workload-torch.t - workload --allocator torch|torch-expandable on simcuda alone (no rota): a cache that outgrows
# the device is released and the miss retried; expandable segments map 20 MiB pages; a job whose live memory does
# not fit crashes after its last attempt, as PyTorch raises OutOfMemoryError.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
W=$ROTA_BUILD/bin/workload
T=$(mktemp -d /tmp/rota-workload-torch-t.XXXXXX)
NODE="workload-torch-t-$$"
export SIMCUDA_NODE="$NODE" SIMCUDA_MEM=1G
unset LD_PRELOAD
trap 'rm -rf "$T" "/dev/shm/$NODE"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
# field FILE NAME: a number of the record
field() { sed -n "s/^  \"$2\": \([0-9]*\),*$/\1/p" "$1"; }
ft() { "$W" --kind finetune --mem 768M --blocks 2 --act-frac 0.6 --kernels 50 --iters 60 --add 0 "$@"; }

echo "1..10"
ft --allocator torch --out "$T/torch.json"; ok $? "torch: a fine-tune whose cache outgrows the 1G device: exit 0"
grep -q '"status": "ok"' "$T/torch.json"; ok $? "status ok"
[ "$(field "$T/torch.json" mem_retries)" -ge 1 ]; ok $? "a cache miss failed and was retried after releasing the cache"
[ "$(field "$T/torch.json" mem_released)" -gt 0 ]; ok $? "cached segments were released ($(field "$T/torch.json" mem_released) bytes)"

ft --allocator torch-expandable --out "$T/exp.json"; ok $? "torch-expandable: exit 0"
allocs=$(field "$T/exp.json" mem_allocs); peak=$(field "$T/exp.json" mem_reserved_peak)
[ "$allocs" -gt "$(field "$T/exp.json" mem_misses)" ]; ok $? "pages are created one by one ($allocs cuMemCreate)"
[ $((peak % (2 * 1048576))) = 0 ] && [ "$peak" -lt 1073741824 ]; ok $? "peak reserve in whole pages, within the device ($peak)"

"$W" --kind train --allocator torch --mem 1536M --kernels 50 --iters 5 --add 0 --out "$T/big.json" 2>/dev/null
rc=$?; [ $rc = 3 ]; ok $? "live memory beyond the device: exit 3 (rc $rc)"
grep -q '"status": "crashed: OOM"' "$T/big.json"; ok $? "status crashed: OOM"
grep -q '"grant_attempts": \[.*,2\]' "$T/big.json"; ok $? "after two attempts (release_available_cached_blocks frees nothing by default)"
