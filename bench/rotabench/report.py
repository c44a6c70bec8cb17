# report.py - the results table, report.md, results.json and the goals.
import json
import os
import platform

from rotabench.mix import SLOW_SUFFIX, SLOW_TIMER_SLACK_NS, SRCDIR
from rotabench.metrics import IDLE_DESC, IDLE_KINDS, READY_CAUSES, READY_DESC, STEAL_WARN, pct


# ---- output -----------------------------------------------------------------------------------------------
def fmt(v, spec, none="-"):
    return none if v is None else spec % v


def table_rows(res):
    out = []
    for m in res["rows"]:
        if not m["available"]:
            out.append([m["policy"], m["why"]] + [""] * 9)
            continue
        out.append([m["policy"], "%.3f" % m["B"], "%.3f" % m["B_max"], "%.3f" % m["B_over_Bmax"],
                    fmt(m["gain_pts"], "%+.1f"), fmt(m["hp_p50_x"], "%.2fx"), fmt(m["hp_p99_x"], "%.2fx"),
                    fmt(m["harvest"], "%.2f"), "%.2f s (%.2fx LB)" % (m["makespan_s"], m["makespan_over_bound"]),
                    "%d%s" % (m["crashed_oom"], " +%d failed" % m["failed"] if m["failed"] else ""),
                    "%.2f s / %.2f s" % (m["mem_wait_s"], m["queue_s"])])
    return out


HEAD = ["policy", "B", "B_max", "B/B_max", "gain pts", "hp p50", "hp p99", "harvest", "makespan",
        "crashed OOM", "mem wait / queue"]


def steal_summary(results):
    """(worst steal over every run and solo phase, 'solo 3%, exclusive 2%, ...' per mix), for the warnings."""
    worst, parts = None, []
    for res in results:
        vals = [("solo", res.get("solo_steal"))] + [(m["policy"], m.get("host_steal")) for m in res["rows"]
                                                    if m.get("available")]
        got = [(n, v) for n, v in vals if v is not None]
        if got:
            parts.append("%s: %s" % (res["mix"]["name"], ", ".join("%s %.0f%%" % (n, 100 * v) for n, v in got)))
            w = max(v for _, v in got)
            worst = w if worst is None else max(worst, w)
    return worst, "; ".join(parts)


def steal_warning(results):
    worst, text = steal_summary(results)
    if worst is None or worst <= STEAL_WARN:
        return None
    return ("the host's hypervisor took up to %.0f%% of the CPU time (steal) during these runs (%s): thread "
            "wake-ups came late, so hand-overs, latencies and busy fractions are worse than this code gives on "
            "a quiet host; rerun when steal is under %.0f%%" % (100 * worst, text, 100 * STEAL_WARN))


def print_table(res):
    rows = table_rows(res)
    w = [max(len(HEAD[i]), *(len(r[i]) for r in rows if r[2] != "")) for i in range(len(HEAD))]
    print()
    print("mix %s  (%s)" % (res["mix"]["name"], res["mix"]["description"]))
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(HEAD)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        if r[2] == "":
            print(r[0].ljust(w[0]) + "  " + r[1])
        else:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))
    for m in res["rows"]:
        if m.get("available") and m.get("idle_s"):
            print("  idle %-10s %s" % (m["policy"], idle_text(m, "GPU-s")))
    for line in host_sensitivity(res):
        print("  " + line)
    for m in res["rows"]:
        if m.get("note"):
            print("  note: %s %s" % (m["policy"], m["note"]))


def ready_text(m):
    r = m.get("ready_s")
    return " (%s)" % ", ".join("%s %.2f" % (k, r[k]) for k in READY_CAUSES) if r else ""


def idle_text(m, unit):
    i = m["idle_s"]
    h = m.get("handover")
    return ("%.2f %s: " % (sum(i.values()), unit) +
            ", ".join("%s %.2f%s" % (k, i[k], ready_text(m) if k == "ready" else "") for k in IDLE_KINDS) +
            "; B %.3f with 'ready' filled" % m["B_ready_filled"] +
            ("; %d hand-overs from the high-priority job, median %.0f us" % (h["n"], h["median_us"])
             if h and h["n"] else "") +
            ("; its idle probe ended %d windows" % h["probe_ends"] if h and h.get("probe_ends") else ""))


