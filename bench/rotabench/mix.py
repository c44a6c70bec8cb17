# mix.py - job mixes: the file format, the policies a run can use, loading and scaling a mix.
import json
import os
import re
import sys
import time


MIX_FORMAT = """A mix is a JSON file: {"name", "description", "gpus": 1-16, "env": {SIMCUDA_* knobs, e.g. SIMCUDA_MEM},
"policies": [subset of the policies, default all but shared-mps and rota-mps], "jobs": [{"name", "arrive_s", "priority": high|normal|low,
"weight", "mem" (what `rota run --mem` is told; default the workload's), "device" (what the job asks for,
default 0), "workload": {workload options without the dashes: kind, mem, kernels, load, iters, ...}}]}.
--scale multiplies arrive_s and the workload's duration/iters/requests, never kernel lengths."""

# bench/rotabench/mix.py: the source tree is two folders up; the mixes stay in scripts/mixes/ (README's map).
SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIXDIR = os.path.join(SRCDIR, "scripts", "mixes")

QUANTUM_MS = 20
# Policies: how a run launches its jobs. "rota" rows need build/bin/rota and build/lib/librota.so.
# --host-check: the rota policies again on a slowed host (runner.py), their rows named POLICY + SLOW_SUFFIX
SLOW_SUFFIX = "@slow"
SLOW_TIMER_SLACK_NS = 1000000  # the slowed host's coarse timers: a job's timed sleep may end up to 1 ms late

POLICIES = {
    "exclusive": {"mode": "exclusive", "desc": "one job per GPU at a time, queued in arrival order"},
    "shared": {"mode": "shared", "desc": "all jobs at once, no rota (uncoordinated sharing)"},
    "rota": {"mode": "rota", "desc": "rota: priority classes + weighted fair share (job's own settings)"},
    "rota-fair": {"mode": "rota", "desc": "rota: every job in one class, weighted fair share only",
                  "priority": "normal"},
    # rotad's other launch policy, for jobs that thrash when interleaved: the lower jobs take turns of
    # QUANTUM_MS, the least-served first, instead of sharing the GPU by weight; the high class still preempts
    "rota-quantum": {"mode": "rota", "desc": "rota: priority classes, the lower jobs take turns of %d ms "
                     "(rotad --quantum-ms)" % QUANTUM_MS, "rotad_args": ["--quantum-ms", str(QUANTUM_MS)]},
    # issue 33: the GPU's own lever beside long kernels. simcuda with an MPS server per GPU (SIMCUDA_MPS=1): the
    # jobs' kernels run concurrently, each process on its share of the SMs
    "shared-mps": {"mode": "shared", "opt_in": True, "desc": "MPS, no rota: every job at once on an MPS server, each on all SMs",
                   "env": {"SIMCUDA_MPS": "1"}},
    "rota-mps": {"mode": "rota", "opt_in": True, "desc": "rota --mps: an MPS server per GPU (simcuda's, with its stand-in control "
                 "daemon), the lower classes on rotad's SM shares (normal 60 %, low 40 %), high unrestricted, holds as "
                 "in rota", "env": {"SIMCUDA_MPS": "1"}, "mps": True},
}
SCALED_WORKLOAD_KEYS = ("duration", "iters", "requests")


def read_priorities(path=os.path.join(SRCDIR, "runtime", "lib", "prio.c")):
    """The priority classes, read from their one table, runtime/lib/prio.c's prio_names, in its order."""
    with open(path) as f:
        names = re.findall(r'\[ROTA_PRIO_\w+\]\s*=\s*"(\w+)"', f.read())
    if not names:
        raise RuntimeError("%s: no priority class names found (its prio_names table changed form?)" % path)
    return tuple(names)


# The priority classes ("high", "normal", "low"), parsed by prio.c's rule: any case.
PRIORITIES = read_priorities()


def parse_priority(s):
    """The class a name gives ("HIGH" -> "high"), as ROTA_PRIORITY and rota run --priority read it; None if none."""
    return next((p for p in PRIORITIES if isinstance(s, str) and s.lower() == p), None)


class BenchError(Exception):
    pass


def die_usage(msg):
    sys.stderr.write("bench: usage error: %s\n(see scripts/bench --help)\n" % msg)
    sys.exit(2)


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the clock the workload and ROTA_TRACE use


# ---- mixes ------------------------------------------------------------------------------------------------
def load_mix(arg, scale):
    path = arg
    if not os.path.exists(path):
        for cand in (os.path.join(MIXDIR, arg), os.path.join(MIXDIR, arg + ".json")):
            if os.path.exists(cand):
                path = cand
                break
        else:
            die_usage("no mix '%s' (a file, or one of: %s)" % (arg, ", ".join(
                sorted(f[:-5] for f in os.listdir(MIXDIR) if f.endswith(".json")))))
    try:
        with open(path) as f:
            mix = json.load(f)
    except (OSError, ValueError) as e:
        die_usage("mix %s: %s" % (path, e))
    where = "mix %s" % path
    for key in ("name", "gpus", "jobs"):
        if key not in mix:
            die_usage("%s: missing '%s'" % (where, key))
    if not isinstance(mix["gpus"], int) or not 1 <= mix["gpus"] <= 16:
        die_usage("%s: gpus must be an integer from 1 to 16" % where)
    mix.setdefault("env", {})
    # the MPS policies (opt-in) run where a mix names them or --policies asks
    mix.setdefault("policies", [p for p in POLICIES if not POLICIES[p].get("opt_in")])
    mix.setdefault("description", "")
    for p in mix["policies"]:
        if p not in POLICIES:
            die_usage("%s: unknown policy '%s' (known: %s)" % (where, p, ", ".join(POLICIES)))
    names = set()
    for i, job in enumerate(mix["jobs"]):
        jw = "%s: job %d" % (where, i)
        if "name" not in job or "workload" not in job or "kind" not in job["workload"]:
            die_usage("%s: needs name and workload.kind" % jw)
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", job["name"]) or job["name"] in names:
            die_usage("%s: name '%s' must be unique, letters/digits/._-" % (jw, job["name"]))
        names.add(job["name"])
        job.setdefault("arrive_s", 0.0)
        job.setdefault("priority", "normal")
        job.setdefault("weight", 1)
        job.setdefault("device", 0)
        if parse_priority(job["priority"]) is None:
            die_usage("%s: priority must be one of %s" % (jw, "/".join(PRIORITIES)))
        job["priority"] = parse_priority(job["priority"])
        job["workload"].setdefault("mem", "256M")
        job.setdefault("mem", job["workload"]["mem"])
        job["workload"].setdefault("seed", i + 1)
        # scale the length of the run, never the kernels (they are sized against the engine's timeslice)
        job["arrive_s"] = float(job["arrive_s"]) * scale
        for k in SCALED_WORKLOAD_KEYS:
            if k in job["workload"]:
                v = job["workload"][k] * scale
                job["workload"][k] = max(1, int(round(v))) if k != "duration" else round(max(v, 0.2), 3)
    mix["path"] = path
    hp = [j for j in mix["jobs"] if j["priority"] == "high"]
    mix["hp"] = hp[0]["name"] if hp else None
    return mix


def workload_args(job):
    args = []
    for k, v in job["workload"].items():
        args += ["--" + k.replace("_", "-"), str(v)]
    return args
