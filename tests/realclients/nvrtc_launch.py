"""nvrtc_launch.py [LAUNCHES [HOLD_S]] - NVRTC compiles two kernels to a cubin and to PTX; both modules load,
their kernels launch LAUNCHES times (default 100) on a stream, and a name the image does not define is refused.
Prints "launches N" once they completed, then holds its 1 MiB buffer HOLD_S seconds (default 0)."""
import sys
import time

import numpy as np
from cuda.core.experimental import LaunchConfig, launch

from rc_common import EXIT_FAIL, check, compile_kernels, device

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
dev = device()
s = dev.create_stream()
buf = dev.allocate(1 << 20, stream=s)
count = (1 << 20) // 4
cfg = LaunchConfig(grid=(count + 255) // 256, block=256)
done = 0
for target in ("cubin", "ptx"):
    # half the launches from each module
    mod = compile_kernels(dev, target)
    fill, scale = mod.get_kernel("rc_fill"), mod.get_kernel("rc_scale")
    check(fill.attributes.max_threads_per_block() >= 256, f"{target}: max_threads_per_block")
    try:
        mod.get_kernel("no_such_kernel")
        check(False, f"{target}: a name the image does not define resolved")
    except Exception as e:  # cuda.core raises CUDAError carrying the driver's code
        check("CUDA_ERROR_NOT_FOUND" in str(e), f"{target}: unknown name: {e}")
    for i in range(n // 2 if target == "cubin" else n - n // 2):
        launch(s, cfg, fill if i % 2 else scale, buf, np.uint32(i) if i % 2 else np.float32(2.0), np.uint64(count))
        done += 1
s.sync()
print(f"launches {done}", flush=True)
time.sleep(hold)
buf.close(s)
s.sync()
sys.exit(0 if done == n else EXIT_FAIL)
