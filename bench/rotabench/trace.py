# trace.py - a run as a Chrome/Perfetto trace: jobs, requests, rota's holds, memory waits, placements.
import json
import os
import subprocess

from rotabench.metrics import IDLE_KINDS


# ---- Chrome / Perfetto trace ------------------------------------------------------------------------------
TRACE_DEVICE_EVENTS = 400000  # engine slices in one trace at most: ui.perfetto.dev stays responsive
ROTA_TID0 = 10  # `rota trace`'s tracks (rota, gpu N) follow a job's own (lifetime, work, rota's memory waits)


def rota_trace_events(run, pids, rota_bin):
    """The run's ROTA_TRACE file through `rota trace` (holds by reason, memory waits, placements, idle probes):
    its events moved onto the run's clock, each traced pid onto its job's process (pids: job name -> trace pid),
    its tracks after the job's own. [] where the run wrote no ROTA_TRACE."""
    path = getattr(run, "rota_trace", None)
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    out = subprocess.run([rota_bin, "trace", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError("%s trace %s: exit %d" % (rota_bin, path, out.returncode))
    d = json.loads(out.stdout)
    shift = d.get("otherData", {}).get("t0_us", 0) - run.t0 / 1000.0
    ev = []
    for e in d["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
            continue  # the job's process is named by the bench
        e = dict(e, pid=pids.get(run.pid_job(e.get("pid")), 0))
        if "tid" in e:
            e["tid"] = ROTA_TID0 + e["tid"]
        if "ts" in e:
            e["ts"] += shift
        ev.append(e)
    return ev


def write_trace(path, run, mix, rota_bin=None):
    """Job lifetimes, queueing, memory waits, placements and requests from the workload records, plus rota's
    decisions from ROTA_TRACE where the shim/rotad wrote them (rota_trace_events; rota_bin: the `rota` that
    draws them, default the run's own, else $ROTA_BUILD/bin/rota)."""
    if rota_bin is None:
        ctx = getattr(run, "ctx", None)
        rota_bin = ctx.tools.rota if ctx else os.path.join(os.environ.get("ROTA_BUILD", "build"), "bin", "rota")
    ev = []
    us = lambda ns: (ns - run.t0) / 1000.0  # noqa: E731
    pids = {}
    for i, j in enumerate(mix["jobs"]):
        n = j["name"]
        pid = i + 1
        pids[n] = pid
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "%s (%s, %s)" % (
            n, j["workload"]["kind"], j["priority"])}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": i}})
        for tid, tname in ((1, "lifetime"), (2, "work"), (3, "rota")):
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}})
        st, rec = run.state.get(n), run.records.get(n)
        arrive = run.t0 + int(j["arrive_s"] * 1e9)
        if st is None:
            continue
        if st["spawn_ns"] > arrive + 1000000:
            ev.append({"ph": "X", "name": "queued", "pid": pid, "tid": 1, "ts": us(arrive),
                       "dur": (st["spawn_ns"] - arrive) / 1000.0})
        gpu = run.job_gpu(n)
        ev.append({"ph": "i", "s": "p", "name": "place gpu %s" % gpu, "pid": pid, "tid": 1, "ts": us(st["spawn_ns"]),
                   "args": {"gpu": gpu}})
        status = run.job_status(n)
        ev.append({"ph": "X", "name": "job: %s" % status, "pid": pid, "tid": 1, "ts": us(st["spawn_ns"]),
                   "dur": (st["end_ns"] - st["spawn_ns"]) / 1000.0, "args": {"status": status, "exit": st["rc"]}})
        if rec is None:
            continue
        ev.append({"ph": "X", "name": "setup (allocations)", "pid": pid, "tid": 2, "ts": us(rec["start_ns"]),
                   "dur": (rec["ready_ns"] - rec["start_ns"]) / 1000.0})
        for t, d, b in zip(rec["mem_wait_start_ns"], rec["mem_wait_dur_ns"], rec["mem_wait_bytes"]):
            ev.append({"ph": "X", "name": "mem wait %d MiB" % (b >> 20), "pid": pid, "tid": 3, "ts": us(t),
                       "dur": d / 1000.0, "args": {"bytes": b}})
        for a, lt in list(zip(rec["arrival_ns"], rec["latency_ns"]))[:5000]:
            ev.append({"ph": "X", "name": "request", "pid": pid, "tid": 2, "ts": us(a), "dur": lt / 1000.0})
        prev = rec["ready_ns"]
        for k, (t, b) in enumerate(list(zip(rec["iter_end_ns"], rec["iter_batch"]))[:5000]):
            ev.append({"ph": "X", "name": "iter", "pid": pid, "tid": 2, "ts": us(prev), "dur": (t - prev) / 1000.0,
                       "args": {"i": k, "batch": b}})
            prev = t
        if status == "crashed: OOM":
            ev.append({"ph": "i", "s": "p", "name": "OOM", "pid": pid, "tid": 1, "ts": us(rec["end_ns"])})
    # rota's own decisions (ROTA_TRACE, JSON lines), as `rota trace` draws them for users
    ev.extend(rota_trace_events(run, pids, rota_bin))
    # each GPU's engine (simcuda's timeline): whose kernels ran, back-to-back ones of a job as one slice, and
    # why it idled (IDLE_KINDS)
    tl, pieces = getattr(run, "timeline", None), getattr(run, "idle_pieces", {})
    name_of = {rec["pid"]: n for n, rec in run.records.items() if rec}
    budget = TRACE_DEVICE_EVENTS
    for g in range(mix["gpus"] if tl else 0):
        dpid = 1000 + g
        ev.append({"ph": "M", "name": "process_name", "pid": dpid, "args": {"name": "gpu %d engine" % g}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": dpid, "args": {"sort_index": -10 + g}})
        ev.append({"ph": "M", "name": "thread_name", "pid": dpid, "tid": 1, "args": {"name": "kernels"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": dpid, "tid": 2, "args": {"name": "idle"}})
        cur = None
        for a, b, pid, _ in tl.get(g, []) + [(None, None, None, None)]:
            if cur and (a is None or pid != cur[2] or a > cur[1]):
                if budget > 0:
                    ev.append({"ph": "X", "name": name_of.get(cur[2], "pid %d" % cur[2]), "pid": dpid, "tid": 1,
                               "ts": us(cur[0]), "dur": (cur[1] - cur[0]) / 1000.0})
                    budget -= 1
                cur = None
            if a is None:
                break
            cur = [a, b, pid] if cur is None else [cur[0], b, pid]
        for a, b, kind in pieces.get(g, []):
            if budget > 0:
                ev.append({"ph": "X", "name": "idle: " + kind, "pid": dpid, "tid": 2, "ts": us(a),
                           "dur": (b - a) / 1000.0})
                budget -= 1
    # busy fraction per GPU as counters
    prev = None
    for t, b in run.samples:
        if prev:
            dt = t - prev[0]
            if dt > 0:
                ev.append({"ph": "C", "name": "busy fraction", "pid": 0, "ts": us(t), "args": {
                    "gpu%d" % g: round((b[g] - prev[1][g]) / dt, 4) for g in range(len(b))}})
        prev = (t, b)
    ev.append({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "node (%s)" % run.policy}})
    with open(path, "w") as f:
        json.dump({"traceEvents": ev, "displayTimeUnit": "ms",
                   "otherData": {"mix": mix["name"], "policy": run.policy, "rota_trace_events": len(run.rota_events())}},
                  f)
