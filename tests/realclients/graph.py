"""graph.py [REPLAYS] - a graph captured from a stream with cuda.core's GraphBuilder (two kernels), completed,
uploaded and launched REPLAYS times (default 10)."""
import sys

import numpy as np
from cuda.core.experimental import LaunchConfig, launch

from rc_common import check, compile_kernels, device

replays = int(sys.argv[1]) if len(sys.argv) > 1 else 10
dev = device()
s = dev.create_stream()
mod = compile_kernels(dev)
fill, scale = mod.get_kernel("rc_fill"), mod.get_kernel("rc_scale")
count = 1 << 18
buf = dev.allocate(count * 4, stream=s)
s.sync()
cfg = LaunchConfig(grid=count // 256, block=256)
gb = s.create_graph_builder().begin_building()
launch(gb, cfg, fill, buf, np.uint32(0x3F800000), np.uint64(count))
launch(gb, cfg, scale, buf, np.float32(3.0), np.uint64(count))
g = gb.end_building().complete()
g.upload(s)
for _ in range(replays):
    g.launch(s)
s.sync()
g.close()
gb.close()
buf.close(s)
s.sync()
check(True, "")
print(f"replays {replays}")
sys.exit(0)
