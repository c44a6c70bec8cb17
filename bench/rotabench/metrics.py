# metrics.py - what a run is measured by: B, B_max, gain, latency ratios, harvest, makespan bound, idle time.
import bisect
import json
import math
import os
import re

from rotabench.mix import POLICIES


# ---- the host: how much CPU time its hypervisor took (steal) while a run went on ----------------------------
STEAL_WARN = 0.05  # above this, wake-up latencies on the host (and so every figure) are distorted


def cpu_times(path="/proc/stat"):
    """The host's aggregate CPU times (the 'cpu' line of /proc/stat, in clock ticks), or None where unreadable."""
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "cpu":
                    return [int(x) for x in w[1:]]
    except (OSError, ValueError):
        pass
    return None


def steal_fraction(a, b):
    """The share of all CPU time between two cpu_times() readings that the hypervisor took (field 8, steal;
    guest time, fields 9-10, is already part of user time), or None without both readings."""
    if not a or not b or len(a) < 8 or len(b) < 8:
        return None
    d = [y - x for x, y in zip(a[:8], b[:8])]
    total = sum(d)
    return d[7] / total if total > 0 else None


def steal_text(f):
    if f is None:
        return ""
    return " (host CPU steal %.0f%%%s)" % (100 * f, ": figures distorted" if f > STEAL_WARN else "")


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(math.ceil(p / 100.0 * len(v))) - 1))
    return v[k]


def utilization(busy_ns, gpus, makespan_ns):
    """B: the device time the run's kernels got over what the node offered (GPUs x makespan); 0 for no time."""
    return busy_ns / (gpus * makespan_ns) if makespan_ns > 0 else 0.0


def b_max(solo, gpus):
    """B_max: the best B any schedule could reach, from the solo runs alone: their device time S spread over the
    GPUs, and no schedule shorter than the longest solo run L: S / (gpus x max(S / gpus, L)). solo: name ->
    {"device_ns", "wall_ns"}."""
    S = sum(s["device_ns"] for s in solo.values())
    L = max(s["wall_ns"] for s in solo.values())
    return S / (gpus * max(S / gpus, L))


def gain_pts(b, b_exclusive):
    """B's gain over the exclusive policy's, in percentage points; None without an exclusive run."""
    return 100.0 * (b - b_exclusive) if b_exclusive is not None else None


def latency_ratio(latencies, solo_latencies, p):
    """The p-th percentile of a job's latencies over the same percentile of its solo run's (pct's nearest rank);
    None where either is empty."""
    a, b = pct(latencies, p), pct(solo_latencies, p)
    return a / b if a is not None and b else None


def harvest(window_ns, own_ns, used_ns):
    """Over the high-priority job's serving window on its GPU: the device time that went to other jobs (used -
    own) over the time it left the GPU idle (window - own), at least 0. own: its solo device time (at most the
    window); used: the GPU's busy time in the window. None where the job left no idle time."""
    own = min(own_ns, window_ns)
    idle = window_ns - own
    return max(0.0, (used_ns - own) / idle) if idle > 0 else None


def makespan_bound(mix, solo):
    """Lower bound on any schedule's makespan: each job needs its solo time after it arrives, and the work that
    arrives at or after each arrival needs its device time spread over every GPU."""
    g = mix["gpus"]
    lb = 0.0
    for j in mix["jobs"]:
        a = j["arrive_s"] * 1e9
        lb = max(lb, a + solo[j["name"]]["wall_ns"])
        later = sum(solo[k["name"]]["device_ns"] for k in mix["jobs"] if k["arrive_s"] >= j["arrive_s"])
        lb = max(lb, a + later / g)
    return lb


