"""nvml.py [LIMIT_MIB [CUDA_FIRST]] - pynvml (nvidia-ml-py): driver version, device count, name, memory
(total, used, free) and the compute processes; with LIMIT_MIB, the total must equal it (rota's limit). With
CUDA_FIRST=1 the process initialises CUDA first (cuda.core), else NVML is asked before any CUDA call.
Prints "total_mib N"."""
import os
import sys

import pynvml

from rc_common import check, device

limit = int(sys.argv[1]) if len(sys.argv) > 1 else 0
if len(sys.argv) > 2 and sys.argv[2] == "1":
    dev = device()
    buf = dev.allocate(8 << 20, stream=dev.default_stream)
pynvml.nvmlInit()
check(pynvml.nvmlDeviceGetCount() >= 1, "a device")
check(pynvml.nvmlSystemGetDriverVersion(), "a driver version")
h = pynvml.nvmlDeviceGetHandleByIndex(0)
check(pynvml.nvmlDeviceGetName(h), "a name")
mem = pynvml.nvmlDeviceGetMemoryInfo(h)
check(mem.used + mem.free <= mem.total, f"used {mem.used} + free {mem.free} <= total {mem.total}")
total_mib = mem.total >> 20
print(f"total_mib {total_mib}")
if limit:
    check(total_mib == limit, f"NVML's total {total_mib} MiB is the limit {limit} MiB")
procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
print(f"processes {len(procs)} self {int(any(p.pid == os.getpid() for p in procs))}")
pynvml.nvmlShutdown()
sys.exit(0)
