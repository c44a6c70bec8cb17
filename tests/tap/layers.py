# layers.py - what the layers.t scripts share: TAP output, the object graph (by nm), the include graph, and its
# circles (Tarjan's strongly connected components). Each tests/*/layers.t keeps only its own rules.
#
# A script imports it through ROTA_SRCDIR (sys.path gets $ROTA_SRCDIR/tests/tap) with sys.dont_write_bytecode
# set, so that running a test leaves no __pycache__ in the source tree.
import os
import re
import subprocess
import sys

_n = 0
_failed = False


def bail(why):
    """Stops the test: setup failed."""
    print("Bail out! %s" % why)
    sys.exit(255)


def dirs():
    """(ROTA_BUILD, ROTA_SRCDIR), which the Makefile's test target exports; bails without them."""
    build = os.environ.get("ROTA_BUILD")
    src = os.environ.get("ROTA_SRCDIR")
    if not build or not src:
        bail("ROTA_BUILD and ROTA_SRCDIR must be set (the Makefile's test target exports them)")
    return build, src


def check(ok, what, details=()):
    """One TAP test point; details are printed as diagnostics under it."""
    global _n, _failed
    _n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", _n, what))
    for d in details:
        print("#   %s" % d)
    _failed |= not ok


def done():
    """Prints the plan (the count of checks made) and exits 1 if any failed."""
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)


def circles(edges):
    """The strongly connected components of more than one node of a graph {node: set(node)} (Tarjan), each
    sorted. Nodes that appear only as targets count as nodes without edges."""
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


def explain(cs, why, name=str, most=6):
    """Diagnostic lines for circles cs: the circle's nodes, then each edge inside it with (up to most of) its
    reasons from why[(a, b)]. name shortens a node for display."""
    lines = []
    for c in cs:
        lines.append("circle: " + " ".join(name(x) for x in c))
        lines += ["%s -> %s: %s" % (name(a), name(b), "; ".join(sorted(why[(a, b)])[:most]))
                  for a in c for b in c if (a, b) in why]
    return lines


def object_graph(objs, name):
    """Edges a -> b where object a uses a global symbol that object b defines (nm -g); nodes are name(path) of
    every object, why[(a, b)] lists the symbols. A symbol defined twice belongs to the first object (in the order
    of objs)."""
    defs, undef = {}, {}
    for o in objs:
        node = name(o)
        out = subprocess.run(["nm", "-g", o], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        undef.setdefault(node, set())
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRVWCG":
                defs.setdefault(f[2], node)
            elif len(f) == 2 and f[0] == "U":
                undef[node].add(f[1])
    edges = {name(o): set() for o in objs}
    why = {}
    for a, us in undef.items():
        for u in us:
            b = defs.get(u)
            if b and b != a:
                edges[a].add(b)
                why.setdefault((a, b), []).append(u)
    return edges, why


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def include_graph(root, files, module, follow):
    """The include graph, module to module, of files (paths relative to root, as the sources name them in their
    #include "..." lines): an edge module(f) -> module(h) for each h that f includes and follow(h) accepts, where
    the two modules differ. Returns (edges, why, includes): why[(a, b)] says "f includes h", includes maps each
    file to every quoted include it has."""
    edges, why, includes = {}, {}, {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            includes[f] = INCLUDE.findall(fh.read())
        a = module(f)
        edges.setdefault(a, set())
        for h in includes[f]:
            if not follow(h):
                continue
            b = module(h)
            if b != a:
                edges[a].add(b)
                edges.setdefault(b, set())
                why.setdefault((a, b), []).append("%s includes %s" % (f, h))
    return edges, why, includes
