"""latency.py load SECONDS [WAVES [DEPTH]] | probe COUNT - the two sides of a priority check. load: launches a
kernel whose grid covers the device WAVES times over (default 50) back to back for SECONDS, DEPTH launches
(default 64) between synchronisations, and prints "load N". probe: COUNT times, launches a one-block kernel and waits for it, and prints the median and 90th
percentile of that round trip in ms ("probe p50 P50 p90 P90"); it starts after a warm-up of 5 rounds."""
import statistics
import sys
import time

import numpy as np
from cuda.core.experimental import LaunchConfig, launch

from rc_common import compile_kernels, device

mode, arg = sys.argv[1], float(sys.argv[2])
dev = device()
s = dev.create_stream()
k = compile_kernels(dev).get_kernel("rc_fill")
if mode == "load":
    waves = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    depth = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    threads = dev.properties.multiprocessor_count * 2048 * waves
    n = threads
    buf = dev.allocate(4 << 20, stream=s)
    cfg = LaunchConfig(grid=threads // 256, block=256)
    end = time.monotonic() + arg
    done = 0
    print("load started", flush=True)
    while time.monotonic() < end:
        for _ in range(depth):
            launch(s, cfg, k, buf, np.uint32(done), np.uint64(0))
            done += 1
        s.sync()
    print(f"load {done}", flush=True)
elif mode == "burst":
    # ARG bursts of 10 kernels of 50 waves (0.5 ms each on simcuda) each, 20 ms apart; prints the median and
    # 90th percentile time from a burst's first launch to its end, in ms
    threads = dev.properties.multiprocessor_count * 2048 * 50
    buf = dev.allocate(4 << 20, stream=s)
    cfg = LaunchConfig(grid=threads // 256, block=256)
    lat = []
    for i in range(int(arg) + 2):
        t0 = time.perf_counter()
        for j in range(10):
            launch(s, cfg, k, buf, np.uint32(j), np.uint64(0))
        s.sync()
        if i >= 2:
            lat.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.02)
    lat.sort()
    print(f"burst p50 {statistics.median(lat):.3f} p90 {lat[int(len(lat) * 0.9)]:.3f}", flush=True)
else:
    buf = dev.allocate(4096, stream=s)
    cfg = LaunchConfig(grid=1, block=256)
    lat = []
    for i in range(int(arg) + 5):
        t0 = time.perf_counter()
        launch(s, cfg, k, buf, np.uint32(i), np.uint64(256))
        s.sync()
        if i >= 5:
            lat.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.002)
    lat.sort()
    print(f"probe p50 {statistics.median(lat):.3f} p90 {lat[int(len(lat) * 0.9)]:.3f}", flush=True)
