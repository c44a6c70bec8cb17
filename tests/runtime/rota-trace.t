#!/bin/sh
# rota-trace.t - `rota trace`: ROTA_TRACE lines (holds, memory waits, placements, idle probes) into a Chrome/Perfetto
# trace: one process per pid, one track per GPU, slices for holds and waits with their reason, instants for the
# rest; a cut-off line is skipped and counted; usage errors exit 2, unreadable files 1.
set -u
: "${ROTA_BUILD:?ROTA_BUILD must name the build folder}"
ROTA=$ROTA_BUILD/bin/rota
T=$(mktemp -d /tmp/rota-trace-t.XXXXXX)
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
trap 'rm -rf "$T"' EXIT
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 missing"; exit 0; }

cat >"$T/a.jsonl" <<'L'
{"ts_us":1000,"pid":11,"ev":"place","gpu":0,"bytes":0,"uuid":"GPU-1","how":"rotad","wait_us":400}
{"ts_us":2000,"pid":11,"ev":"hold","gpu":0,"bytes":0,"reason":"prio"}
{"ts_us":2500,"pid":11,"ev":"release","gpu":0,"bytes":0,"reason":"prio"}
{"ts_us":3000,"pid":11,"ev":"mem_wait","gpu":1,"bytes":1048576}
{"ts_us":9000,"pid":11,"ev":"mem_grant","gpu":1,"bytes":1048576}
{"ts_us":9500,"pid":11,"ev":"hold","gpu":0,"bytes":0,"reason":"share"}
{"ts_us":9600,"pid":11,"ev":"release","gpu
L
cat >"$T/b.jsonl" <<'L'
{"ts_us":1500,"pid":22,"ev":"idle_probe","gpu":0,"bytes":0,"syscall":7,"after_us":120.5}
{"ts_us":4000,"pid":22,"ev":"mem_wait","gpu":0,"bytes":2048}
{"ts_us":5000,"pid":22,"ev":"mem_deny","gpu":0,"bytes":2048,"reason":"timeout"}
{"ts_us":12000,"pid":22,"ev":"hold","gpu":-1,"bytes":0,"reason":"quantum"}
L
"$ROTA" trace -o "$T/out.json" "$T/a.jsonl" "$T/b.jsonl" 2>"$T/err"; ok $? "rota trace exits 0"
grep -q "^rota trace: 1 line(s) that are not rota events skipped" "$T/err"; ok $? "the cut-off line is skipped and counted"
python3 - "$T/out.json" >"$T/check" 2>&1 <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
def one(pred, what):
    m = [e for e in ev if pred(e)]
    assert len(m) == 1, "%s: %d matches" % (what, len(m))
    return m[0]
names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert names == {(11, 1): "gpu 0", (11, 2): "gpu 1", (22, 1): "gpu 0", (22, 0): "rota"}, names
procs = sorted(e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name")
assert procs == ["pid 11", "pid 22"], procs
h = one(lambda e: e["name"] == "held (prio)", "prio hold")
assert (h["ph"], h["pid"], h["tid"], h["ts"], h["dur"]) == ("X", 11, 1, 1400.0, 500.0), h
assert h["args"]["begin"]["reason"] == "prio" and h["args"]["end"]["ev"] == "release"
w = one(lambda e: e["name"] == "memory wait (granted)", "granted wait")
assert (w["tid"], w["ts"], w["dur"], w["args"]["begin"]["bytes"]) == (2, 2400.0, 6000.0, 1048576), w
w = one(lambda e: e["name"] == "memory wait (denied)", "denied wait")
assert (w["pid"], w["dur"], w["args"]["end"]["reason"]) == (22, 1000.0, "timeout"), w
p = one(lambda e: e["name"] == "waiting for a GPU with room", "placement wait")
assert (p["ts"], p["dur"]) == (0.0, 400.0), p
one(lambda e: e["ph"] == "i" and e["name"] == "place", "place instant")
i = one(lambda e: e["name"] == "idle_probe", "idle probe")
assert i["ph"] == "i" and i["args"]["after_us"] == 120.5
o = [e for e in ev if e["name"].endswith("(to the end of the trace)")]
assert sorted((e["pid"], e["ts"]) for e in o) == [(11, 8900.0), (22, 11400.0)], o
assert d["otherData"]["skipped_lines"] == 1 and d["otherData"]["events"] == 10
assert d["otherData"]["t0_us"] == 600.0, d["otherData"]
print("ok")
P
ok $? "the trace: tracks, slices and instants as expected $(tr '\n' ' ' <"$T/check")"
"$ROTA" trace - <"$T/b.jsonl" | python3 -c 'import json,sys; json.load(sys.stdin)'; ok $? "'-' reads standard input, to standard output"
"$ROTA" trace 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "no file: usage error"
"$ROTA" trace --bogus x 2>/dev/null; rc=$?; [ $rc = 2 ]; ok $? "--bogus: usage error"
"$ROTA" trace "$T/none.jsonl" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "^rota trace: fatal: unable to open $T/none.jsonl" "$T/err"; ok $? "a missing file: 1"
echo "1..$n"
exit $fail
