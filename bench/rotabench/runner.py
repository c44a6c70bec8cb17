# runner.py - runs a mix: the tools, a run of jobs on one simulated node, solo baselines.
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time

from rotabench.mix import BenchError, POLICIES, SLOW_SUFFIX, SLOW_TIMER_SLACK_NS, SRCDIR, now_ns, workload_args
from rotabench.metrics import RunRecord, gain_pts, cpu_times, metrics, steal_fraction, steal_text
from rotabench.trace import write_trace


# ---- simcuda-stat -----------------------------------------------------------------------------------------
class Tools:
    def __init__(self, build):
        self.build = build
        self.bin = os.path.join(build, "bin")
        self.lib = os.path.join(build, "lib")
        self.workload = os.path.join(self.bin, "workload")
        self.stat = os.path.join(self.bin, "simcuda-stat")
        self.rota = os.path.join(self.bin, "rota")
        self.librota = os.path.join(self.lib, "librota.so")
        self.rotad = os.path.join(self.bin, "rotad")
        for p in (self.workload, self.stat, os.path.join(self.lib, "libcuda.so.1")):
            if not os.path.exists(p):
                raise BenchError("%s is missing: build it first (make B=%s)" % (p, build))
        # rota rows go through `rota run`; while only librota.so is built, through LD_PRELOAD and the same
        # ROTA_* variables `rota run` sets (said so in the report); with neither, they are "not available".
        self.rota_missing, self.rota_via = "", "rota run"
        # A sanitizer build's runtime must come first in the initial library list, before librota.so that
        # `rota run` preloads (rota run keeps a sanitizer runtime already in LD_PRELOAD in front).
        self.sanitizer_rt = self.find_sanitizer_runtime()
        missing = [p for p in (self.librota, self.rotad) if not os.path.exists(p)]
        if missing:
            self.rota_missing = ", ".join(os.path.relpath(p, SRCDIR) for p in missing)
        elif not self.has_rota_run():
            self.rota_via = "LD_PRELOAD=librota.so (%s has no 'run' yet)" % os.path.relpath(self.rota, SRCDIR)

    def find_sanitizer_runtime(self):
        try:
            out = subprocess.run(["ldd", self.workload], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, timeout=30, env=dict(os.environ, LD_LIBRARY_PATH=self.lib)).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
        for line in out.splitlines():
            parts = line.split()
            if parts and re.match(r"lib(asan|tsan|ubsan)\.so", parts[0]) and "=>" in parts:
                return parts[parts.index("=>") + 1]
        return ""

    def has_rota_run(self):
        if not os.path.exists(self.rota):
            return False
        r = subprocess.run([self.rota, "run", "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=30)
        return r.returncode == 0

    def stat_json(self, env, reset=False):
        cmd = [self.stat, "--json"] + (["--reset"] if reset else [])
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        if r.returncode != 0:
            raise BenchError("simcuda-stat failed (%d): %s" % (r.returncode, r.stderr.strip()))
        try:
            return parse_stat(json.loads(r.stdout))
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError("simcuda-stat --json printed something unexpected (%s): %.200s" % (e, r.stdout))


def parse_stat(doc):
    """Per-device dicts with busy_ns, wall_ns, mem_used, mem_total (whatever else simcuda-stat says is kept)."""
    devs = doc["devices"] if isinstance(doc, dict) else doc
    out = []
    for d in devs:
        e = dict(d)
        e["busy_ns"] = int(d["busy_ns"])
        e["wall_ns"] = int(d.get("wall_ns", 0))
        if isinstance(doc, dict) and "switch_ns" in doc:
            e["node_switch_ns"] = int(doc["switch_ns"])  # the node's setting, beside the device's counter
        out.append(e)
    return out


# ---- a slowed host: what a figure owes to the machine it was measured on ---------------------------------
PR_SET_TIMERSLACK = 29


def slow_host_cpu():
    """The CPU a slowed run is confined to: the last one this process may use."""
    return max(os.sched_getaffinity(0))


def slow_host_preexec(cpu):
    """For subprocess: the child runs on CPU cpu only, with SLOW_TIMER_SLACK_NS of timer slack, which its
    threads and children inherit (a thread that sets its own slack, as rota's tracker and simcuda's stream
    threads do, keeps its own). Runs in the child between fork and exec: nothing there may allocate much."""
    libc = ctypes.CDLL(None, use_errno=True)

    def f():
        os.sched_setaffinity(0, {cpu})
        libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(SLOW_TIMER_SLACK_NS), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
    return f


class BusyLoop:
    """A process that spins on one CPU for as long as a slowed run lasts: the run's processes get that CPU only
    when the scheduler lets them preempt it, as on a host busy with other work."""

    def __init__(self, cpu):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=slow_host_preexec(cpu),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ---- one run: a set of jobs on one node under one policy --------------------------------------------------
class Run(RunRecord):
    """A run in progress: starts rotad and the jobs, samples simcuda-stat, collects the records; what it found
    is read through RunRecord's methods."""
    seq = 0

    def __init__(self, ctx, mix, policy, jobs, gpus, outdir, label, sample=True, timeout_ns=None, slow=False):
        RunRecord.__init__(self, policy=policy)
        # slow: every process of the run (rotad, the jobs) on one CPU beside a busy loop (ctx.slow_cpu)
        self.preexec = slow_host_preexec(ctx.slow_cpu) if slow else None
        self.busy = None
        Run.seq += 1
        self.timeout_ns = timeout_ns or ctx.timeout_ns or 600 * 10**9
        self.ctx, self.mix, self.policy, self.jobs, self.gpus = ctx, mix, policy, jobs, gpus
        self.outdir, self.label, self.sample = outdir, label, sample
        self.mode = POLICIES[policy]["mode"]
        self.node = "bench%d-%d" % (os.getpid(), Run.seq)
        self.env = dict(os.environ)
        for k in [k for k in self.env if k.startswith("SIMCUDA_") or k.startswith("ROTA_")]:
            del self.env[k]
        self.env.update({k: str(v) for k, v in mix["env"].items()})
        self.env.update(POLICIES[policy].get("env", {}))
        self.env["SIMCUDA_NODE"] = self.node
        self.env["SIMCUDA_DEVICES"] = str(gpus)
        self.env["LD_LIBRARY_PATH"] = ctx.tools.lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                                       if os.environ.get("LD_LIBRARY_PATH") else "")
        self.env.pop("LD_PRELOAD", None)
        if ctx.tools.sanitizer_rt:
            self.env["LD_PRELOAD"] = ctx.tools.sanitizer_rt
        self.env.pop("CUDA_VISIBLE_DEVICES", None)  # every job sees the whole node; placement is the policy's
        # simcuda's device timeline (each process's engine segments) for the idle-time breakdown and the trace
        self.timeline_dir = os.path.join(outdir, "timeline") if sample else None
        if self.timeline_dir:
            self.env["SIMCUDA_TIMELINE"] = self.timeline_dir
        if self.mode == "rota":
            self.rota_trace = os.path.join(outdir, "rota-trace.jsonl")
            self.env["ROTA_TRACE"] = self.rota_trace
            # a job waits for memory as long as the run may last, rather than failing after the default 30 s
            self.env["ROTA_MEM_WAIT"] = "%d" % max(30, self.timeout_ns // 10**9)
            self.env["ROTA_REQUIRE"] = "1"  # a job that cannot reach this run's rotad fails, never runs uncoordinated
        self.samples = []  # (t_ns, [busy_ns per device])
        self.state = {}    # job name -> dict(proc, start_ns, end_ns, rc, device, log)
        self.pending = sorted(jobs, key=lambda j: (j["arrive_s"], jobs.index(j)))
        self.free = list(range(gpus))
        self.done = False
        self.error = None

    def start(self):
        self.t0 = now_ns()
        os.makedirs(self.outdir, exist_ok=True)
        if getattr(self, "rota_trace", None) and os.path.exists(self.rota_trace):
            os.unlink(self.rota_trace)  # a previous run's decisions
        if self.timeline_dir:
            shutil.rmtree(self.timeline_dir, ignore_errors=True)  # a previous run's segments
            os.makedirs(self.timeline_dir)
        if self.preexec:
            self.busy = BusyLoop(self.ctx.slow_cpu)
        self.devmap = self.probe()
        self.rotad = None
        if self.mode == "rota":
            self.start_rotad()
        self.stat0 = self.ctx.tools.stat_json(self.env, reset=True)
        self.t0 = now_ns()
        self.last_sample = 0
        self.take_sample()

    def start_rotad(self):
        """A rotad of this run's own (its socket in ROTA_SOCKET), started before the jobs, stopped after."""
        sock = "/tmp/rota-bench-%d-%d.sock" % (os.getpid(), Run.seq)
        self.env["ROTA_SOCKET"] = sock
        rfd, wfd = os.pipe()
        cmd = [self.ctx.tools.rotad, "--foreground", "--socket", sock, "--notify-fd", str(wfd)] + \
            POLICIES[self.policy].get("rotad_args", []) + self.ctx.rotad_args
        if POLICIES[self.policy].get("mps"):
            # rotad --mps starts simcuda's stand-in MPS control daemon, found (as NVIDIA's) by a pipe directory
            # of this run's own, and quits it when it stops
            self.mps_dir = "/tmp/rota-bench-mps-%d-%d" % (os.getpid(), Run.seq)
            os.makedirs(self.mps_dir, exist_ok=True)
            self.env["CUDA_MPS_PIPE_DIRECTORY"] = self.mps_dir
            cmd += ["--mps", "--mps-control", os.path.join(self.ctx.tools.bin, "nvidia-cuda-mps-control")] + \
                self.ctx.mps_args
        log = open(os.path.join(self.outdir, "rotad.log"), "w")
        log.write("$ %s\n" % " ".join(cmd))  # as the jobs' logs do: which policy's options this rotad had
        log.flush()
        self.rotad = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, pass_fds=(wfd,),
                                      preexec_fn=self.preexec)
        os.close(wfd)
        log.close()
        with os.fdopen(rfd) as r:
            ready = r.read(1)  # a newline once listening; EOF if it died
        if not ready:
            self.rotad.wait()
            raise BenchError("rotad did not start (exit %s, see %s)" % (
                self.rotad.returncode, os.path.join(self.outdir, "rotad.log")))

    def stop_rotad(self):
        if self.rotad and self.rotad.poll() is None:
            self.rotad.terminate()
            try:
                self.rotad.wait(10)
            except subprocess.TimeoutExpired:
                self.rotad.kill()
                self.rotad.wait()
        sock = self.env.get("ROTA_SOCKET") if self.rotad else None
        for p in (sock, sock + ".lock") if sock else ():
            if os.path.exists(p):
                os.unlink(p)  # this run's own socket and rotad's lock file beside it
        if getattr(self, "mps_dir", None):
            shutil.rmtree(self.mps_dir, ignore_errors=True)

    def probe(self):
        """PCI bus id -> ordinal on this node, to tell which GPU a job landed on."""
        r = subprocess.run([self.ctx.tools.workload, "--list-devices"], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode != 0:
            raise BenchError("workload --list-devices failed on node %s: %s" % (self.node, r.stderr.strip()))
        return {d["pci_bus_id"]: d["ordinal"] for d in json.loads(r.stdout)}

    def take_sample(self):
        t = now_ns()
        st = self.ctx.tools.stat_json(self.env)
        self.samples.append((t, [d["busy_ns"] for d in st]))
        self.last_sample = t
        return st

    def command(self, job, device):
        rec = os.path.join(self.outdir, job["name"] + ".json")
        wl = [self.ctx.tools.workload, "--out", rec, "--name", job["name"]] + workload_args(job) + \
             ["--device", str(device)]
        if self.mode != "rota":
            return wl, rec
        prio = POLICIES[self.policy].get("priority", job["priority"])
        cenv = ["%s=%s" % kv for kv in sorted(POLICIES[self.policy].get("class_env", {}).get(prio, {}).items())]
        if cenv:
            wl = ["env"] + cenv + wl
        if self.ctx.tools.rota_via != "rota run":
            return ["env", "LD_PRELOAD=" + self.ctx.tools.librota, "ROTA_PRIORITY=" + prio,
                    "ROTA_WEIGHT=%s" % job["weight"], "ROTA_MEM_LIMIT=%s" % job["mem"], "ROTA_GPU=auto"] + wl, rec
        return [self.ctx.tools.rota, "run", "--priority", prio, "--weight", str(job["weight"]),
                "--mem", str(job["mem"]), "--gpu", "auto", "--"] + wl, rec

    def spawn(self, job, device):
        cmd, rec = self.command(job, device)
        if os.path.exists(rec):
            os.unlink(rec)
        log = open(os.path.join(self.outdir, job["name"] + ".log"), "w")
        log.write("$ %s\n" % " ".join(cmd))
        log.flush()
        t = now_ns()
        proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=SRCDIR,
                                preexec_fn=self.preexec)
        self.state[job["name"]] = {"proc": proc, "spawn_ns": t, "end_ns": None, "rc": None, "device": device,
                                   "log": log, "rec": rec, "job": job}

    def step(self):
        """Advances the run; returns True when every job has ended."""
        if self.done:
            return True
        now = now_ns()
        # launch what has arrived
        while self.pending and self.t0 + int(self.pending[0]["arrive_s"] * 1e9) <= now:
            if self.mode == "exclusive":
                if not self.free:
                    break
                self.spawn(self.pending.pop(0), self.free.pop(0))
            else:
                job = self.pending.pop(0)
                self.spawn(job, job["device"])
        for st in self.state.values():
            if st["rc"] is None:
                rc = st["proc"].poll()
                if rc is not None:
                    st["rc"], st["end_ns"] = rc, now_ns()
                    st["log"].close()
                    if self.mode == "exclusive":
                        self.free.append(st["device"])
                        self.free.sort()
        if self.sample and now - self.last_sample >= self.ctx.sample_ns:
            self.take_sample()
        if now - self.t0 > self.timeout_ns and self.pending + [s for s in self.state.values() if s["rc"] is None]:
            self.kill_all("timed out after %.0f s: %d job(s) still running were killed" % (
                self.timeout_ns / 1e9, self.running() + len(self.pending)))
        if not self.pending and all(s["rc"] is not None for s in self.state.values()):
            self.finish()
            return True
        return False

    def kill_all(self, why):
        self.error = why
        self.pending = []
        for st in self.state.values():
            if st["rc"] is None:
                st["proc"].terminate()
        deadline = time.monotonic() + 5
        for st in self.state.values():
            if st["rc"] is None:
                try:
                    st["proc"].wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    st["proc"].kill()
                    st["proc"].wait()
                st["rc"], st["end_ns"] = st["proc"].returncode, now_ns()
                st["log"].close()

    def finish(self):
        self.t_end = max([s["end_ns"] for s in self.state.values()] + [self.t0])
        try:
            self.final = self.take_sample()
        except BenchError as e:
            self.error = self.error or str(e)
            self.final = [{"busy_ns": b} for b in (self.samples[-1][1] if self.samples else [])]
        finally:
            self.stop_rotad()
            if self.busy:
                self.busy.stop()
        self.done = True
        self.records = {}
        for name, st in self.state.items():
            rec = None
            try:
                with open(st["rec"]) as f:
                    rec = json.load(f)
            except (OSError, ValueError):
                pass
            self.records[name] = rec
        shm = os.path.join("/dev/shm", self.node)
        if os.path.exists(shm):
            os.unlink(shm)

    def running(self):
        return sum(1 for s in self.state.values() if s["rc"] is None)



class Ctx:
    pass


def progress(ctx, runs, title):
    now = time.monotonic()
    if not ctx.tty and now - ctx.last_progress < 5:
        return
    ctx.last_progress = now
    parts = []
    for r in runs:
        el = (now_ns() - r.t0) / 1e9
        parts.append("%s %d/%d done, %d running, %.1fs" % (
            r.label, sum(1 for s in r.state.values() if s["rc"] is not None), len(r.jobs), r.running(), el))
    line = "[%s] %s" % (title, "; ".join(parts) if len(parts) <= 2 else "%d runs: %s" % (len(parts), parts[0]))
    if ctx.tty:
        sys.stderr.write("\r\033[K" + line[:ctx.cols - 1])
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def drive(ctx, runs, title):
    try:
        for r in runs:
            r.start()
        while not all([r.step() for r in runs]):  # a list: every run steps, all() must not short-circuit
            progress(ctx, [r for r in runs if not r.done], title)
            time.sleep(0.01)
    except BaseException:
        for r in runs:
            if not r.done:
                r.kill_all("interrupted")
                r.finish()
                r.stop_rotad()
            if r.busy:
                r.busy.stop()
        raise
    if ctx.tty:
        sys.stderr.write("\r\033[K")


def run_solos(ctx, mix, outdir, slow=False):
    """Each job alone on a one-GPU node of its own: the high-priority job first and alone (its latency is the
    baseline), then the others together on separate nodes (they only share the host CPUs). slow: on the slowed
    host (Run), one job at a time."""
    jobs = []
    for j in mix["jobs"]:
        s = dict(j)
        s["arrive_s"] = 0.0
        s["device"] = 0
        jobs.append(s)
    hp = [j for j in jobs if j["name"] == mix["hp"]]
    rest = [j for j in jobs if j["name"] != mix["hp"]]
    n = 1 if slow else max(1, ctx.solo_jobs)
    groups = ([hp] if hp else []) + [rest[i:i + n] for i in range(0, len(rest), n)]
    solo = {}
    for g in groups:
        runs = [Run(ctx, mix, "shared", [j], 1, os.path.join(outdir, "solo", j["name"]), "solo " + j["name"],
                    sample=False, slow=slow) for j in g]
        drive(ctx, runs, "%s solo" % mix["name"])
        for r in runs:
            if r.error:
                raise BenchError("%s: %s" % (r.label, r.error))
            name = r.jobs[0]["name"]
            rec, st = r.records[name], r.state[name]
            solo[name] = {"device_ns": sum(d["busy_ns"] for d in r.final),
                          "wall_ns": st["end_ns"] - st["spawn_ns"],
                          "status": r.job_status(name), "rec": rec}
            if solo[name]["status"] != "ok":
                raise BenchError("solo run of %s did not complete: %s (see %s)" % (
                    name, solo[name]["status"], os.path.join(r.outdir, name + ".log")))
    return solo


def unavailable(policy, why):
    return {"policy": policy, "desc": POLICIES[policy]["desc"], "available": False, "why": why}


def run_policy(ctx, mix, p, solo, outdir, slow=False):
    """One run of mix under policy p; its metrics against solo, and the Run."""
    t = time.monotonic()
    label = p + (SLOW_SUFFIX if slow else "")
    # a run that takes 3x the jobs' solo times back to back (+30 s) is stuck: its jobs are killed
    limit = ctx.timeout_ns or int(3 * sum(s["wall_ns"] for s in solo.values()) + 30e9)
    r = Run(ctx, mix, p, mix["jobs"], mix["gpus"], outdir, label, timeout_ns=limit, slow=slow)
    c0 = cpu_times()
    drive(ctx, [r], mix["name"])
    c1 = cpu_times()
    m = metrics(r, mix, solo)
    m["policy"] = label
    m["host_steal"] = steal_fraction(c0, c1)
    m["note"] = r.error
    if r.error:
        ctx.failures.append("mix %s, %s: %s" % (mix["name"], label, r.error))
    print("   %-10s %s in %.1f s%s" % (label, "FAILED: " + r.error if r.error else "done",
                                       time.monotonic() - t, steal_text(m["host_steal"])), flush=True)
    return m, r


def run_mix(ctx, mix, outdir):
    print("== mix %s: %d jobs on %d GPU%s (%s) ==" % (mix["name"], len(mix["jobs"]), mix["gpus"],
                                                      "s" if mix["gpus"] > 1 else "", mix["path"]), flush=True)
    t = time.monotonic()
    c0 = cpu_times()
    solo = run_solos(ctx, mix, outdir)
    solo_steal = steal_fraction(c0, cpu_times())
    print("   solo baselines done in %.1f s%s" % (time.monotonic() - t, steal_text(solo_steal)), flush=True)
    rows, runs = [], {}
    for p in mix["policies"]:
        if POLICIES[p]["mode"] == "rota" and ctx.tools.rota_missing:
            rows.append(unavailable(p, "not available: %s not built" % ctx.tools.rota_missing))
            print("   %-10s not available (%s missing)" % (p, ctx.tools.rota_missing), flush=True)
            continue
        m, runs[p] = run_policy(ctx, mix, p, solo, os.path.join(outdir, p))
        rows.append(m)
    excl = next((m for m in rows if m["policy"] == "exclusive" and m["available"]), None)
    for m in rows:
        m["gain_pts"] = gain_pts(m["B"], excl["B"]) if excl and m["available"] else None
    # --host-check: the rota policies again on a slowed host, against solo runs on that host; no gain (the
    # exclusive run was on the other host)
    slow = [p for p in runs if POLICIES[p]["mode"] == "rota"] if ctx.host_check else []
    if slow:
        t = time.monotonic()
        solo_slow = run_solos(ctx, mix, os.path.join(outdir, "slow"), slow=True)
        print("   solo baselines on the slowed host (CPU %d) done in %.1f s" % (ctx.slow_cpu, time.monotonic() - t),
              flush=True)
        for p in slow:
            m, r = run_policy(ctx, mix, p, solo_slow, os.path.join(outdir, "slow", p), slow=True)
            m["gain_pts"] = None
            m["host"] = "slow"
            runs[m["policy"]] = r
            rows.append(m)
    for p, r in runs.items():
        write_trace(os.path.join(ctx.out, "trace-%s-%s.json" % (mix["name"], p)), r, mix)
    return {"mix": mix, "solo": solo, "rows": rows, "runs": runs, "solo_steal": solo_steal}
