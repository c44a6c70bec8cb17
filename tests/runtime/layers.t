#!/usr/bin/env python3
# layers.t - rotad's files depend one way, with no circle: neither in who calls whom (the object graph: who defines
# what another object uses, by nm) nor in who includes whom (a module is a .c and its .h; x-internal.h belongs to
# x). runtime/lib/ is the floor below rotad: it uses nothing of runtime/ but the ABI header (runtime/abi.h).
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

build = os.environ.get("ROTA_BUILD")
src = os.environ.get("ROTA_SRCDIR")
if not build or not src:
    print("Bail out! ROTA_BUILD and ROTA_SRCDIR must be set (the Makefile's test target exports them)")
    sys.exit(255)
objs = sorted(glob.glob(os.path.join(build, "obj", "runtime", "*.o")) +
              glob.glob(os.path.join(build, "obj", "runtime", "lib", "*.o")))
if len(objs) < 10:
    print("Bail out! no runtime objects under %s/obj/runtime: build first" % build)
    sys.exit(255)


def node_of_obj(path):
    rel = os.path.relpath(path, os.path.join(build, "obj", "runtime"))
    return rel[:-2]


def call_graph(paths):
    """Edges a -> b where object a uses a symbol object b defines; why[(a, b)] names the symbols."""
    defs, undef = {}, {}
    for o in paths:
        name = node_of_obj(o)
        out = subprocess.run(["nm", "-g", o], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRVWCG":
                defs.setdefault(f[2], name)
            elif len(f) == 2 and f[0] == "U":
                undef.setdefault(name, set()).add(f[1])
    edges = {node_of_obj(o): set() for o in paths}
    why = {}
    for n, us in undef.items():
        for u in us:
            d = defs.get(u)
            if d and d != n:
                edges[n].add(d)
                why.setdefault((n, d), []).append(u)
    return edges, why


INCLUDE = re.compile(r'^\s*#\s*include\s+"runtime/([^"]+)\.h"', re.M)


def module_of(rel):
    """runtime-relative path without extension -> its module: x.c and x.h are x; x-internal.h belongs to x."""
    return re.sub(r"-internal$", "", rel)


def include_graph(root):
    edges, why = {}, {}
    for path in sorted(glob.glob(os.path.join(root, "*.[ch]")) + glob.glob(os.path.join(root, "lib", "*.[ch]"))):
        rel = os.path.relpath(path, root)
        a = module_of(rel.rsplit(".", 1)[0])
        edges.setdefault(a, set())
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            b = module_of(inc)
            if b != a:
                edges[a].add(b)
                edges.setdefault(b, set())
                why.setdefault((a, b), []).append(rel)
    return edges, why


def circles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    sys.setrecursionlimit(10000)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

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
            if len(c) > 1:
                sccs.append(sorted(c))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sccs


def explain(c, why):
    for a in c:
        for b in c:
            if (a, b) in why:
                print("#   %s -> %s: %s" % (a, b, " ".join(sorted(why[(a, b)])[:6])))


def floor_breaches(edges):
    """lib/* -> a runtime/ module other than abi (the floor reaching up)."""
    return sorted((a, b) for a, us in edges.items() if a.startswith("lib/")
                  for b in us if not b.startswith("lib/") and b != "abi")


n = 0
failed = False


def ok(cond, what):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    failed |= not cond


calls, cwhy = call_graph(objs)
cc = circles(calls)
ok(not cc, "no call circle among rotad's objects (%d objects)" % len(calls))
for c in cc:
    print("#   circle: %s" % " ".join(c))
    explain(c, cwhy)
cb = floor_breaches(calls)
ok(not cb, "runtime/lib/ calls nothing of runtime/")
for a, b in cb:
    print("#   %s -> %s: %s" % (a, b, " ".join(sorted(cwhy[(a, b)])[:6])))

root = os.path.join(src, "runtime")
incs, iwhy = include_graph(root)
ic = circles(incs)
ok(not ic, "no include circle among rotad's modules (%d modules)" % len(incs))
for c in ic:
    print("#   circle: %s" % " ".join(c))
    explain(c, iwhy)
ib = floor_breaches(incs)
ok(not ib, "runtime/lib/ includes nothing of runtime/ but abi.h")
for a, b in ib:
    print("#   %s includes %s" % (" ".join(iwhy[(a, b)]), b))

# The check itself: a circle put in on purpose is found, at both levels.
fake = {k: set(v) for k, v in calls.items()}
fake.setdefault("ledger", set()).add("server")  # server.o uses ledger.o; now ledger.o "uses" server.o too
ok(any("ledger" in c and "server" in c for c in circles(fake)), "the check notices a call circle (ledger <-> server)")
tmp = tempfile.mkdtemp(prefix="rota-layers-t.")
try:
    shutil.copytree(root, os.path.join(tmp, "runtime"))
    with open(os.path.join(tmp, "runtime", "ledger.h"), "a") as f:
        f.write('\n#include "runtime/server.h"\n')
    fi, _ = include_graph(os.path.join(tmp, "runtime"))
    ok(any("ledger" in c and "server" in c for c in circles(fi)),
       "the check notices an include circle (ledger.h including server.h)")
    with open(os.path.join(tmp, "runtime", "lib", "parse.h"), "a") as f:
        f.write('\n#include "runtime/config.h"\n')
    fi, _ = include_graph(os.path.join(tmp, "runtime"))
    ok(("lib/parse", "config") in floor_breaches(fi), "the check notices runtime/lib/ reaching up (parse.h)")
finally:
    shutil.rmtree(tmp)
print("1..%d" % n)
sys.exit(1 if failed else 0)
