#!/usr/bin/env python3
# layers.t - simcuda's files depend one way, down to its core (api-core.c) and its node model: no cycle in the
# object graph (who defines what another file's object uses, by nm) of tools/simcuda and tools/simnvml, none
# in their include graph (module to module, a header belonging to the module it is named after); the core
# uses no api-* file, the executor (api-exec.c) nothing of the stream API above it, and the node model
# nothing of the API layer.
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
DIRS = ("tools/simcuda", "tools/simnvml")
objs = sorted(o for d in DIRS for o in glob.glob(os.path.join(build, "obj", d, "*.o")))
if len(objs) < 10:
    print("Bail out! no simcuda objects under %s/obj/tools/simcuda: build first" % build)
    sys.exit(255)


def scc(edges):
    """Strongly connected components of a graph {node: set(node)} (Tarjan)."""
    sys.setrecursionlimit(10000)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
    return [c for c in out if len(c) > 1]


n = 0
failed = False


def check(ok, what):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    failed |= not ok


# ---- the object graph ----
defs, undef = {}, {}
for o in objs:
    name = os.path.relpath(o, os.path.join(build, "obj"))[:-2]
    out = subprocess.run(["nm", "-g", o], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    undef[name] = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRVWCG":
            defs.setdefault(f[2], name)
        elif len(f) == 2 and f[0] == "U":
            undef[name].add(f[1])
edges, why = {}, {}
for a, us in undef.items():
    edges[a] = set()
    for u in us:
        b = defs.get(u)
        if b and b != a:
            edges[a].add(b)
            why.setdefault((a, b), []).append(u)
cycles = scc(edges)
check(not cycles, "no cycle in the object graph of %d objects" % len(objs))
for c in cycles:
    print("#   cycle: %s" % " ".join(os.path.basename(x) for x in c))
    for a in c:
        for b in c:
            if (a, b) in why:
                print("#     %s -> %s: %s" % (os.path.basename(a), os.path.basename(b),
                                             " ".join(sorted(why[(a, b)])[:5])))
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


inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
files = sorted(os.path.relpath(f, src) for d in DIRS for f in glob.glob(os.path.join(src, d, "*.[ch]")))
ied, iwhy = {}, {}
for f in files:
    with open(os.path.join(src, f)) as fh:
        text = fh.read()
    a = module(f)
    ied.setdefault(a, set())
    for h in inc_re.findall(text):
        if not h.startswith(DIRS):
            continue
        b = module(h)
        if b != a:
            ied[a].add(b)
            iwhy.setdefault((a, b), []).append("%s includes %s" % (f, h))
icycles = scc(ied)
check(not icycles, "no cycle in the include graph of %d files" % len(files))
for c in icycles:
    print("#   cycle: %s" % " ".join(c))
    for a in c:
        for b in c:
            if (a, b) in iwhy:
                print("#     %s" % "; ".join(iwhy[(a, b)]))
up = sorted(b for b in ied.get(core, ()) if os.path.basename(b).startswith("api") and b != core)
check(core in ied and not up, "api-core's files include no other api-* header%s" % (
    (": " + " ".join(up)) if up else ""))
up = sorted("%s includes %s" % (a, b) for a in ied if not os.path.basename(a).startswith("api")
            for b in ied[a] if os.path.basename(b).startswith("api"))
check(not up, "the node model and simnvml include no api-* header%s" % ((": " + "; ".join(up)) if up else ""))
print("1..%d" % n)
sys.exit(1 if failed else 0)
