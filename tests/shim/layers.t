#!/usr/bin/env python3
# layers.t - librota's files depend one way: real (driver symbols) <- wrappers <- client of rotad.
#
# Include level (the sources): a module is a file's name without its extension and without "-internal"
# (client-internal.h belongs to client, shim-internal.h to shim); module A depends on B when a file of A
# includes a header of B. No circle at all; real.c and real.h include no rota header but real.h (and the
# wrappers.def table); no file of shim/ includes anything under tools/ or tests/ (a simulator's or a test's
# header never reaches production code).
#
# Link level (the objects, by nm: who defines what another file's object uses): the only cycle allowed is
# inside the client of rotad (shim/client*.c), and real.o uses nothing of any other shim object.
import glob
import os
import re
import subprocess
import sys

build = os.environ.get("ROTA_BUILD")
src = os.environ.get("ROTA_SRCDIR")
if not build or not src:
    print("Bail out! ROTA_BUILD and ROTA_SRCDIR must be set (the Makefile's test target exports them)")
    sys.exit(255)
sources = sorted(glob.glob(os.path.join(src, "shim", "*.[ch]")) + glob.glob(os.path.join(src, "shim", "*.def")))
# Objects of files that exist (an object left by a renamed file in an old build folder is not librota's).
objs = sorted(o for o in glob.glob(os.path.join(build, "obj", "shim", "*.o"))
              if os.path.exists(os.path.join(src, "shim", os.path.basename(o)[:-2] + ".c")))
if len(objs) < 5 or len(sources) < 10:
    print("Bail out! no shim sources under %s/shim or objects under %s/obj/shim: build first" % (src, build))
    sys.exit(255)
n = 0
failed = False


def check(ok, what, details=()):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    for d in details:
        print("#   %s" % d)
    failed |= not ok


def sccs_of(edges):
    """Strongly connected components of a graph {node: set(node)} (Tarjan; ~30 nodes)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                c.append(w)
                if w == v:
                    break
            out.append(sorted(c))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


# ---- include level ----------------------------------------------------------------------------------------
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def module(path):
    base = os.path.basename(path).rsplit(".", 1)[0]
    return base[:-len("-internal")] if base.endswith("-internal") else base


includes = {}  # "shim/x.c" -> ["shim/real.h", "runtime/abi.h", ...]
for f in sources:
    with open(f, encoding="utf-8") as fh:
        includes["shim/" + os.path.basename(f)] = INCLUDE.findall(fh.read())
inc_edges = {module(f): set() for f in includes}
inc_why = {}
for f, incs in includes.items():
    for h in incs:
        if h.startswith("shim/") and h.endswith(".h") and module(h) != module(f):
            inc_edges[module(f)].add(module(h))
            inc_edges.setdefault(module(h), set())
            inc_why.setdefault((module(f), module(h)), []).append("%s includes %s" % (f, h))
circles = [c for c in sccs_of(inc_edges) if len(c) > 1]
details = []
for c in circles:
    details.append("circle: " + " ".join(c))
    details += [w for a in c for b in c for w in inc_why.get((a, b), [])]
check(not circles, "no include circle among shim/'s modules", details)
for f, allowed in (("shim/real.h", set()), ("shim/real.c", {"shim/real.h"})):
    extra = [h for h in includes.get(f, []) if not h.endswith(".def") and h not in allowed]
    check(f in includes and not extra, "%s includes no rota header%s (%s)" % (
        f, " but " + " ".join(sorted(allowed)) if allowed else "", " ".join(extra) or "none other"))
outside = ["%s includes %s" % (f, h) for f, incs in sorted(includes.items()) for h in incs
           if h.startswith(("tools/", "tests/"))]
check(not outside, "no file of shim/ includes anything under tools/ or tests/", outside)

# ---- link level -------------------------------------------------------------------------------------------
defs, undef = {}, {}
for o in objs:
    name = os.path.basename(o)[:-2]
    out = subprocess.run(["nm", "-g", o], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRVWCG":
            defs.setdefault(f[2], name)
        elif len(f) == 2 and f[0] == "U":
            undef.setdefault(name, set()).add(f[1])
edges = {os.path.basename(o)[:-2]: set() for o in objs}
why = {}
for user, us in undef.items():
    for u in us:
        d = defs.get(u)
        if d and d != user:
            edges[user].add(d)
            why.setdefault((user, d), []).append(u)

for c in sccs_of(edges):
    if len(c) < 2:
        continue
    inside = all(x == "client" or x.startswith("client-") for x in c)
    details = [] if inside else ["%s -> %s: %s" % (a, b, " ".join(sorted(why[(a, b)])[:6]))
                                 for a in c for b in c if (a, b) in why]
    check(inside, "%s cycle: %s" % ("the client's own" if inside else "a", " ".join(c)), details)
check(not edges.get("real"), "real.o uses nothing of any other shim object (%s)" % (
    " ".join(sorted(edges.get("real", ()))) or "none"))
print("1..%d" % n)
sys.exit(1 if failed else 0)
