#!/usr/bin/env python3
# layers.t - librota's files depend one way: real (driver symbols) <- wrappers <- client of rotad.
#
# Include level (the sources): a module is a file's name without its extension and without "-internal"
# (client-internal.h belongs to client, shim-internal.h to shim); module A depends on B when a file of A
# includes a header of B. No circle at all; real.c and real.h include no rota header but real.h (and the
# wrappers.def table); no file of shim/ includes anything under tools/ or tests/ (a simulator's or a test's
# header never reaches production code).
#
# Link level (the objects, by nm: who defines what another file's object uses): no cycle either (the client's
# files too: client.c and the tracker call the files above them through hooks that client-process.c sets), and
# real.o uses nothing of any other shim object.
import glob
import os
import sys

if not os.environ.get("ROTA_SRCDIR"):
    print("Bail out! ROTA_SRCDIR must be set (the Makefile's test target exports it)")
    sys.exit(255)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["ROTA_SRCDIR"], "tests", "tap"))
import layers  # noqa: E402

build, src = layers.dirs()
sources = sorted(glob.glob(os.path.join(src, "shim", "*.[ch]")) + glob.glob(os.path.join(src, "shim", "*.def")))
# Objects of files that exist (an object left by a renamed file in an old build folder is not librota's).
objs = sorted(o for o in glob.glob(os.path.join(build, "obj", "shim", "*.o"))
              if os.path.exists(os.path.join(src, "shim", os.path.basename(o)[:-2] + ".c")))
if len(objs) < 5 or len(sources) < 10:
    layers.bail("no shim sources under %s/shim or objects under %s/obj/shim: build first" % (src, build))


# ---- include level ----------------------------------------------------------------------------------------
def module(path):
    base = os.path.basename(path).rsplit(".", 1)[0]
    return base[:-len("-internal")] if base.endswith("-internal") else base


inc_edges, inc_why, includes = layers.include_graph(
    src, [os.path.relpath(f, src) for f in sources], module,
    lambda h: h.startswith("shim/") and h.endswith(".h"))
circles = layers.circles(inc_edges)
layers.check(not circles, "no include circle among shim/'s modules", layers.explain(circles, inc_why))
for f, allowed in (("shim/real.h", set()), ("shim/real.c", {"shim/real.h"})):
    extra = [h for h in includes.get(f, []) if not h.endswith(".def") and h not in allowed]
    layers.check(f in includes and not extra, "%s includes no rota header%s (%s)" % (
        f, " but " + " ".join(sorted(allowed)) if allowed else "", " ".join(extra) or "none other"))
outside = ["%s includes %s" % (f, h) for f, incs in sorted(includes.items()) for h in incs
           if h.startswith(("tools/", "tests/"))]
layers.check(not outside, "no file of shim/ includes anything under tools/ or tests/", outside)

# ---- link level -------------------------------------------------------------------------------------------
edges, why = layers.object_graph(objs, lambda o: os.path.basename(o)[:-2])
cycles = layers.circles(edges)
layers.check(not cycles, "no call cycle among shim/'s objects", layers.explain(cycles, why))
layers.check(not edges.get("real"), "real.o uses nothing of any other shim object (%s)" % (
    " ".join(sorted(edges.get("real", ()))) or "none"))
layers.done()