def metrics(run, mix, solo):
    g = mix["gpus"]
    m = {"policy": run.policy, "desc": POLICIES[run.policy]["desc"], "available": True}
    makespan = run.t_end - run.t0
    busy = sum(d["busy_ns"] for d in run.final) - sum(run.samples[0][1])
    m["makespan_s"] = makespan / 1e9
    m["busy_s"] = busy / 1e9
    m["B"] = utilization(busy, g, makespan)
    # The engine's other time: context switches (busy excludes them); where B's gap to 1 goes, in part.
    m["switches"] = sum(d.get("switches", 0) for d in run.final)
    m["switch_s"] = sum(d.get("switch_ns", 0) for d in run.final) / 1e9
    S = sum(s["device_ns"] for s in solo.values())
    m["B_max"] = b_max(solo, g)
    m["B_over_Bmax"] = m["B"] / m["B_max"]
    m["makespan_bound_s"] = makespan_bound(mix, solo) / 1e9
    m["makespan_over_bound"] = m["makespan_s"] / m["makespan_bound_s"]
    m["B_bound_arrivals"] = S / (g * m["makespan_bound_s"] * 1e9)  # B_max that also respects arrival times
    jobs = {}
    for j in mix["jobs"]:
        n = j["name"]
        rec, st = run.records.get(n), run.state.get(n)
        e = {"status": run.job_status(n), "gpu": run.job_gpu(n), "exit": st["rc"] if st else None}
        e["arrive_s"] = j["arrive_s"]
        e["start_s"] = (st["spawn_ns"] - run.t0) / 1e9 if st else None
        e["queue_s"] = None
        if st:
            # queued: before the job was started (exclusive), and while rota run waited for a GPU with room
            pw = run.place_wait(n)
            e["queue_s"] = e["start_s"] - j["arrive_s"] + ((pw[1] - pw[0]) / 1e9 if pw else 0.0)
        e["end_s"] = (st["end_ns"] - run.t0) / 1e9 if st else None
        e["mem_wait_s"] = rec["mem_wait_ns"] / 1e9 if rec else 0.0
        e["device_s"] = rec["device_ns"] / 1e9 if rec else 0.0
        e["iterations"] = rec["iterations"] if rec else 0
        e["requests"] = rec["requests"] if rec else 0
        jobs[n] = e
    m["jobs"] = jobs
    m["crashed_oom"] = sum(1 for e in jobs.values() if e["status"] == "crashed: OOM")
    m["failed"] = sum(1 for e in jobs.values() if e["status"] not in ("ok", "crashed: OOM"))
    m["mem_wait_s"] = sum(e["mem_wait_s"] for e in jobs.values())
    m["queue_s"] = sum(e["queue_s"] or 0 for e in jobs.values())
    hp = mix["hp"]
    m["hp_p50_x"] = m["hp_p90_x"] = m["hp_p99_x"] = m["harvest"] = None
    if hp and run.records.get(hp) and run.records[hp]["latency_ns"]:
        rec, base = run.records[hp], solo[hp]["rec"]
        lat = rec["latency_ns"]
        m["hp_p50_ms"], m["hp_p90_ms"], m["hp_p99_ms"] = pct(lat, 50) / 1e6, pct(lat, 90) / 1e6, pct(lat, 99) / 1e6
        m["hp_p50_x"] = latency_ratio(lat, base["latency_ns"], 50)
        m["hp_p90_x"] = latency_ratio(lat, base["latency_ns"], 90)
        m["hp_p99_x"] = latency_ratio(lat, base["latency_ns"], 99)
        # Harvest: over the high-priority job's serving window [ready, end] on its GPU, the device time that
        # went to other jobs over the device time the high-priority job left idle (window - its solo busy).
        gpu = jobs[hp]["gpu"] if jobs[hp]["gpu"] is not None else 0
        t0, t1 = rec["ready_ns"], rec["end_ns"]
        window = t1 - t0
        used = run.busy_at(t1, gpu) - run.busy_at(t0, gpu)
        m["harvest"] = harvest(window, min(base["device_ns"], solo[hp]["device_ns"]), used)
        m["hp_window_s"] = window / 1e9
    m["samples"] = [((t - run.t0) / 1e9, b) for t, b in run.samples]
    tl = read_timeline(run)
    m["idle_s"] = m["timeline_busy_s"] = m["B_ready_filled"] = m["handover"] = m["ready_s"] = None
    if tl is not None:
        idle, run.idle_pieces = idle_breakdown(run, mix, tl)
        run.timeline = tl
        m["idle_s"] = {k: v / 1e9 for k, v in idle.items()}
        # the B this run would have had with every 'ready' idle moment busy: what scheduling could still win
        m["B_ready_filled"] = (m["busy_s"] + m["idle_s"]["ready"]) / (mix["gpus"] * m["makespan_s"])
        m["handover"] = handovers(run, mix, tl)
        m["ready_s"] = {k: v / 1e9 for k, v in ready_causes(run, mix, tl, run.idle_pieces).items()}
        m["timeline_busy_s"] = sum(min(b, run.t_end) - max(a, run.t0) for g in tl
                                   for a, b, _, _ in window_segs(run, tl, g)) / 1e9
    return m


