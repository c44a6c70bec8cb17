#!/usr/bin/env python3
# layers.t - simcuda's files depend one way, down to its core (api-core.c) and its node model: no cycle in the
# object graph (who defines what another file's object uses, by nm) of tools/simcuda and tools/simnvml, none
# in their include graph (module to module, a header belonging to the module it is named after); the core
# uses no api-* file, the executor (api-exec.c) nothing of the stream API above it, and the node model
# nothing of the API layer.
import glob
import os
import re
import sys

if not os.environ.get("ROTA_SRCDIR"):
    print("Bail out! ROTA_SRCDIR must be set (the Makefile's test target exports it)")
    sys.exit(255)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["ROTA_SRCDIR"], "tests", "tap"))
import layers  # noqa: E402

build, src = layers.dirs()
DIRS = ("tools/simcuda", "tools/simnvml")
objs = sorted(o for d in DIRS for o in glob.glob(os.path.join(build, "obj", d, "*.o")))
if len(objs) < 10:
    layers.bail("no simcuda objects under %s/obj/tools/simcuda: build first" % build)
check = layers.check

# ---- the object graph ----
edges, why = layers.object_graph(objs, lambda o: os.path.relpath(o, os.path.join(build, "obj"))[:-2])
cycles = layers.circles(edges)
check(not cycles, "no cycle in the object graph of %d objects" % len(objs),
      layers.explain(cycles, why, os.path.basename, 5))
core = "tools/simcuda/api-core"
if core in edges:
    up = sorted(b for b in edges[core] if os.path.basename(b).startswith("api-"))
    check(not up, "api-core.o uses no api-* object%s" % ((": " + " ".join(up)) if up else ""))
    users = [a for a in edges if os.path.basename(a).startswith("api-") and a != core and core in edges[a]]
    check(len(users) >= 5, "the api-* files use the core (%d of them)" % len(users))
else:
    check(False, "tools/simcuda/api-core.c exists (registry, allocation, clock, fork)")
# The executor runs ops; the stream API, capture and the entry points above it submit them: it calls none.
exe = "tools/simcuda/api-exec"
above = {"api-stream", "api-capture", "api-graph", "api-ctx", "api-launch", "api-mem", "api-memasync", "api-init",
         "api-proc"}
up = sorted(b for b in edges.get(exe, ()) if os.path.basename(b) in above)
check(exe in edges and not up, "api-exec.o (the executor) uses nothing of the stream API or above it%s" % (
    (": " + " ".join(up)) if up else ""))
# The node model (tools/simcuda without api-*, and simnvml) knows nothing of the Driver API layer.
model = [a for a in edges if not os.path.basename(a).startswith("api-")]
up = sorted("%s -> %s" % (os.path.basename(a), os.path.basename(b)) for a in model for b in edges[a]
            if os.path.basename(b).startswith("api-"))
check(not up, "the node model and simnvml use no api-* object%s" % ((": " + ", ".join(up)) if up else ""))

# ---- the include graph, module to module ----
def module(path):
    """foo.c, foo.h and foo-internal.h belong to module foo (directory included)."""
    d, b = os.path.split(path)
    b = re.sub(r"(-internal)?\.[ch]$", "", b)
    return os.path.join(d, b)


files = sorted(os.path.relpath(f, src) for d in DIRS for f in glob.glob(os.path.join(src, d, "*.[ch]")))
ied, iwhy, _ = layers.include_graph(src, files, module, lambda h: h.startswith(DIRS))
icycles = layers.circles(ied)
check(not icycles, "no cycle in the include graph of %d files" % len(files), layers.explain(icycles, iwhy))
up = sorted(b for b in ied.get(core, ()) if os.path.basename(b).startswith("api") and b != core)
check(core in ied and not up, "api-core's files include no other api-* header%s" % (
    (": " + " ".join(up)) if up else ""))
up = sorted("%s includes %s" % (a, b) for a in ied if not os.path.basename(a).startswith("api")
            for b in ied[a] if os.path.basename(b).startswith("api"))
check(not up, "the node model and simnvml include no api-* header%s" % ((": " + "; ".join(up)) if up else ""))
layers.done()
