"""usage: scripts/bench [options] MIX...

Runs each MIX (a file, or a name in scripts/mixes/) under every policy it lists, in one invocation, each run on
a fresh simulated node (SIMCUDA_NODE) with simcuda-stat reset at its start, sampled while it runs and read at
its end; and each job alone on a node of its own (solo baselines). Writes results/<timestamp>/: report.md,
results.json, busy.svg, latency-cdf.svg, trace-<mix>-<policy>.json (Chrome/Perfetto) and every job's record.

Exit codes: 0 every run completed (jobs that crash are results, not failures); 1 a run could not be done
(missing program, simcuda-stat failure, timeout); 2 usage.
"""
# cli.py - scripts/bench's command line: parses the options, runs the mixes, writes and prints the results.
import argparse
import datetime
import os
import shlex
import shutil
import sys

from rotabench.mix import BenchError, MIX_FORMAT, POLICIES, SRCDIR, die_usage, load_mix
from rotabench.plots import write_plots
from rotabench.report import achieved, print_table, steal_warning, write_json, write_report
from rotabench.runner import Ctx, Tools, run_mix, slow_host_cpu


# ---- main -------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[1],
                                 usage="scripts/bench [options] MIX...",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=MIX_FORMAT + "\n\nExit codes: 0 done; 1 a run could not be done "
                                 "(timeout, missing program); 2 usage.")
    ap.add_argument("mixes", nargs="+", metavar="MIX", help="mix file or name in scripts/mixes/")
    ap.add_argument("--build", default=os.environ.get("ROTA_BUILD") or os.path.join(SRCDIR, "build"),
                    help="build folder with bin/workload, bin/simcuda-stat, lib/ (default $ROTA_BUILD or build)")
    ap.add_argument("--out", help="results folder (default results/<timestamp>)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply job lengths and arrival times (default 1)")
    ap.add_argument("--quick", action="store_true", help="scale 0.3: a smoke run (about 10-20 s on a tiny mix)")
    ap.add_argument("--policies", help="comma-separated subset of: " + ", ".join(POLICIES))
    ap.add_argument("--solo-jobs", type=int, default=4, metavar="N",
                    help="solo baselines run N at a time, each on its own node (default 4; the high-priority "
                         "job's always runs alone)")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds before a run's jobs are killed (default: 3x its jobs' solo times + 30 s)")
    ap.add_argument("--sample-ms", type=float, default=100, help="simcuda-stat sampling period (default 100)")
    ap.add_argument("--rotad-args", default="", metavar="ARGS",
                    help="extra rotad options for the rota policies, e.g. \"--idle-ms 1\" (default none)")
    ap.add_argument("--mps-args", default="", metavar="ARGS",
                    help="extra rotad options for the rota-mps policy only, e.g. \"--mps-share low=60\" (default none)")
    ap.add_argument("--host-check", action="store_true",
                    help="run each rota policy again on a slowed host (every process of the run on one CPU beside "
                         "a busy loop, 1 ms timer slack) against solo runs there, and report what changed")
    a = ap.parse_args()
    if a.quick:
        a.scale *= 0.3
    if not (0 < a.scale <= 100):
        die_usage("--scale must be in (0, 100]")
    if not (0 <= a.timeout <= 86400) or not (10 <= a.sample_ms <= 10000):
        die_usage("--timeout must be 0..86400 s (0: automatic) and --sample-ms 10..10000")
    ctx = Ctx()
    ctx.scale, ctx.solo_jobs = a.scale, a.solo_jobs
    if not 1 <= a.solo_jobs <= 64:
        die_usage("--solo-jobs must be 1..64")
    ctx.timeout_ns, ctx.sample_ns = int(a.timeout * 1e9), int(a.sample_ms * 1e6)
    ctx.rotad_args = shlex.split(a.rotad_args)
    ctx.mps_args = shlex.split(a.mps_args)
    ctx.host_check = a.host_check
    ctx.slow_cpu = slow_host_cpu() if a.host_check else None
    ctx.failures = []
    ctx.tty = sys.stderr.isatty()
    ctx.cols = shutil.get_terminal_size((100, 20)).columns
    ctx.last_progress = 0
    ctx.argv = ["scripts/bench"] + sys.argv[1:]
    stamp = datetime.datetime.now(datetime.timezone.utc)
    ctx.stamp_human = stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
    ctx.out = a.out or os.path.join(SRCDIR, "results", stamp.strftime("%Y%m%d-%H%M%S"))
    mixes = [load_mix(m, a.scale) for m in a.mixes]
    if a.policies:
        want = a.policies.split(",")
        for p in want:
            if p not in POLICIES:
                die_usage("unknown policy '%s' (known: %s)" % (p, ", ".join(POLICIES)))
        for m in mixes:
            m["policies"] = [p for p in want]
    try:
        ctx.tools = Tools(os.path.abspath(a.build))
        os.makedirs(ctx.out, exist_ok=True)
        results = []
        for mix in mixes:
            results.append(run_mix(ctx, mix, os.path.join(ctx.out, "runs", mix["name"])))
        for res in results:
            print_table(res)
        write_plots(ctx, results)
        write_report(ctx, results)
        write_json(ctx, results)
    except BenchError as e:
        sys.stderr.write("\nbench: fatal: %s\n" % e)
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("\nbench: interrupted\n")
        return 130
    # What rota achieved against each baseline; the targets and whether they were met are in the report.
    print()
    for line in achieved(results):
        print(line)
    warn = steal_warning(results)
    if warn:
        print("\nwarning: " + warn)
    out = os.path.relpath(ctx.out)
    out = os.path.abspath(ctx.out) if out.startswith("..") else out  # short where it is under the cwd
    print("\nreport: %s" % os.path.join(out, "report.md"))
    print("plots:  %s, %s" % (os.path.join(out, "busy.svg"), os.path.join(out, "latency-cdf.svg")))
    traces = sorted(f for f in os.listdir(ctx.out) if f.startswith("trace-") and f.endswith(".json"))
    if traces:
        print("traces: %s/trace-*.json (%d; open one in ui.perfetto.dev: jobs, requests, rota's holds, memory "
              "waits and placements)" % (out, len(traces)))
    for f in ctx.failures:
        sys.stderr.write("bench: run did not complete: %s\n" % f)
    return 1 if ctx.failures else 0