# ---- where the idle time went: simcuda's device timeline against what each job was doing ----------------
IDLE_KINDS = ("ready", "memory", "queued", "host", "switch")
PLACE_WAIT_MIN_US = 5000  # a placement answered later than this waited for room (rotad answers others at once)
IDLE_DESC = {
    "ready": "a job on the GPU had work for it that was not running: held by rota, waiting behind its own "
             "launch, or in a wake-up (a hand-over)",
    "memory": "no job ready; one waited for memory on the GPU",
    "queued": "none of those; a job had arrived and was not started yet (the exclusive queue, or rota run "
              "waiting for a GPU with room for the job)",
    "host": "every job present was in host code (data loading, between requests) or had ended",
    "switch": "the engine switching contexts (simcuda's SIMCUDA_SWITCH_US per switch)",
}


def read_timeline(run):
    """{gpu: [(start_ns, end_ns, pid, ctx)] sorted} from the run's SIMCUDA_TIMELINE files; None without them.
    pid is the kernel's owner, which each line names: a process whose thread woke late for its segment's end
    has that segment in the file of the process that retired it."""
    d = run.timeline_dir
    if not d or not os.path.isdir(d):
        return None
    out = {}
    for fn in os.listdir(d):
        if not re.match(r"timeline-\d+\.txt$", fn):
            continue
        with open(os.path.join(d, fn)) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 5 or not all(x.isdigit() for x in parts):
                    continue  # a line cut by a killed process
                dev, ctx, a, b, pid = (int(x) for x in parts)
                out.setdefault(dev, []).append((a, b, pid, ctx))
    for segs in out.values():
        segs.sort()
    return out if out else None


def window_segs(run, tl, g):
    """GPU g's timeline segments (sorted, as read_timeline gives them) that overlap the run's window."""
    return [s for s in tl.get(g, []) if s[1] > run.t0 and s[0] < run.t_end]


def merge(iv, slack=2000):
    """Sorted union of [a, b) intervals; ones closer than slack ns are joined."""
    out = []
    for a, b in sorted(iv):
        if b <= a:
            continue
        if out and a <= out[-1][1] + slack:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def job_ready_intervals(rec, segs):
    """When a job had work for its GPU: each request from its arrival, each iteration from its first launch,
    until the last of its kernels inside ended (not until the job's thread woke up after it: that wake-up is
    host time). segs: the job's segment ends, sorted."""
    iv = [(a, a + lt) for a, lt in zip(rec.get("arrival_ns", []), rec.get("latency_ns", []))]
    iv += list(zip(rec.get("iter_start_ns", []), rec.get("iter_end_ns", [])))
    out = []
    for a, b in merge(iv):
        i = bisect.bisect_right(segs, b) - 1
        if i >= 0 and segs[i] > a:
            out.append((a, segs[i]))
    return out


