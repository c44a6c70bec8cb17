#!/usr/bin/env python3
# promcheck.py - tests/runtime/metrics.t's checker: fetches rotad's /metrics, checks the text strictly against the
# Prometheus exposition format 0.0.4 and rota's conventions, and compares values with `rota status --json`.
#   promcheck.py format FILE                    strict format checks of a scrape
#   promcheck.py fetch HOST PORT OUT            GET /metrics into OUT (headers checked)
#   promcheck.py compare METRICS STATUS1 STATUS2   values against two rota status --json taken around the scrape
#   promcheck.py value METRICS NAME [LABEL=VALUE...]   prints a sample's value (sum over matching series)
#   promcheck.py idle HOST PORT N SECONDS       holds N idle connections open for SECONDS
import json
import math
import re
import socket
import sys
import time

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")


def fail(msg):
    print("promcheck: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_labels(s, lineno):
    labels, i = {}, 0
    while i < len(s):
        m = re.match(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", s[i:])
        if not m:
            fail("line %d: bad label at %r" % (lineno, s[i:]))
        name = m.group(1)
        i += m.end()
        val = ""
        while True:
            if i >= len(s):
                fail("line %d: unterminated label value" % lineno)
            c = s[i]
            if c == "\\":
                if i + 1 >= len(s) or s[i + 1] not in '\\"n':
                    fail("line %d: bad escape in label value" % lineno)
                val += {"\\": "\\", '"': '"', "n": "\n"}[s[i + 1]]
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                fail("line %d: newline in label value" % lineno)
            else:
                val += c
                i += 1
        if name in labels:
            fail("line %d: label %s twice" % (lineno, name))
        labels[name] = val
        if i < len(s):
            if s[i] != ",":
                fail("line %d: expected ',' between labels" % lineno)
            i += 1
    return labels


def parse(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}, checking the format strictly."""
    if not text.endswith("\n"):
        fail("the text does not end with a newline")
    fams, order, cur, seen = {}, [], None, set()
    for lineno, line in enumerate(text[:-1].split("\n"), 1):
        if line == "":
            fail("line %d: empty line" % lineno)
        if line.startswith("#"):
            m = re.match(r"# (HELP|TYPE) (\S+) (.*)$", line)
            if not m:
                fail("line %d: a comment that is neither HELP nor TYPE: %r" % (lineno, line))
            kind, name, rest = m.groups()
            if not NAME.match(name) or not name.startswith("rota_"):
                fail("line %d: bad metric name %r" % (lineno, name))
            f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            if f["samples"]:
                fail("line %d: %s for %s after its samples" % (lineno, kind, name))
            if kind == "HELP":
                if f["help"] is not None:
                    fail("line %d: second HELP for %s" % (lineno, name))
                f["help"] = rest
            else:
                if f["type"] is not None:
                    fail("line %d: second TYPE for %s" % (lineno, name))
                if rest not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    fail("line %d: bad type %r" % (lineno, rest))
                f["type"] = rest
            if name not in order:
                order.append(name)
            cur = name
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m:
            fail("line %d: not a sample: %r" % (lineno, line))
        name, _, lab, val = m.groups()
        labels = parse_labels(lab, lineno) if lab else {}
        try:
            v = float(val)
        except ValueError:
            fail("line %d: bad value %r" % (lineno, val))
        if math.isnan(v):
            fail("line %d: NaN" % lineno)
        fam = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and name[: -len(suf)] in fams and fams[name[: -len(suf)]]["type"] == "histogram":
                fam = name[: -len(suf)]
        if fam not in fams or fams[fam]["type"] is None:
            fail("line %d: sample of %s without a TYPE before it" % (lineno, name))
        if fam != cur:
            fail("line %d: sample of %s outside its family's block" % (lineno, name))
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            fail("line %d: duplicate series %r" % (lineno, key))
        seen.add(key)
        fams[fam]["samples"].append((name, labels, v))
    for name, f in fams.items():
        if f["type"] is None or f["help"] is None:
            fail("%s lacks TYPE or HELP" % name)
        if f["type"] == "counter":
            if not name.endswith("_total"):
                fail("counter %s does not end in _total" % name)
            if any(v < 0 for _, _, v in f["samples"]):
                fail("counter %s is negative" % name)
        elif name.endswith("_total"):
            fail("%s ends in _total but is a %s" % (name, f["type"]))
        if f["type"] == "histogram":
            series = {}
            for n, labels, v in f["samples"]:
                key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
                series.setdefault(key, {"buckets": [], "sum": None, "count": None})
                if n.endswith("_bucket"):
                    series[key]["buckets"].append((float(labels["le"]), v))
                elif n.endswith("_sum"):
                    series[key]["sum"] = v
                else:
                    series[key]["count"] = v
            for key, s in series.items():
                b = s["buckets"]
                if not b or b[-1][0] != math.inf or s["sum"] is None or s["count"] is None:
                    fail("histogram %s %r incomplete" % (name, key))
                if any(b[i][0] >= b[i + 1][0] or b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
                    fail("histogram %s %r: buckets not cumulative" % (name, key))
                if b[-1][1] != s["count"]:
                    fail("histogram %s %r: +Inf bucket %g != count %g" % (name, key, b[-1][1], s["count"]))
    return fams


def fetch(host, port, out):
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    if lines[0] != "HTTP/1.1 200 OK":
        fail("status line %r" % lines[0])
    h = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if h.get("content-type") != "text/plain; version=0.0.4; charset=utf-8":
        fail("content type %r" % h.get("content-type"))
    if int(h.get("content-length", -1)) != len(body):
        fail("content length %s != %d" % (h.get("content-length"), len(body)))
    with open(out, "wb") as f:
        f.write(body)


def samples(fams, name):
    fam = fams.get(name)
    if fam is None:
        fail("no family %s" % name)
    return fam["samples"]


def compare(mpath, s1path, s2path):
    fams = parse(open(mpath).read())
    a, b = json.load(open(s1path)), json.load(open(s2path))
    checked = 0

    def between(what, x, lo, hi, tol=0.0):
        nonlocal checked
        lo, hi = min(lo, hi), max(lo, hi)
        if not (lo - tol <= x <= hi + tol):
            fail("%s: metrics say %r, rota status %r and %r" % (what, x, lo, hi))
        checked += 1

    da = {d["uuid"]: d for d in a["devices"]}
    db = {d["uuid"]: d for d in b["devices"]}
    for name, key, scale, tol in (("rota_gpu_memory_capacity_bytes", "capacity", 1, 0),
                                  ("rota_gpu_memory_reserved_bytes", "reserved", 1, 0),
                                  ("rota_gpu_busy_seconds_total", "busy_ns", 1e-9, 1e-9),
                                  ("rota_gpu_holds_total", "hold_events", 1, 0),
                                  ("rota_gpu_clients", "clients", 1, 0)):
        for _, labels, v in samples(fams, name):
            u = labels["gpu"]
            if u not in da or u not in db:
                fail("%s: GPU %s not in rota status" % (name, u))
            if labels["gpu_index"] != str(da[u]["index"]):
                fail("%s: gpu_index %s, status index %d" % (name, labels["gpu_index"], da[u]["index"]))
            between("%s{gpu=%s}" % (name, u), v, da[u][key] * scale, db[u][key] * scale, tol)
    ca = {c["pid"]: c for c in a["clients"]}
    cb = {c["pid"]: c for c in b["clients"]}
    pids = set()
    for name, key, scale, tol in (("rota_client_memory_used_bytes", "used", 1, 0),
                                  ("rota_client_device_seconds_total", "busy_ns", 1e-9, 1e-9),
                                  ("rota_client_launches_total", "launches", 1, 0),
                                  ("rota_client_memory_limit_bytes", "limit", 1, 0)):
        for _, labels, v in samples(fams, name):
            pid = int(labels["pid"])
            if pid not in ca or pid not in cb:
                fail("%s: pid %d not in both rota status samples" % (name, pid))
            pids.add(pid)
            c = ca[pid]
            if labels["rota_job"] != c["comm"] or labels["class"] != c["priority"]:
                fail("%s: pid %d labels %r, status %r/%r" % (name, pid, labels, c["comm"], c["priority"]))
            between("%s{pid=%d}" % (name, pid), v, ca[pid][key] * scale, cb[pid][key] * scale, tol)
    if pids != set(ca) or pids != set(cb):
        fail("clients in metrics %r, in rota status %r" % (sorted(pids), sorted(ca)))
    nclients = samples(fams, "rota_clients")[0][2]
    between("rota_clients", nclients, len(a["clients"]), len(b["clients"]))
    print("compared %d values with rota status" % checked)


def value(mpath, name, sel):
    fams = parse(open(mpath).read())
    want = dict(x.split("=", 1) for x in sel)
    fam = name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and name[: -len(suf)] in fams:
            fam = name[: -len(suf)]
    tot = 0.0
    for n, labels, v in fams.get(fam, {"samples": []})["samples"]:
        if n == name and all(labels.get(k) == x for k, x in want.items()):
            tot += v
    print("%.9f" % tot)


def idle(host, port, n, seconds):
    conns = [socket.create_connection((host, int(port)), timeout=5) for _ in range(int(n))]
    time.sleep(float(seconds))
    for c in conns:
        c.close()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "format":
        fams = parse(open(sys.argv[2]).read())
        print("%d families, %d samples" % (len(fams), sum(len(f["samples"]) for f in fams.values())))
    elif cmd == "fetch":
        fetch(*sys.argv[2:5])
    elif cmd == "compare":
        compare(*sys.argv[2:5])
    elif cmd == "value":
        value(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "idle":
        idle(*sys.argv[2:6])
    else:
        fail("unknown command " + cmd)
