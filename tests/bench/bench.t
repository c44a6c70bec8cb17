#!/usr/bin/env python3
# bench.t - smoke test of the workload program (options, record, OOM, determinism) and of scripts/bench on a tiny mix.
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

n_tests = 0
failed = 0


def ok(cond, name):
    global n_tests, failed
    n_tests += 1
    if not cond:
        failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", n_tests, name), flush=True)
    return cond


def skip(reason):
    global n_tests
    n_tests += 1
    print("ok %d # skip %s" % (n_tests, reason), flush=True)


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line, file=sys.stderr)


def bail(msg):
    print("Bail out! " + msg, flush=True)
    sys.exit(255)


build = os.environ.get("ROTA_BUILD")
src = os.environ.get("ROTA_SRCDIR")
if not build or not src:
    bail("ROTA_BUILD and ROTA_SRCDIR must be set (the Makefile's test target exports them)")
workload = os.path.join(build, "bin", "workload")
for p in (workload, os.path.join(build, "bin", "simcuda-stat"), os.path.join(build, "lib", "libcuda.so.1")):
    if not os.path.exists(p):
        bail("%s is missing: build it first" % p)

tmp = tempfile.mkdtemp(prefix="bench-t.")
node = "bench-t-%d" % os.getpid()
env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMCUDA_", "ROTA_"))}
env.pop("LD_PRELOAD", None)
env.update(LD_LIBRARY_PATH=os.path.join(build, "lib"), SIMCUDA_NODE=node, SIMCUDA_MEM="1G",
           ROTA_BUILD=build, ROTA_SRCDIR=src)