def gpu_ready(run, g, segs):
    """{job name: [(a, b)]}: when each job on GPU g had work for it (job_ready_intervals). segs: GPU g's
    timeline segments in the run's window."""
    out = {}
    for name, rec in run.records.items():
        if not rec or run.job_gpu(name) != g:
            continue
        ends = sorted(b for a, b, pid, _ in segs if pid == rec["pid"])
        out[name] = job_ready_intervals(rec, ends)
    return out


def hold_spans(run):
    """{job name: merged [(a, b)]}: when a launch of the job waited in rota's launch gate (ROTA_TRACE hold ..
    release, written by the waiting thread itself, so a release is when that thread went on). Several threads
    of one job may wait at once: a span lasts while any does. A hold without its release (the job was killed)
    lasts to the run's end."""
    ev = {}
    for e in run.rota_events():
        if e["ev"] in ("hold", "release"):
            name = run.pid_job(e.get("pid"))
            if name is not None:
                ev.setdefault(name, []).append((int(e["ts_us"] * 1000), 1 if e["ev"] == "hold" else -1))
    out = {}
    for name, lst in ev.items():
        lst.sort(key=lambda x: (x[0], -x[1]))
        spans, n, a = [], 0, None
        for t, d in lst:
            if d > 0 and n == 0:
                a = t
            n = max(0, n + d)
            if d < 0 and n == 0 and a is not None:
                spans.append((a, t))
                a = None
        if a is not None:
            spans.append((a, max(a, run.t_end)))
        out[name] = [tuple(iv) for iv in merge(spans, slack=0)]
    return out


def intersect(x, y):
    """The intersection of two sorted lists of disjoint [a, b) intervals."""
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x, y):
    """x less y, both sorted lists of disjoint [a, b) intervals."""
    out, j = [], 0
    for a, b in x:
        while j < len(y) and y[j][1] <= a:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            if y[k][0] > a:
                out.append((a, y[k][0]))
            a = max(a, y[k][1])
            k += 1
        if a < b:
            out.append((a, b))
    return out


READY_CAUSES = ("held", "high", "waiting")
READY_DESC = {
    "held": "a lower job that had work was held by rota (a launch waiting in its gate: priority, share or "
            "quantum)",
    "high": "the high-priority job had a request that had arrived and no kernel on the engine yet (its own "
            "thread's wake-up and launch)",
    "waiting": "the jobs that had work were not held: waiting for a completion before their next launch "
               "(rota's bound on work in flight, or the job's own sync), or for a thread to wake up",
}


def ready_causes(run, mix, tl, pieces):
    """The 'ready' idle time (idle_breakdown's pieces) by READY_CAUSES, in ns: 'high' where the high-priority
    job had work, else 'held' where a job with work was held by rota, else 'waiting'. What depends on the host
    shows here: every hand-over is a chain of thread wake-ups."""
    total = dict.fromkeys(READY_CAUSES, 0)
    held = hold_spans(run)
    for g in range(mix["gpus"]):
        ready = [(a, b) for a, b, k in pieces.get(g, []) if k == "ready"]
        if not ready:
            continue
        jobs = gpu_ready(run, g, window_segs(run, tl, g))
        high = merge(jobs.get(mix.get("hp"), []), slack=0) if mix.get("hp") else []
        hold = merge([iv for n, r in jobs.items() if n != mix.get("hp")
                      for iv in intersect(merge(r, slack=0), held.get(n, []))], slack=0)
        in_high = intersect(ready, high)
        rest = subtract(ready, high)  # what the lower jobs' state explains
        in_hold = intersect(rest, hold)
        total["high"] += sum(b - a for a, b in in_high)
        total["held"] += sum(b - a for a, b in in_hold)
        total["waiting"] += sum(b - a for a, b in rest) - sum(b - a for a, b in in_hold)
    return total


