#!/usr/bin/env python3
# layers.t - rotad's files depend one way, with no circle: neither in who calls whom (the object graph: who defines
# what another object uses, by nm) nor in who includes whom (a module is a .c and its .h; x-internal.h belongs to
# x). runtime/lib/ is the floor below rotad: it uses nothing of runtime/ but the ABI header (runtime/abi.h).
import glob
import os
import re
import shutil
import sys
import tempfile

if not os.environ.get("ROTA_SRCDIR"):
    print("Bail out! ROTA_SRCDIR must be set (the Makefile's test target exports it)")
    sys.exit(255)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["ROTA_SRCDIR"], "tests", "tap"))
import layers  # noqa: E402

build, src = layers.dirs()
objs = sorted(glob.glob(os.path.join(build, "obj", "runtime", "*.o")) +
              glob.glob(os.path.join(build, "obj", "runtime", "lib", "*.o")))
if len(objs) < 10:
    layers.bail("no runtime objects under %s/obj/runtime: build first" % build)


def node_of_obj(path):
    rel = os.path.relpath(path, os.path.join(build, "obj", "runtime"))
    return rel[:-2]


def module_of(path):
    """"runtime/x.c", "runtime/x.h" and "runtime/x-internal.h" -> module x (lib/x for runtime/lib/)."""
    return re.sub(r"(-internal)?\.[a-z]+$", "", path[len("runtime/"):])


def include_graph(root):
    """The include graph of the runtime/ tree under root (the source tree, or a copy of it)."""
    files = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "runtime", "*.[ch]")) +
                   glob.glob(os.path.join(root, "runtime", "lib", "*.[ch]")))
    edges, why, _ = layers.include_graph(root, files, module_of,
                                         lambda h: h.startswith("runtime/") and h.endswith(".h"))
    return edges, why


def floor_breaches(edges):
    """lib/* -> a runtime/ module other than abi (the floor reaching up)."""
    return sorted((a, b) for a, us in edges.items() if a.startswith("lib/")
                  for b in us if not b.startswith("lib/") and b != "abi")


calls, cwhy = layers.object_graph(objs, node_of_obj)
cc = layers.circles(calls)
layers.check(not cc, "no call circle among rotad's objects (%d objects)" % len(calls), layers.explain(cc, cwhy))
cb = floor_breaches(calls)
layers.check(not cb, "runtime/lib/ calls nothing of runtime/",
             ["%s -> %s: %s" % (a, b, " ".join(sorted(cwhy[(a, b)])[:6])) for a, b in cb])

incs, iwhy = include_graph(src)
ic = layers.circles(incs)
layers.check(not ic, "no include circle among rotad's modules (%d modules)" % len(incs), layers.explain(ic, iwhy))
ib = floor_breaches(incs)
layers.check(not ib, "runtime/lib/ includes nothing of runtime/ but abi.h", [w for a, b in ib for w in iwhy[(a, b)]])

# The check itself: a circle put in on purpose is found, at both levels.
fake = {k: set(v) for k, v in calls.items()}
fake.setdefault("ledger", set()).add("server")  # server.o uses ledger.o; now ledger.o "uses" server.o too
layers.check(any("ledger" in c and "server" in c for c in layers.circles(fake)),
             "the check notices a call circle (ledger <-> server)")
tmp = tempfile.mkdtemp(prefix="rota-layers-t.")
try:
    shutil.copytree(os.path.join(src, "runtime"), os.path.join(tmp, "runtime"))
    with open(os.path.join(tmp, "runtime", "ledger.h"), "a") as f:
        f.write('\n#include "runtime/server.h"\n')
    fi, _ = include_graph(tmp)
    layers.check(any("ledger" in c and "server" in c for c in layers.circles(fi)),
                 "the check notices an include circle (ledger.h including server.h)")
    with open(os.path.join(tmp, "runtime", "lib", "parse.h"), "a") as f:
        f.write('\n#include "runtime/config.h"\n')
    fi, _ = include_graph(tmp)
    layers.check(("lib/parse", "config") in floor_breaches(fi), "the check notices runtime/lib/ reaching up (parse.h)")
finally:
    shutil.rmtree(tmp)
layers.done()