def wl(*args, extra_env=None, timeout=60):
    e = dict(env)
    e.update(extra_env or {})
    return subprocess.run([workload] + list(args), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def record(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        diag("record %s: %s" % (path, e))
        return None


try:
    # ---- option parsing: USAGE and exit codes -------------------------------------------------------------
    r = wl("--help")
    ok(r.returncode == 0 and "usage: workload" in r.stdout, "--help prints USAGE and exits 0")
    out = os.path.join(tmp, "x.json")
    bad = [
        ([], "no arguments"),
        (["--kind", "bogus", "--out", out, "--iters", "1"], "unknown --kind"),
        (["--kind", "infer", "--out", out], "infer without --duration or --requests"),
        (["--kind", "train", "--out", out], "train without --iters or --duration"),
        (["--kind", "train", "--iters", "1"], "missing --out"),
        (["--kind", "train", "--out", out, "--iters", "1", "--kernels", "0"], "zero-length kernel"),
        (["--kind", "train", "--out", out, "--iters", "1", "--kernels", "100,"], "trailing comma in --kernels"),
        (["--kind", "train", "--out", out, "--iters", "1", "--kernels", "100x65"], "too many kernels"),
        (["--kind", "infer", "--out", out, "--requests", "1", "--load", "1.5"], "--load above 1"),
        (["--kind", "train", "--out", out, "--iters", "1x"], "junk after a number"),
        (["--kind", "train", "--out", out, "--iters", "-1"], "negative count"),
        (["--kind", "train", "--out", out, "--iters", "1", "--mem", "1.5G"], "fractional size"),
        (["--kind", "finetune", "--out", out, "--iters", "1", "--batch-min", "9"], "batch-min > batch-max"),
        (["--kind", "train", "--out", out, "--iters", "1", "--bogus", "1"], "unknown option"),
        (["--kind", "train", "--out", out, "--iters"], "option without its value"),
        (["--kind", "train", "--out", out, "--iters", "1", "stray"], "stray argument"),
    ]
    for args, why in bad:
        r = wl(*args)
        ok(r.returncode == 2 and "usage error" in r.stderr and not os.path.exists(out),
           "usage error exits 2 with a message: %s" % why)

    # ---- an inference server: the record and its internal consistency ---------------------------------------
    inf = os.path.join(tmp, "infer.json")
    r = wl("--kind", "infer", "--out", inf, "--name", "srv", "--kernels", "200x3", "--load", "0.4",
           "--duration", "0.6", "--mem", "64M", "--seed", "7")
    ok(r.returncode == 0, "infer job exits 0")
    if r.returncode:
        diag(r.stderr)
    rec = record(inf)
    ok(rec is not None and rec["status"] == "ok" and rec["name"] == "srv" and rec["kind"] == "infer",
       "infer record parses, status ok, name and kind")
    if rec:
        n = rec["requests"]
        ok(n >= 20 and len(rec["latency_ns"]) == n and len(rec["arrival_ns"]) == n,
           "infer served >= 20 requests at load 0.4 over 0.6 s (got %d), one latency per request" % n)
        ok(min(rec["latency_ns"] or [0]) >= 600000, "every latency >= the request's 600 us of kernels")
        ok(rec["device_ns"] == n * 600000, "device_ns is the kernels' time (%d requests x 600 us)" % n)
        ok(rec["start_ns"] <= rec["ready_ns"] <= min(rec["arrival_ns"] or [rec["end_ns"]]) and
           max(rec["arrival_ns"] or [0]) <= rec["end_ns"], "start <= ready <= arrivals <= end")
        ok(rec["arrival_ns"] == sorted(rec["arrival_ns"]) and
           rec["arrival_ns"][-1] - rec["ready_ns"] < 600000000, "arrivals ordered, within --duration")
        ok(rec["mem_reserved"] == 64 << 20 and rec["mem_allocs"] == 4 and rec["mem_wait_ns"] == 0,
           "64M footprint in 4 blocks, no memory wait alone")
        rec2 = None
        r = wl("--kind", "infer", "--out", inf + "2", "--kernels", "200x3", "--load", "0.4", "--duration", "0.6",
               "--mem", "64M", "--seed", "7")
        rec2 = record(inf + "2")
        rel = lambda x: [a - x["ready_ns"] for a in x["arrival_ns"]]  # noqa: E731
        ok(rec2 is not None and rel(rec2) == rel(rec), "same seed: same arrival schedule")
        r = wl("--kind", "infer", "--out", inf + "3", "--kernels", "200x3", "--load", "0.4", "--duration", "0.6",
               "--mem", "64M", "--seed", "8", "--arrivals", "bursty", "--burst", "4")
        rec3 = record(inf + "3")
        ok(rec3 is not None and rec3["status"] == "ok" and rel(rec3) != rel(rec),
           "another seed, bursty arrivals: another schedule")

    # ---- fine-tune from a spec file: growth like the caching allocator -----------------------------------
    spec = os.path.join(tmp, "ft.spec")
    with open(spec, "w") as f:
        f.write("# a fine-tune\nkind = finetune\nmem = 128M\nblocks = 2\nkernels = 100x2\n"
                "batch-min = 1\nbatch-max = 8\niters = 40\nact-frac = 0.5\n")
    ft = os.path.join(tmp, "ft.json")
    r = wl("--spec", spec, "--out", ft)
    rec = record(ft)
    ok(r.returncode == 0 and rec is not None and rec["status"] == "ok" and rec["iterations"] == 40,
       "finetune from --spec runs 40 iterations")
    if rec:
        ok(2 < rec["mem_allocs"] and rec["mem_reserved"] <= (128 << 20) + (2 << 20) * rec["mem_allocs"],
           "activations grew in extra segments (%d allocations, %d MiB), never past the footprint + rounding" %
           (rec["mem_allocs"], rec["mem_reserved"] >> 20))
        ok(set(rec["iter_batch"]) <= set(range(1, 9)) and len(set(rec["iter_batch"])) > 1,
           "batch sizes vary within [1, 8]")
        ok(rec["iter_end_ns"] == sorted(rec["iter_end_ns"]) and len(rec["iter_end_ns"]) == 40,
           "one ordered timestamp per iteration")
    with open(spec + "2", "w") as f:
        f.write("kind = finetune\nwhat = 1\n")
    r = wl("--spec", spec + "2", "--out", ft)
    ok(r.returncode == 2 and ":2:" in r.stderr, "unknown option in a spec file: exit 2 naming the line")

    # ---- out of memory: recorded, exit 3 -----------------------------------------------------------------
    oom = os.path.join(tmp, "oom.json")
    r = wl("--kind", "batch", "--out", oom, "--iters", "2", "--mem", "96M", extra_env={
        "SIMCUDA_NODE": node + "-oom", "SIMCUDA_MEM": "64M"})
    rec = record(oom)
    ok(r.returncode == 3 and rec is not None and rec["status"] == "crashed: OOM" and rec["iterations"] == 0,
       "a footprint past the device: exit 3, status \"crashed: OOM\"")

    # ---- the harness on the tiny mix ---------------------------------------------------------------------
    res = os.path.join(tmp, "results")
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "bench"), "--quick", "--build", build,
                        "--timeout", "15", "--out", res, "--host-check", "tiny"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    ok(r.returncode == 0, "scripts/bench --quick tiny exits 0")
    # The closing lines: what rota achieved next to the baselines, then the report; no target verdicts.
    tail = r.stdout[r.stdout.rfind("\ntiny, rota: ") + 1:] if "\ntiny, rota: " in r.stdout else ""
    ok(tail.startswith("tiny, rota: GPU busy ") and "(exclusive " in tail and "shared " in tail and
       "jobs crashed " in tail and "\nreport: " in tail and "NOT met" not in r.stdout and "\ngoal " not in r.stdout,
       "the closing lines say what rota achieved against exclusive and shared, and link the report (%s)"
       % tail.split("\n")[0][:200])
    bm_idle_kinds = ("ready", "memory", "queued", "host", "switch")
    if r.returncode:
        diag(r.stdout[-3000:] + r.stderr[-3000:])
    for f in ("report.md", "results.json", "busy.svg", "latency-cdf.svg", "trace-tiny-exclusive.json",
              "trace-tiny-shared.json"):
        ok(os.path.getsize(os.path.join(res, f)) > 0 if os.path.exists(os.path.join(res, f)) else False,
           "bench wrote %s" % f)
    for f in ("busy.svg", "latency-cdf.svg"):
        try:
            root = ET.parse(os.path.join(res, f)).getroot()
            ok(root.tag.endswith("svg") and any(e.tag.endswith("polyline") for e in root.iter()),
               "%s is SVG with plotted lines" % f)
        except (OSError, ET.ParseError) as e:
            ok(False, "%s is SVG (%s)" % (f, e))
    try:
        with open(os.path.join(res, "trace-tiny-exclusive.json")) as f:
            tr = json.load(f)
        names = {e.get("name", "") for e in tr["traceEvents"]}
        ok(any(n.startswith("job: ") for n in names) and "queued" in names and "request" in names,
           "trace JSON has job spans, the exclusive queue and requests")
    except (OSError, ValueError, KeyError) as e:
        ok(False, "trace JSON parses (%s)" % e)
    doc = None
    try:
        with open(os.path.join(res, "results.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        diag(e)
    ok(doc is not None and len(doc["mixes"]) == 1, "results.json parses, one mix")
    if doc:
        mx = doc["mixes"][0]
        rows = {m["policy"]: m for m in mx["rows"]}
        g = mx["mix"]["gpus"]
        S = sum(s["device_s"] for s in mx["solo"].values())
        L = max(s["wall_s"] for s in mx["solo"].values())
        ex, sh = rows.get("exclusive"), rows.get("shared")
        ok(ex is not None and ex["available"] and sh is not None and sh["available"], "exclusive and shared ran")
        ok(ex["makespan_s"] >= S / g and ex["makespan_s"] >= L * 0.98,
           "exclusive makespan %.2f s >= solo device time / GPUs %.2f s and ~>= longest solo %.2f s" % (
               ex["makespan_s"], S / g, L))
        ok(ex["makespan_s"] >= 0.9 * sum(s["wall_s"] for s in mx["solo"].values()),
           "one GPU, exclusive: makespan ~>= sum of solo walls (10% tolerance for start-up)")
        for p, m in rows.items():
            if not m["available"]:
                ok("not available" in m["why"], "%s reported as not available, with why" % p)
                continue
            ok(0 < m["B"] <= 1.02 and 0 < m["B_max"] <= 1.0 + 1e-9 and
               abs(m["B_over_Bmax"] - m["B"] / m["B_max"]) < 1e-9,
               "%s: 0 < B <= 1 (2%% sampling slack), B_max <= 1, B/B_max consistent" % p)
            ok(abs(m["B"] * m["makespan_s"] * g - m["busy_s"]) < 1e-6, "%s: B x makespan x GPUs = busy time" % p)
            if p.startswith("rota"):
                ok(m["failed"] == 0 and m["crashed_oom"] == 0, "%s: no job failed or crashed under rota" % p)
            if m["crashed_oom"] == 0 and m["failed"] == 0:
                ok(m["makespan_s"] >= m["makespan_bound_s"] * 0.95,
                   "%s: every job done, makespan >= the lower bound (5%% tolerance for start-up)" % p)
            ok(m["crashed_oom"] == sum(1 for j in m["jobs"].values() if j["status"] == "crashed: OOM"),
               "%s: crash count matches the jobs' records" % p)
            if m.get("host") == "slow":
                ok(m["gain_pts"] is None, "%s: no gain over the exclusive run of the other host" % p)
            elif ex is not m:
                ok(abs(m["gain_pts"] - 100 * (m["B"] - ex["B"])) < 1e-9, "%s: gain is B - B(exclusive)" % p)
        ok(ex["crashed_oom"] == 0 and ex["failed"] == 0, "exclusive: no job crashes")
        ok(ex["harvest"] is not None and ex["harvest"] < 0.1,
           "exclusive: harvest ~0 (nothing else runs beside the high-priority job; < 0.1)")
        ok(sh["crashed_oom"] >= 1, "shared: the batch job that does not fit crashes with OOM")
        ok(sh["harvest"] is not None and sh["harvest"] > ex["harvest"], "shared harvests more than exclusive")
        # Two runs of the job alone agree within 2x on a quiet host, not where the hypervisor keeps the CPUs
        # (steal: late wake-ups in bursts, which is what a p99 catches).
        steal = max(v for v in (ex.get("host_steal"), mx.get("solo_steal"), 0) if v is not None)
        if steal > 0.05:  # scripts/bench's STEAL_WARN: above it the report itself calls its figures distorted
            for q in ("p50", "p90", "p99"):
                skip("exclusive vs solo %s (%s): host CPU steal %.0f%% during the runs, over 5%%" % (
                    q, ex["hp_%s_x" % q], 100 * steal))
        else:
            # The median and the p90 compare the two runs; a p99 of the quick run's ~400 requests is about its
            # 4th-largest, which one stretch of late host wake-ups in either run moves (seen under UBSan at 0 %
            # steal, at 3.3x and at 1/5.4x in plain builds at 0 % steal), hence its wide band: it still catches a
            # unit or a pairing gone wrong, as the p90's ~40 requests do at a narrower one.
            ok(ex["hp_p50_x"] is not None and 0.5 < ex["hp_p50_x"] < 2,
               "exclusive: high-priority p50 near solo (0.5x-2x: it runs alone; host steal %.0f%%)" % (100 * steal))
            ok(ex["hp_p90_x"] is not None and 1 / 3 < ex["hp_p90_x"] < 3,
               "exclusive: high-priority p90 within 3x of solo (%s: two runs alone)" % ex["hp_p90_x"])
            ok(ex["hp_p99_x"] is not None and 1 / 10 < ex["hp_p99_x"] < 10,
               "exclusive: high-priority p99 within 10x of solo (%s: two runs alone, a tail of ~4 requests)" % (
                   ex["hp_p99_x"]))
        for p, m in rows.items():
            if not m["available"]:
                continue
            i = m["idle_s"]
            gm = g * m["makespan_s"]
            ok(i is not None and set(i) == set(bm_idle_kinds) and min(i.values()) >= 0 and
               abs(sum(i.values()) - (gm - m["busy_s"])) < 0.02 * gm + 0.01,
               "%s: the idle breakdown adds up to GPUs x makespan - busy (%s vs %.3f s, 2%%)" % (
                   p, i and "%.3f" % sum(i.values()), gm - m["busy_s"]))
            ok(m["B_ready_filled"] is not None and
               abs(m["B_ready_filled"] - (m["busy_s"] + i["ready"]) / gm) < 1e-9 and m["B"] <= m["B_ready_filled"] <= 1.02,
               "%s: B with 'ready' filled = (busy + ready idle) / (GPUs x makespan), between B and 1 (%s)" % (
                   p, m["B_ready_filled"]))
            rs = m.get("ready_s")
            ok(rs is not None and set(rs) == {"held", "high", "waiting"} and min(rs.values()) >= 0 and
               abs(sum(rs.values()) - i["ready"]) < 1e-6,
               "%s: 'ready' idle split into held, high and waiting adds up to it (%s vs %.4f s)" % (p, rs, i["ready"]))
            ok(m["timeline_busy_s"] is not None and abs(m["timeline_busy_s"] - m["busy_s"]) < 0.01 * m["busy_s"] + 0.002,
               "%s: simcuda's timeline has the busy time simcuda-stat counted (%s vs %.3f s, 1%%)" % (
                   p, m["timeline_busy_s"], m["busy_s"]))
        # Exclusive runs one job at a time, so no allocation ever waits for another job's memory: 'memory' idle can
        # only be the jobs' own slow cuMemAlloc calls (none without a sanitizer; ASan poisons each block, ~10 ms
        # per 128 MiB), which their records count as waits.
        ex_wait = sum(j.get("mem_wait_s") or 0 for j in ex["jobs"].values())
        ok(ex["idle_s"] and ex["idle_s"]["queued"] > 0.5 and ex["idle_s"]["memory"] <= ex_wait + 1e-6,
           "exclusive: idle while jobs queue is 'queued' (%s s); 'memory' (%s s) only within the jobs' own "
           "slow allocations (%.3f s)" % (ex["idle_s"] and "%.2f" % ex["idle_s"]["queued"],
                                          ex["idle_s"] and "%.3f" % ex["idle_s"]["memory"], ex_wait))
        try:
            with open(os.path.join(res, "trace-tiny-exclusive.json")) as f:
                tr = json.load(f)["traceEvents"]
            eng = [e for e in tr if e.get("pid") == 1000 and e.get("ph") == "X"]
            ok({e["name"] for e in eng if e.get("tid") == 1} == {"infer", "train", "batch"} and
               any(e["name"] == "idle: queued" for e in eng if e.get("tid") == 2),
               "trace: the GPU's engine track shows each job's kernels and the kinds of idle")
        except (OSError, ValueError, KeyError) as e:
            ok(False, "trace JSON parses (%s)" % e)
        with open(os.path.join(res, "report.md")) as f:
            md = f.read()
        groups, cur = [], []
        for line in md.splitlines() + [""]:
            if line.startswith("|"):
                cur.append(line)
            elif cur:
                groups.append(cur)
                cur = []
        ok("## Goals" in md and "## Mix `tiny`" in md and len(groups) >= 4,
           "report.md has the goals and the mix's tables (%d tables)" % len(groups))
        ok(all(len(t) >= 3 and set(t[1].replace("|", "")) <= set("-") and
               all(l.count("|") == t[0].count("|") for l in t) for t in groups),
           "every markdown table has a separator and rows as wide as its header")
        ok(all(m.get("host_steal") is None or 0 <= m["host_steal"] <= 1 for m in rows.values() if m["available"])
           and (mx.get("solo_steal") is None or 0 <= mx["solo_steal"] <= 1) and
           ("- host CPU steal" in md) and (os.path.exists("/proc/stat") == (rows["rota"].get("host_steal") is not None)),
           "host CPU steal is measured per run (%s) where /proc/stat exists, and report.md states it" % (
               rows["rota"].get("host_steal")))
        hrota = rows["rota"].get("handover")
        ok(hrota is not None and hrota["n"] > 0 and 0 < hrota["median_us"] < 100000 and
           hrota["sum_s"] <= rows["rota"]["idle_s"]["ready"] + rows["rota"]["idle_s"]["switch"] +
           rows["rota"]["idle_s"]["host"] + 1e-9,
           "rota: the high-priority job hands the GPU over (%s), within the idle time" % hrota)
        # each rota policy's rotad is started with that policy's options (rotad.log's first line is its command)
        def rotad_cmd(policy):
            try:
                with open(os.path.join(res, "runs", "tiny", policy, "rotad.log")) as f:
                    return f.readline().split()
            except OSError as e:
                diag(e)
                return []
        cq, cr = rotad_cmd("rota-quantum"), rotad_cmd("rota")
        ok(rows.get("rota-quantum", {}).get("available") and cq[:1] == ["$"] and
           "--quantum-ms" in cq and cq[cq.index("--quantum-ms") + 1] == "20" and cr[:1] == ["$"] and
           "--quantum-ms" not in cr,
           "rota-quantum ran under rotad --quantum-ms 20, rota under rotad's default (%s)" % " ".join(cq[2:]))
        # the inference server sleeps until its next arrival: under rota its idle probe ends windows; under
        # rota-fair it is no high client, and nothing else probes
        pr, pf = (rows.get(p, {}).get("handover") or {} for p in ("rota", "rota-fair"))
        ok(pr.get("probe_ends", 0) > 0 and pf.get("probe_ends") == 0,
           "the idle probe ended the high-priority job's windows under rota (%s), none under rota-fair (%s)" % (
               pr.get("probe_ends"), pf.get("probe_ends")))
        # --host-check: every rota policy again on the slowed host, against solo runs there, and a line each
        slow = [p for p, m in rows.items() if m.get("host") == "slow"]
        ok(sorted(slow) == sorted(p + "@slow" for p, m in rows.items() if p.startswith("rota") and
                                  m.get("host") is None and m["available"]) and "rota@slow" in slow and
           os.path.exists(os.path.join(res, "runs", "tiny", "slow", "rota", "rotad.log")) and
           os.path.exists(os.path.join(res, "runs", "tiny", "slow", "solo", "infer", "infer.json")),
           "--host-check ran each rota policy and the solo runs again on the slowed host (%s)" % slow)
        ok("host sensitivity of rota (slowed host: every process of the run on one CPU beside a busy loop" in r.stdout
           and "- host sensitivity of rota " in md and "| rota@slow | " in md,
           "the terminal and report.md say what the slowed host changed")
        idle_t = [t for t in groups if "B with 'ready' filled" in t[0]]
        rrow = rows.get("rota")
        want = rrow and rrow.get("B_ready_filled") is not None and "| %.3f | %.3f |" % (rrow["B"], rrow["B_ready_filled"])
        ok(len(idle_t) == 1 and want and any(l.startswith("| rota | ") and want in l for l in idle_t[0]),
           "report.md's idle table gives rota's B and B with 'ready' filled (%s)" % want)

    # ---- the ROTA_TRACE contract: JSON lines from the shim/rotad become spans in the Chrome trace ---------
    # The benchmark package itself (bench/rotabench), as scripts/bench imports it; nothing written beside it.
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(src, "bench"))
    from rotabench import metrics as bmetrics, report as breport, runner as brunner, trace as btrace

    class FakeProc:
        pid = 4242
    run = brunner.Run.__new__(brunner.Run)
    run.t0, run.policy, run.devmap, run._events = 1000000000, "rota", {}, None
    run.samples = [(1000000000, [0, 0]), (2000000000, [500000000, 250000000])]
    run.rota_trace = os.path.join(tmp, "rota-trace.jsonl")
    with open(run.rota_trace, "w") as f:
        for ev in ({"ts_us": 1100000, "pid": 4242, "ev": "place", "gpu": 1, "wait_us": 40000},
                   {"ts_us": 1200000, "pid": 4242, "ev": "mem_wait", "gpu": 1, "bytes": 1 << 30},
                   {"ts_us": 1500000, "pid": 4242, "ev": "mem_grant", "gpu": 1, "bytes": 1 << 30},
                   {"ts_us": 1600000, "pid": 4242, "ev": "hold", "by": 99},
                   {"ts_us": 1650000, "pid": 4242, "ev": "release"},
                   {"ts_us": 1700000, "pid": 4242, "ev": "hold", "reason": "quantum"},
                   {"ts_us": 1720000, "pid": 4242, "ev": "release"}):
            f.write(json.dumps(ev) + "\n")
        f.write("not json\n")
    run.state = {"a": {"proc": FakeProc(), "spawn_ns": 1050000000, "end_ns": 1900000000, "rc": 0, "device": 0}}
    run.records = {"a": None}
    mixdef = {"name": "m", "jobs": [{"name": "a", "arrive_s": 0.0, "priority": "low",
                                     "workload": {"kind": "batch"}}]}
    tpath = os.path.join(tmp, "trace.json")
    btrace.write_trace(tpath, run, mixdef)
    with open(tpath) as f:
        tev = json.load(f)["traceEvents"]
    held = [e for e in tev if e.get("name") == "held"]
    mw = [e for e in tev if e.get("name", "").startswith("memory wait")]
    busy = [e for e in tev if e.get("ph") == "C"]
    # drawn by `rota trace` (the command users run), moved onto the run's clock and the job's process
    ok(len(held) == 1 and abs(held[0]["ts"] - 600000) < 1 and abs(held[0]["dur"] - 50000) < 1 and
       held[0]["pid"] == 1 and held[0]["args"]["begin"].get("by") == 99,
       "ROTA_TRACE hold..release: one 'held' span, through rota trace")
    ok(not [e for e in tev if e.get("name") == "process_name" and e["args"]["name"] == "pid 4242"],
       "the traced pid is the job's process, not one of its own")
    hq = [e for e in tev if e.get("name") == "held (quantum)"]
    ok(len(hq) == 1 and abs(hq[0]["dur"] - 20000) < 1, "a hold with its reason: a 'held (quantum)' span")
    ok(len(mw) == 1 and abs(mw[0]["dur"] - 300000) < 1, "ROTA_TRACE mem_wait..mem_grant: one 300 ms span")
    ok(run.job_gpu("a") == 1, "a ROTA_TRACE placement tells the job's GPU")
    pwait = [e for e in tev if e.get("name") == "waiting for a GPU with room"]
    ok(len(pwait) == 1 and abs(pwait[0]["ts"] - 60000) < 1 and abs(pwait[0]["dur"] - 40000) < 1,
       "a placement after a 40 ms wait for room: one span before it")
    ok(run.place_wait("a") == (1060000000, 1100000000), "and the job's place wait in ns")
    ok(len(busy) == 1 and busy[0]["args"] == {"gpu0": 0.5, "gpu1": 0.25}, "busy counters per GPU")

    # ---- the idle breakdown on a hand-made timeline (ms): job a works [5, 20] and [25, 40] with kernels
    # [10, 20] and [30, 40] (ctx 1); job b waits for memory [0, 45], then works [46, 60] with a kernel [50, 60]
    # (ctx 2: the engine switches for 1 ms before it). Window [0, 100].
    M = 1000000
    run = brunner.Run.__new__(brunner.Run)
    run.t0, run.t_end, run.devmap, run._events, run.rota_trace = 0, 100 * M, {}, None, None
    run.final = [{"busy_ns": 30 * M, "node_switch_ns": 1 * M}]
    run.state = {n: {"proc": FakeProc(), "spawn_ns": 0, "end_ns": 100 * M, "rc": 0, "device": 0,
                     "job": {"name": n, "arrive_s": 0.0}} for n in ("a", "b")}
    empty = {"arrival_ns": [], "latency_ns": [], "mem_wait_start_ns": [], "mem_wait_dur_ns": []}
    run.records = {"a": dict(empty, pid=11, iter_start_ns=[5 * M, 25 * M], iter_end_ns=[22 * M, 45 * M]),
                   "b": dict(empty, pid=12, iter_start_ns=[46 * M], iter_end_ns=[61 * M],
                             mem_wait_start_ns=[0], mem_wait_dur_ns=[45 * M])}
    tl = {0: [(10 * M, 20 * M, 11, 1), (30 * M, 40 * M, 11, 1), (50 * M, 60 * M, 12, 2)]}
    mixdef = {"name": "m", "gpus": 1, "jobs": [{"name": "a"}, {"name": "b"}]}
    idle, pieces = bmetrics.idle_breakdown(run, mixdef, tl)
    want = {"ready": 13, "memory": 15, "queued": 0, "host": 41, "switch": 1}
    ok({k: round(v / M, 6) for k, v in idle.items()} == want,
       "idle breakdown: ready 13, memory 15, host 41, switch 1 ms (got %s)" % {k: v / M for k, v in idle.items()})
    ok([(a // M, b // M, k) for a, b, k in pieces[0]] ==
       [(0, 5, "memory"), (5, 10, "ready"), (20, 25, "memory"), (25, 30, "ready"), (40, 45, "memory"),
        (45, 46, "host"), (46, 49, "ready"), (60, 100, "host")],
       "idle pieces in order, the kernel-free tail of an iteration (a's [20, 22]) not counted as ready")
    run.state["c"] = {"proc": FakeProc(), "spawn_ns": 70 * M, "end_ns": 100 * M, "rc": 0, "device": 0,
                      "job": {"name": "c", "arrive_s": 0.060}}
    run.records["c"] = None
    idle, _ = bmetrics.idle_breakdown(run, mixdef, tl)
    ok(round(idle["host"] / M) == 31 and round(idle["queued"] / M) == 10 and round(idle["ready"] / M) == 13,
       "a job arrived but not started yet (c, from 60 to 70 ms) makes that idle time 'queued'")

    # ---- hand-overs from the high-priority job: with a the high job, only a's end at 40 ms to b's kernel at 50
    # (10 ms) counts, not a's own gap from 20 to 30
    h = bmetrics.handovers(run, dict(mixdef, hp="a"), tl)
    ok(h == {"n": 1, "median_us": 10000.0, "p90_us": 10000.0, "sum_s": 0.01, "probe_ends": 0},
       "hand-overs from the high-priority job: one of 10 ms (got %s)" % h)
    ok(bmetrics.handovers(run, dict(mixdef, hp=None), tl) is None and
       bmetrics.handovers(run, dict(mixdef, hp="b"), tl) == {"n": 0, "median_us": None, "p90_us": None, "sum_s": 0.0,
                                                       "probe_ends": 0},
       "none without a high-priority job; zero where it never hands the GPU over")

    # ---- host CPU steal: /proc/stat's cpu line, steal (field 8) over all of the first eight fields
    stat = os.path.join(tmp, "stat")
    with open(stat, "w") as f:
        f.write("cpu  100 0 50 800 0 0 0 50 7 0\ncpu0 50 0 25 400 0 0 0 25 0 0\nintr 1 2\n")
    a = bmetrics.cpu_times(stat)
    with open(stat, "w") as f:
        f.write("cpu  160 0 70 1020 0 0 0 150 9 0\n")
    b = bmetrics.cpu_times(stat)
    ok(a == [100, 0, 50, 800, 0, 0, 0, 50, 7, 0] and bmetrics.steal_fraction(a, b) == 0.25,
       "host steal: 100 of 400 ticks between two /proc/stat readings is 0.25 (guest ticks not counted twice)")
    ok(bmetrics.cpu_times(os.path.join(tmp, "no-such-stat")) is None and bmetrics.steal_fraction(None, b) is None and
       bmetrics.steal_fraction(a, a) is None, "host steal: unknown without /proc/stat or without elapsed ticks")
    res = [{"mix": {"name": "m"}, "solo_steal": 0.01,
            "rows": [{"policy": "rota", "available": True, "host_steal": 0.02},
                     {"policy": "x", "available": False}]}]
    ok(breport.steal_warning(res) is None, "no steal warning at 1-2%")
    res[0]["rows"][0]["host_steal"] = 0.31
    w = breport.steal_warning(res)
    ok(w is not None and "31%" in w and "solo 1%, rota 31%" in w, "a steal warning at 31%%, naming the runs (%s)" % w)
finally:
    for n in (node, node + "-oom"):
        if os.path.exists("/dev/shm/" + n):
            os.unlink("/dev/shm/" + n)
    shutil.rmtree(tmp, ignore_errors=True)

print("1..%d" % n_tests)
sys.exit(1 if failed else 0)
