#!/usr/bin/env python3
# layers.t - librota's files depend one way: real (driver symbols) <- wrappers <- coordinator hooks; the only
# cycle allowed in shim/'s object graph (who defines what another file's object uses, by nm) is inside the
# coordinator client (shim/client*.c).
import glob
import os
import subprocess
import sys

build = os.environ.get("ROTA_BUILD")
if not build:
    print("Bail out! ROTA_BUILD must be set (the Makefile's test target exports it)")
    sys.exit(255)
objs = sorted(glob.glob(os.path.join(build, "obj", "shim", "*.o")))
if len(objs) < 5:
    print("Bail out! no shim objects under %s/obj/shim: build first" % build)
    sys.exit(255)
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
for n, us in undef.items():
    for u in us:
        d = defs.get(u)
        if d and d != n:
            edges[n].add(d)
            why.setdefault((n, d), []).append(u)

# strongly connected components (Tarjan, iterative enough for ~20 nodes)
sys.setrecursionlimit(10000)
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


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
        sccs.append(sorted(c))


for v in sorted(edges):
    if v not in index:
        visit(v)
n = 0
failed = False
for c in sccs:
    if len(c) < 2:
        continue
    n += 1
    inside = all(x == "client" or x.startswith("client-") for x in c)
    print("%s %d - %s cycle: %s" % ("ok" if inside else "not ok", n, "coordinator" if inside else "a", " ".join(c)))
    if not inside:
        failed = True
        for a in c:
            for b in c:
                if (a, b) in why:
                    print("#   %s -> %s: %s" % (a, b, " ".join(sorted(why[(a, b)])[:6])))
n += 1
print("%s %d - real.o uses nothing of the wrappers or the coordinator (%s)" % (
    "ok" if edges.get("real", set()) <= {"log", "options"} else "not ok", n, " ".join(sorted(edges.get("real", ())))))
failed |= not edges.get("real", set()) <= {"log", "options"}
print("1..%d" % n)
sys.exit(1 if failed else 0)
