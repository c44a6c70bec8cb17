"""events.py - events and timing: a timed event before and after 20 launches of a kernel over 64 MiB, the
elapsed time read back (positive, below the wall time around it), a blocking event and a query."""
import sys
import time

import numpy as np
from cuda.core.experimental import EventOptions, LaunchConfig, launch

from rc_common import check, compile_kernels, device

dev = device()
s = dev.create_stream()
k = compile_kernels(dev).get_kernel("rc_fill")
count = (64 << 20) // 4
buf = dev.allocate(count * 4, stream=s)
cfg = LaunchConfig(grid=(count + 255) // 256, block=256)
t0 = time.monotonic()
e0 = s.record(options=EventOptions(enable_timing=True))
for i in range(20):
    launch(s, cfg, k, buf, np.uint32(i), np.uint64(count))
e1 = s.record(options=EventOptions(enable_timing=True))
e1.sync()
wall_ms = (time.monotonic() - t0) * 1e3
ms = e1 - e0
print(f"elapsed_ms {ms:.3f} wall_ms {wall_ms:.3f}")
check(0 < ms <= wall_ms + 0.5, f"event time {ms} ms within the wall time {wall_ms} ms")
check(e1.is_done, "a synchronised event is done")
eb = s.record(options=EventOptions(enable_timing=False, busy_waited_sync=False))
eb.sync()
check(eb.is_done, "a blocking event completes")
buf.close(s)
s.sync()
sys.exit(0)
