# trace.py - a run as a Chrome/Perfetto trace: jobs, requests, rota's holds, memory waits, placements.
import json

from rotabench.metrics import IDLE_KINDS, PLACE_WAIT_MIN_US


# ---- Chrome / Perfetto trace ------------------------------------------------------------------------------
TRACE_DEVICE_EVENTS = 400000  # engine slices in one trace at most: ui.perfetto.dev stays responsive


def write_trace(path, run, mix):
    """Job lifetimes, queueing, memory waits, placements and requests from the workload records, plus rota's
    decisions from ROTA_TRACE (hold/release, mem_wait/mem_grant, place) where the shim/rotad wrote them."""
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
    # rota's own decisions (ROTA_TRACE, JSON lines)
    open_span = {}
    for e in sorted(run.rota_events(), key=lambda e: e["ts_us"]):
        n = run.pid_job(e.get("pid"))
        pid = pids.get(n, 0)
        ts = e["ts_us"] - run.t0 / 1000.0
        kind = e["ev"]
        args = {k: v for k, v in e.items() if k not in ("ts_us", "ev")}
        if kind == "place" and e.get("wait_us", 0) >= PLACE_WAIT_MIN_US:
            ev.append({"ph": "X", "name": "waiting for a GPU with room", "pid": pid, "tid": 3,
                       "ts": ts - e["wait_us"], "dur": e["wait_us"], "args": args})
        if kind in ("hold", "mem_wait"):
            open_span[(pid, kind)] = (ts, args)
        elif kind in ("release", "mem_grant", "mem_deny"):
            start = open_span.pop((pid, "hold" if kind == "release" else "mem_wait"), None)
            if start:
                held = "held (%s)" % start[1]["reason"] if start[1].get("reason") else "held"
                ev.append({"ph": "X", "name": held if kind == "release" else "rota mem wait (%s)" % kind,
                           "pid": pid, "tid": 3, "ts": start[0], "dur": max(0.0, ts - start[0]),
                           "args": dict(start[1], **args)})
            else:
                ev.append({"ph": "i", "s": "t", "name": kind, "pid": pid, "tid": 3, "ts": ts, "args": args})
        else:
            ev.append({"ph": "i", "s": "t", "name": kind, "pid": pid, "tid": 3, "ts": ts, "args": args})
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