SLOW_HOST = ("every process of the run on one CPU beside a busy loop, with %d ms of timer slack"
             % (SLOW_TIMER_SLACK_NS // 1000000))


def host_sensitivity(res):
    """A line per policy run on both hosts (--host-check): its figures on the slowed host against this one's,
    latencies each against solo runs on its own host."""
    rows = {m["policy"]: m for m in res["rows"] if m["available"]}
    out = []
    for name, s in rows.items():
        if s.get("host") != "slow" or name[:-len(SLOW_SUFFIX)] not in rows:
            continue
        n = rows[name[:-len(SLOW_SUFFIX)]]

        def pair(key, spec):
            a, b = n.get(key), s.get(key)
            return "-" if a is None or b is None else (spec + " -> " + spec) % (a, b)
        ready = lambda m: m["idle_s"]["ready"] if m.get("idle_s") else None  # noqa: E731
        ra, rb = ready(n), ready(s)
        out.append("host sensitivity of %s (slowed host: %s): B %s (%+.3f), hp p50 %s, hp p99 %s, harvest %s, "
                   "ready idle %s GPU-s" % (
                       n["policy"], SLOW_HOST, pair("B", "%.3f"), s["B"] - n["B"], pair("hp_p50_x", "%.2fx"),
                       pair("hp_p99_x", "%.2fx"), pair("harvest", "%.2f"),
                       "-" if ra is None or rb is None else "%.2f -> %.2f" % (ra, rb)))
    return out


def achieved(results):
    """One line per mix: what policy 'rota' achieved, next to each baseline (exclusive, shared) that ran."""
    out = []
    for res in results:
        mix, rows = res["mix"], {m["policy"]: m for m in res["rows"]}
        r = rows.get("rota")
        if r is None or not r["available"]:
            out.append("%s: rota did not run (%s)" % (mix["name"], r["why"] if r else "not in this run"))
            continue
        base = [(p, rows[p]) for p in ("exclusive", "shared") if p in rows and rows[p]["available"]]

        def vs(key, spec):
            got = [(p, m[key]) for p, m in base if m.get(key) is not None]
            return " (%s)" % ", ".join("%s %s" % (p, spec % v) for p, v in got) if got else ""

        def crashes(m):
            return "%d" % (m["crashed_oom"] + m["failed"])
        parts = []
        if mix["gpus"] == 1:
            parts.append("GPU busy %.2f of the %.2f this mix allows%s" % (r["B"], r["B_max"], vs("B", "%.2f")))
            if mix["hp"] and r["hp_p99_x"] is not None:
                parts.append("service p99 %.2fx its latency alone%s" % (r["hp_p99_x"], vs("hp_p99_x", "%.2fx")))
            if mix["hp"] and r["harvest"] is not None:
                parts.append("%.0f %% of the service's idle GPU time used by the others" % (100 * r["harvest"]))
        else:
            parts.append("every job done in %.1f s, %.2fx the least any schedule needs%s" % (
                r["makespan_s"], r["makespan_over_bound"], vs("makespan_s", "%.1f s")))
        got = [(p, crashes(m)) for p, m in base]
        parts.append("jobs crashed %s%s" % (crashes(r), " (%s)" % ", ".join("%s %s" % x for x in got) if got else ""))
        out.append("%s, rota: %s" % (mix["name"], "; ".join(parts)))
    return out


def goals(results):
    """The targets, each checked against the 'rota' row."""
    out = []
    for res in results:
        mix, rows = res["mix"], {m["policy"]: m for m in res["rows"]}
        r = rows.get("rota")
        avail = r is not None and r["available"]

        def add(goal, target, got, met):
            out.append((mix["name"], goal, target, got if avail else "not available", met if avail else None))
        # No target on B itself: exclusive's B and the mix's own idle (jobs between kernels, context switches,
        # the queue) bound what any policy reaches, so a fixed B or gain target is met or missed by the mix, not
        # by rota (docs/benchmarks.md, Targets). B, B/B_max and the gain are in the tables.
        if mix["gpus"] == 1:
            if mix["hp"]:
                ok = avail and r["hp_p99_x"] is not None and r["harvest"] is not None
                add("service p99 vs alone; harvest: its idle time others used", "<= 1.10x, harvest >= 0.8",
                    avail and "%s, harvest %s" % (fmt(r["hp_p99_x"], "%.2fx"), fmt(r["harvest"], "%.2f")),
                    ok and r["hp_p99_x"] <= 1.10 and r["harvest"] >= 0.8)
        else:
            add("makespan vs LB, the least any schedule could take", "<= 1.10x",
                avail and "%.2fx (%.2f s vs %.2f s)" % (r["makespan_over_bound"], r["makespan_s"],
                                                        r["makespan_bound_s"]),
                avail and r["makespan_over_bound"] <= 1.10)
        add("crashes: jobs that died (OOM or other)", "0", avail and "%d OOM, %d other" % (r["crashed_oom"], r["failed"]),
            avail and r["crashed_oom"] == 0 and r["failed"] == 0)
    return out


def write_report(ctx, results):
    L = []
    L.append("# rota benchmark report")
    L.append("")
    L.append("- date: %s" % ctx.stamp_human)
    L.append("- command: `%s`" % " ".join(ctx.argv))
    L.append("- host: %s, %d CPUs; device: simcuda (simulated), scale %.3g" % (
        platform.node(), os.cpu_count() or 0, ctx.scale))
    L.append("- rota: %s" % ("run through %s" % ctx.tools.rota_via if not ctx.tools.rota_missing else
                             "**not available** (%s missing): rota rows are not run" % ctx.tools.rota_missing))
    _, text = steal_summary(results)
    L.append("- host CPU steal (the hypervisor's share of CPU time) during the runs: %s" % (text or "not measured"))
    warn = steal_warning(results)
    if warn:
        L.append("")
        L.append("**Warning**: " + warn + ".")
    L.append("")
    L.append("## Goals (simulated device, policy `rota`; terms under Definitions)")
    L.append("")
    L.append("| mix | goal | target | reached | met |")
    L.append("|---|---|---|---|---|")
    for mixname, goal, target, got, met in goals(results):
        L.append("| %s | %s | %s | %s | %s |" % (mixname, goal, target, got,
                                                 "n/a" if met is None else ("yes" if met else "**no**")))
    for res in results:
        mix = res["mix"]
        L.append("")
        L.append("## Mix `%s`: %s" % (mix["name"], mix["description"]))
        L.append("")
        L.append("%d GPU(s); simcuda settings: %s. File: `%s`." % (
            mix["gpus"], ", ".join("%s=%s" % kv for kv in sorted(mix["env"].items())) or "defaults",
            os.path.relpath(mix["path"], SRCDIR)))
        L.append("")
        L.append("| job | kind | priority | weight | mem | arrives | solo wall | solo device time | solo busy |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for j in mix["jobs"]:
            s = res["solo"][j["name"]]
            L.append("| %s | %s | %s | %s | %s | %.2f s | %.2f s | %.2f s | %.2f |" % (
                j["name"], j["workload"]["kind"], j["priority"], j["weight"], j["mem"], j["arrive_s"],
                s["wall_ns"] / 1e9, s["device_ns"] / 1e9, s["device_ns"] / max(1, s["wall_ns"])))
        L.append("")
        L.append("| " + " | ".join(HEAD) + " |")
        L.append("|" + "---|" * len(HEAD))
        for row in table_rows(res):
            if row[2] == "":
                L.append("| %s | %s |%s" % (row[0], row[1], " |" * (len(HEAD) - 2)))
            else:
                L.append("| " + " | ".join(row) + " |")
        L.append("")
        avail = [m for m in res["rows"] if m["available"]]
        if avail:
            L.append("B_max ignores arrival times; counting them (every job done, makespan >= LB) B cannot exceed "
                     "S / (G x LB) = %.3f here." % avail[0]["B_bound_arrivals"])
            L.append("")
        idle_rows = [m for m in res["rows"] if m["available"] and m.get("idle_s")]
        if idle_rows:
            L.append("Where the GPUs' idle time went (GPU-seconds; see Definitions, *idle*):")
            L.append("")
            L.append("| policy | idle | " + " | ".join(IDLE_KINDS) + " | ready: " + " / ".join(READY_CAUSES) +
                     " | B | B with 'ready' filled | "
                     "hand-overs from the high-priority job (n, median, p90, total) | timeline busy vs B's |")
            L.append("|---|---|" + "---|" * len(IDLE_KINDS) + "---|---|---|---|---|")
            for m in idle_rows:
                i, h = m["idle_s"], m.get("handover")
                hs = ("%d, %.0f µs, %.0f µs, %.3f s" % (h["n"], h["median_us"], h["p90_us"], h["sum_s"])
                      if h and h["n"] else "0" if h else "-") + (
                    "; %d windows ended by the idle probe" % h["probe_ends"] if h and h.get("probe_ends") else "")
                r = m.get("ready_s")
                L.append("| %s | %.3f | %s | %s | %.3f | %.3f | %s | %.3f s vs %.3f s |" % (
                    m["policy"], sum(i.values()), " | ".join("%.3f" % i[k] for k in IDLE_KINDS),
                    " / ".join("%.3f" % r[k] for k in READY_CAUSES) if r else "-", m["B"],
                    m["B_ready_filled"], hs, m["timeline_busy_s"], m["busy_s"]))
            L.append("")
        sens = host_sensitivity(res)
        if sens:
            L.append("Host sensitivity (`--host-check`; the `%s` rows ran on the slowed host against solo runs "
                     "there):" % SLOW_SUFFIX)
            L.append("")
            L += ["- " + line for line in sens]
            L.append("")
        for m in res["rows"]:
            if m.get("note"):
                L.append("**%s did not complete**: %s." % (m["policy"], m["note"]))
                L.append("")
        L.append("Per job (status, GPU, start after arrival, memory wait, end):")
        L.append("")
        L.append("| policy | " + " | ".join(j["name"] for j in mix["jobs"]) + " |")
        L.append("|---|" + "---|" * len(mix["jobs"]))
        for m in res["rows"]:
            if not m["available"]:
                continue
            cells = []
            for j in mix["jobs"]:
                e = m["jobs"][j["name"]]
                cells.append("%s, gpu %s, +%.2f s, wait %.2f s, end %.2f s" % (
                    e["status"], e["gpu"], e["queue_s"] or 0, e["mem_wait_s"], e["end_s"] or 0))
            L.append("| %s | %s |" % (m["policy"], " | ".join(cells)))
        L.append("")
        L.append("Traces (open in ui.perfetto.dev): " + ", ".join(
            "`trace-%s-%s.json`" % (mix["name"], p) for p in res["runs"]))
    L.append("")
    L.append("![busy fraction over time](busy.svg)")
    L.append("")
    L.append("![latency CDF](latency-cdf.svg)")
    L.append("")
    L.append(DEFINITIONS)
    with open(os.path.join(ctx.out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


DEFINITIONS = """## Definitions

- **B** (device busy fraction): compute-engine busy time summed over the node's GPUs (simcuda-stat `busy_ns`,
  reset at the run's start, read after its last job ended) over GPUs x makespan.
- **B_max**: with S the sum of each job's solo device time (simcuda-stat busy of its solo run) and L the longest
  solo wall time, S / (G x max(S/G, L)) on G GPUs: no schedule can be busier, since it cannot end before the
  longest job nor before its work fits on the GPUs.
- **gain pts**: 100 x (B - B of the exclusive run).
- **hp p50 / p99**: the high-priority job's request latency (arrival to completion, queueing included)
  percentiles as multiples of the same percentiles in its solo run (same seed, same arrivals).
- **harvest**: over the high-priority job's serving window [ready, end] on its GPU, (device busy time in the
  window - the high-priority job's solo device time) / (window - the high-priority job's solo device time):
  the share of the time the high-priority job leaves the GPU idle that went to other jobs' kernels. 0 for
  exclusive; 1 means every idle moment was filled.
- **makespan**: first arrival to last job's exit; LB is a lower bound for any schedule that completes every
  job: the largest of arrival + solo wall time of each job, and arrival + (device time of the jobs arriving
  then or later) / G. A run whose jobs crashed can end below it: it did not do all the work.
- **crashed OOM**: jobs whose allocation returned CUDA_ERROR_OUT_OF_MEMORY (they exit as PyTorch would).
- **switches** (results.json: `switches`, `switch_s`): the compute engines' context switches and the time they
  took, which busy time leaves out; `samples` has the busy counters this report plots.
- **noise floor**: the exclusive row's hp p50/p99 compare two runs of the high-priority job alone on its GPU;
  their distance from 1.00x is this machine's run-to-run noise (host CPUs shared with the other jobs).
- **trace**: `trace-MIX-POLICY.json` (Chrome trace format, opens in ui.perfetto.dev) has one process per job:
  its queueing, lifetime, placement, setup, requests/iterations and memory waits from the workload's record,
  plus rota's own decisions where the shim/rotad wrote them to `$ROTA_TRACE` (JSON lines, one object per line:
  `{"ts_us": CLOCK_MONOTONIC us, "pid": client pid, "ev":
  "hold|release|mem_wait|mem_grant|mem_deny|place|idle_probe", "gpu": N, "bytes": N, ...}`; hold..release and
  mem_wait..mem_grant/mem_deny pairs become spans, a high client's idle_probe an instant).
- **idle** (GPU-seconds, results.json `idle_s`): GPUs x makespan - busy, split by what the jobs were doing at
  each idle moment, from simcuda's device timeline (`SIMCUDA_TIMELINE`: every engine segment of every process)
  and the workload records: {IDLE}. A job "has work" from a request's arrival, or an iteration's first launch,
  until the last of its kernels inside it ended. Only *ready* is idle time a scheduler could still fill:
  *B with 'ready' filled* (results.json `B_ready_filled`) = (busy + ready) / (GPUs x makespan) is the busy
  fraction of the same run with all of it filled, what a better launch policy could reach at most without
  changing the jobs' host gaps or memory (B_max counts neither). The trace shows every idle piece with its
  kind on the GPU's engine track. *ready* is split (results.json `ready_s`) by what kept it idle: {READY}.
  *Hand-overs from the high-priority job* (results.json `handover`): every
  idle gap on a GPU's engine from the end of that job's work to another job's next kernel; with rota, what
  releasing the lower classes costs; and how many of that job's idle windows its idle probe ended at once
  (`probe_ends`: ROTA_TRACE's idle_probe events, see docs/librota.md). `timeline_busy_s` is the timeline's
  busy time, to compare with simcuda-stat's (they differ only if a process died before writing its timeline).
- **host steal** (results.json `host_steal` per run, `solo_steal` per mix): the share of the host's CPU time that
  its hypervisor gave to other guests while the run went on (/proc/stat's steal ticks over all ticks). simcuda and
  rota hand work over through thread wake-ups, so above {STEAL}% the figures say more about the host than
  about rota; the terminal and this report then warn.
- **mem wait / queue**: summed over jobs, time inside cuMemAlloc calls that took over 10 ms (rota queueing
  instead of failing) / time from a job's arrival to its start (the exclusive queue), and while `rota run` waited
  for a GPU with room for it (`--place-wait`).
- **host sensitivity** (`--host-check`): each rota policy runs again on a slowed host ({SLOW}), as do the
  solo runs its latencies are compared with; a row `POLICY{SUFFIX}` and one line per policy give what changed.
  A figure that moves there depends on how fast the host's threads wake up, not on the launch policy alone.
""".replace("{SLOW}", SLOW_HOST).replace("{SUFFIX}", SLOW_SUFFIX).replace("{READY}", "; ".join(
    "*%s*: %s" % (k, READY_DESC[k]) for k in READY_CAUSES)).replace("{IDLE}", "; ".join("*%s*: %s" % (k, IDLE_DESC[k]) for k in IDLE_KINDS)).replace(
    "{STEAL}", "%.0f" % (100 * STEAL_WARN))


def write_json(ctx, results):
    doc = {"date": ctx.stamp_human, "command": ctx.argv, "scale": ctx.scale,
           "rota_available": not ctx.tools.rota_missing, "mixes": []}
    for res in results:
        mix = {k: v for k, v in res["mix"].items()}
        doc["mixes"].append({
            "mix": mix,
            "solo": {n: {"device_s": s["device_ns"] / 1e9, "wall_s": s["wall_ns"] / 1e9,
                         "p50_ms": pct(s["rec"]["latency_ns"], 50) / 1e6 if s["rec"]["latency_ns"] else None,
                         "p99_ms": pct(s["rec"]["latency_ns"], 99) / 1e6 if s["rec"]["latency_ns"] else None}
                     for n, s in res["solo"].items()},
            # samples: (seconds since the run's start, cumulative busy ns per GPU), what busy.svg plots
            "rows": res["rows"],
            "solo_steal": res.get("solo_steal"),
            "goals": [{"goal": g, "target": t, "reached": r, "met": met}
                      for mixname, g, t, r, met in goals([res])]})
    with open(os.path.join(ctx.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