def idle_breakdown(run, mix, tl):
    """GPU idle time of the run's window [t0, t_end] on every GPU, in ns by IDLE_KINDS, and the labelled idle
    pieces per GPU for the trace. An idle moment is "ready" if a job on that GPU had work for it, else "memory"
    if one waited for memory there, else "queued" if any job waited to be started, else "host"; the switch time
    simcuda charges before a segment of another context than the engine's last one comes first."""
    t0, t1 = run.t0, run.t_end
    total = dict.fromkeys(IDLE_KINDS, 0)
    pieces = {}
    pid_name = {}
    for name, rec in run.records.items():
        if rec:
            pid_name[rec["pid"]] = name
    queued = []
    for name, st in run.state.items():
        arrive = t0 + int(st["job"]["arrive_s"] * 1e9)
        if st["spawn_ns"] > arrive:
            queued.append((arrive, st["spawn_ns"]))
        pw = run.place_wait(name)
        if pw:
            queued.append(pw)
    for g in range(mix["gpus"]):
        segs = window_segs(run, tl, g)
        ready, mem = [], []
        for name, iv in gpu_ready(run, g, segs).items():
            rec = run.records[name]
            ready += iv
            mem += [(a, a + d) for a, d in zip(rec.get("mem_wait_start_ns", []), rec.get("mem_wait_dur_ns", []))]
        # the idle pieces: gaps between segments, less the switch before a segment of another context
        idle, sw, last_ctx, t = [], 0, None, t0
        sw_ns = run.final[0].get("node_switch_ns", 25000) if run.final else 25000
        for a, b, pid, ctx in segs:
            a, b = max(a, t0), min(b, t1)
            if last_ctx is not None and ctx != last_ctx and a - t >= sw_ns > 0:
                sw += sw_ns
                if a - sw_ns > t:
                    idle.append((t, a - sw_ns))
            elif a > t:
                idle.append((t, a))
            t, last_ctx = max(t, b), ctx
        if t1 > t:
            idle.append((t, t1))
        total["switch"] += sw
        # sweep: every boundary of the idle pieces and of the three kinds of interval
        ev = []
        for k, ivs in ((0, idle), (1, merge(ready)), (2, merge(mem)), (3, merge(queued))):
            for a, b in ivs:
                ev.append((a, k, 1))
                ev.append((b, k, -1))
        ev.sort()
        cnt = [0, 0, 0, 0]
        prev, out = None, []
        for tt, k, d in ev:
            if prev is not None and tt > prev and cnt[0] > 0:
                kind = "ready" if cnt[1] else "memory" if cnt[2] else "queued" if cnt[3] else "host"
                total[kind] += tt - prev
                if out and out[-1][2] == kind and out[-1][1] == prev:
                    out[-1][1] = tt
                else:
                    out.append([prev, tt, kind])
            cnt[k] += d
            prev = tt
        pieces[g] = out
    return total, pieces


def handovers(run, mix, tl):
    """The GPU's hand-overs from the high-priority job to another one: every idle gap on the engine between the
    end of that job's work and the start of another job's next segment (simcuda's timeline). With rota these are
    the releases of the lower classes; their length is what a release costs. probe_ends: how many of the
    high-priority job's idle windows its idle probe ended at once (ROTA_TRACE idle_probe; 0 without rota). None
    without a high-priority job or its record."""
    hp = mix.get("hp")
    rec = run.records.get(hp) if hp else None
    if not rec:
        return None
    gaps = []
    for g in range(mix["gpus"]):
        t, last = None, None
        for a, b, pid, _ in window_segs(run, tl, g):
            if t is not None and last == rec["pid"] and pid != rec["pid"] and a > t:
                gaps.append(a - t)
            t, last = b if t is None else max(t, b), pid
    probe = sum(1 for e in run.rota_events() if e["ev"] == "idle_probe" and e.get("pid") == rec["pid"])
    if not gaps:
        return {"n": 0, "median_us": None, "p90_us": None, "sum_s": 0.0, "probe_ends": probe}
    return {"n": len(gaps), "median_us": pct(gaps, 50) / 1e3, "p90_us": pct(gaps, 90) / 1e3,
            "sum_s": sum(gaps) / 1e9, "probe_ends": probe}


