"""mempool.py [MIB [HOLD_S]] - stream-ordered allocations from the device's memory pool through cuda.core's
DeviceMemoryResource: 64 blocks of 1 MiB allocated and freed on a stream, then one block of MIB MiB (default
16) held HOLD_S seconds (default 0). Exits 3 when the driver refuses that block (CUDA_ERROR_OUT_OF_MEMORY).
Prints "allocated MIB" once the block is held."""
import sys
import time

from cuda.core.experimental import DeviceMemoryResource, DeviceMemoryResourceOptions

from rc_common import EXIT_FAIL, EXIT_OOM, check, device, is_oom

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 16
hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
dev = device()
s = dev.create_stream()
mr = DeviceMemoryResource(dev.device_id)
check(mr.is_device_accessible and not mr.is_host_accessible, "the pool is device memory")
small = [mr.allocate(1 << 20, stream=s) for _ in range(64)]
check(len({b.handle for b in small}) == 64, "64 distinct blocks")
for b in small:
    b.close(s)
s.sync()
try:
    big = mr.allocate(mib << 20, stream=s)
    s.sync()
except Exception as e:
    if is_oom(e):
        print(f"oom {mib}", flush=True)
        sys.exit(EXIT_OOM)
    raise
print(f"allocated {mib}", flush=True)
time.sleep(hold)
big.close(s)
s.sync()
sys.exit(0)