# ---- what a run left: the jobs' records, the samples, rotad's trace -----------------------------------------
class RunRecord:
    """The results of one run, as the metrics read them: t0/t_end (CLOCK_MONOTONIC ns), state (job name -> dict(
    proc with .pid, spawn_ns, end_ns, rc, device, job)), records (job name -> the workload's JSON record, or
    None), samples ([(t_ns, [busy_ns per GPU])]), final (simcuda-stat's devices at the end), devmap (PCI bus id ->
    GPU), rota_trace (ROTA_TRACE's file, or None), timeline_dir (SIMCUDA_TIMELINE's folder, or None). runner.Run
    fills one as it runs; the unit tests build one from hand-computed inputs."""

    def __init__(self, t0=0, t_end=0, state=None, records=None, samples=None, final=None, devmap=None,
                 rota_trace=None, timeline_dir=None, policy=None):
        self.t0, self.t_end, self.policy = t0, t_end, policy
        self.state = state if state is not None else {}
        self.records = records if records is not None else {}
        self.samples = samples if samples is not None else []
        self.final = final if final is not None else []
        self.devmap = devmap if devmap is not None else {}
        self.rota_trace, self.timeline_dir = rota_trace, timeline_dir
        self._events = None

    def job_status(self, name):
        st, rec = self.state.get(name), self.records.get(name)
        if st is None:
            return "never started"
        if rec is not None:
            return rec["status"]
        return "no record (exit %s)" % st["rc"]

    def job_gpu(self, name):
        """Which GPU of the node the job ran on: from ROTA_TRACE placements, else its PCI bus id."""
        for ev in self.rota_events():
            if ev.get("ev") == "place" and self.pid_job(ev.get("pid")) == name and "gpu" in ev:
                return int(ev["gpu"])
        rec = self.records.get(name)
        if rec and rec.get("pci_bus_id") in self.devmap:
            return self.devmap[rec["pci_bus_id"]]
        return self.state[name]["device"] if name in self.state else None

    def place_wait(self, name):
        """(start_ns, end_ns) of the job's wait for a GPU with room (rota run --place-wait), or None. The place
        event's wait_us is the whole time rota run waited for rotad's answer: a round trip when nobody waited."""
        for ev in self.rota_events():
            if ev.get("ev") == "place" and ev.get("wait_us", 0) >= PLACE_WAIT_MIN_US and \
                    self.pid_job(ev.get("pid")) == name:
                end = int(ev["ts_us"] * 1000)
                return (end - int(ev["wait_us"] * 1000), end)
        return None

    def pid_job(self, pid):
        for name, st in self.state.items():
            rec = self.records.get(name)
            if pid is not None and (st["proc"].pid == pid or (rec and rec.get("pid") == pid)):
                return name
        return None

    def rota_events(self):
        if getattr(self, "_events", None) is not None:
            return self._events
        self._events = []
        path = getattr(self, "rota_trace", None)
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        ev = json.loads(line)
                        if isinstance(ev, dict) and "ts_us" in ev and "ev" in ev:
                            self._events.append(ev)
                    except ValueError:
                        pass
        return self._events

    def busy_at(self, t, dev=None):
        """Cumulative busy ns at time t (linear between samples), one device or all."""
        s = self.samples
        val = (lambda i: s[i][1][dev]) if dev is not None else (lambda i: sum(s[i][1]))
        if t <= s[0][0]:
            return val(0)
        for i in range(1, len(s)):
            if t <= s[i][0]:
                a, b = s[i - 1][0], s[i][0]
                return val(i - 1) + (val(i) - val(i - 1)) * (t - a) / max(1, b - a)
        return val(len(s) - 1)


# ---- the session: solo baselines then every policy --------------------------------------------------------
