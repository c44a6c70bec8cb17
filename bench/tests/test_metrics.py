# test_metrics.py - every metric of rotabench.metrics on hand-computed inputs (python3 -m unittest; make test runs
# it through tests/bench/rotabench.t).
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from rotabench import metrics as bm  # noqa: E402
from rotabench import mix as bmix  # noqa: E402

M = 1000000  # ns per ms
S = 1000000000  # ns per s


class Proc:
    def __init__(self, pid):
        self.pid = pid


class Percentiles(unittest.TestCase):
    def test_nearest_rank(self):
        v = list(range(10, 0, -1))  # 10..1, unsorted on purpose
        self.assertEqual(bm.pct(v, 50), 5)   # ceil(0.5 * 10) = 5th of 1..10
        self.assertEqual(bm.pct(v, 90), 9)
        self.assertEqual(bm.pct(v, 99), 10)  # ceil(9.9) = 10th
        self.assertEqual(bm.pct(v, 0), 1)
        self.assertIsNone(bm.pct([], 50))

    def test_latency_ratios(self):
        solo = [5 * i for i in range(1, 11)]   # p50 25, p99 50
        run = [10] * 9 + [200]                 # p50 10, p99 200
        self.assertAlmostEqual(bm.latency_ratio(run, solo, 50), 10 / 25)
        self.assertAlmostEqual(bm.latency_ratio(run, solo, 99), 200 / 50)
        self.assertIsNone(bm.latency_ratio([], solo, 50))
        self.assertIsNone(bm.latency_ratio(run, [0, 0], 50), "no ratio over a zero baseline")


class Utilization(unittest.TestCase):
    def test_B(self):
        # 3 s of kernels on 2 GPUs over a 2 s makespan: 3 / (2 x 2)
        self.assertAlmostEqual(bm.utilization(3 * S, 2, 2 * S), 0.75)
        self.assertEqual(bm.utilization(5, 1, 0), 0.0)

    def test_B_max(self):
        solo = {"a": {"device_ns": 2 * S, "wall_ns": 4 * S}, "b": {"device_ns": 1 * S, "wall_ns": 1 * S}}
        # S = 3 s, L = 4 s: one GPU 3 / max(3, 4); two GPUs 3 / (2 x max(1.5, 4))
        self.assertAlmostEqual(bm.b_max(solo, 1), 0.75)
        self.assertAlmostEqual(bm.b_max(solo, 2), 0.375)
        # device time bounds it, not the longest job: 6 s of work on one GPU can fill it
        full = {"a": {"device_ns": 3 * S, "wall_ns": 3 * S}, "b": {"device_ns": 3 * S, "wall_ns": 3 * S}}
        self.assertAlmostEqual(bm.b_max(full, 1), 1.0)

    def test_gain(self):
        self.assertAlmostEqual(bm.gain_pts(0.8, 0.5), 30.0)
        self.assertAlmostEqual(bm.gain_pts(0.4, 0.5), -10.0)
        self.assertIsNone(bm.gain_pts(0.8, None))


class Harvest(unittest.TestCase):
    def test_harvest(self):
        # a 100 ms window, the high job's own 40 ms of kernels, 70 ms busy: 30 of the 60 idle ms went to others
        self.assertAlmostEqual(bm.harvest(100 * M, 40 * M, 70 * M), 0.5)
        self.assertAlmostEqual(bm.harvest(100 * M, 40 * M, 100 * M), 1.0)
        self.assertEqual(bm.harvest(100 * M, 40 * M, 30 * M), 0.0, "never below 0")
        self.assertIsNone(bm.harvest(100 * M, 100 * M, 100 * M), "no idle time: no harvest")
        self.assertIsNone(bm.harvest(100 * M, 150 * M, 100 * M), "own time is at most the window")


class MakespanBound(unittest.TestCase):
    def test_bound(self):
        solo = {n: {"wall_ns": 1 * S, "device_ns": 1 * S} for n in "abc"}
        mix = {"gpus": 1, "jobs": [{"name": "a", "arrive_s": 0.0}, {"name": "b", "arrive_s": 0.5},
                                   {"name": "c", "arrive_s": 0.5}]}
        # one GPU: all 3 s of work arrive by 0 s -> 3 s (beats 0.5 s + the 2 s arriving at 0.5)
        self.assertAlmostEqual(bm.makespan_bound(mix, solo), 3 * S)
        # two GPUs: at 0.5 s, 2 s of work over 2 GPUs and b's own 1 s -> 1.5 s
        self.assertAlmostEqual(bm.makespan_bound(dict(mix, gpus=2), solo), 1.5 * S)
        # work arriving late: b and c at 2 s on one GPU need 2 s of device time after their arrival -> 4 s
        late = {"gpus": 1, "jobs": [{"name": "a", "arrive_s": 0.0}, {"name": "b", "arrive_s": 2.0},
                                    {"name": "c", "arrive_s": 2.0}]}
        self.assertAlmostEqual(bm.makespan_bound(late, solo), 4 * S)
        # a long job: its arrival plus its solo time
        solo["c"] = {"wall_ns": 4 * S, "device_ns": 1 * S}
        self.assertAlmostEqual(bm.makespan_bound(dict(mix, gpus=2), solo), 4.5 * S)


def idle_run():
    """Job a works [5, 20] and [25, 40] ms with kernels [10, 20] and [30, 40] (ctx 1); job b waits for memory
    [0, 45], then works [46, 60] with a kernel [50, 60] (ctx 2: the engine switches for 1 ms before it).
    Window [0, 100]."""
    state = {n: {"proc": Proc(4242), "spawn_ns": 0, "end_ns": 100 * M, "rc": 0, "device": 0,
                 "job": {"name": n, "arrive_s": 0.0}} for n in ("a", "b")}
    empty = {"arrival_ns": [], "latency_ns": [], "mem_wait_start_ns": [], "mem_wait_dur_ns": []}
    records = {"a": dict(empty, pid=11, iter_start_ns=[5 * M, 25 * M], iter_end_ns=[22 * M, 45 * M]),
               "b": dict(empty, pid=12, iter_start_ns=[46 * M], iter_end_ns=[61 * M],
                         mem_wait_start_ns=[0], mem_wait_dur_ns=[45 * M])}
    run = bm.RunRecord(t0=0, t_end=100 * M, state=state, records=records,
                       final=[{"busy_ns": 30 * M, "node_switch_ns": 1 * M}])
    tl = {0: [(10 * M, 20 * M, 11, 1), (30 * M, 40 * M, 11, 1), (50 * M, 60 * M, 12, 2)]}
    return run, {"name": "m", "gpus": 1, "jobs": [{"name": "a"}, {"name": "b"}]}, tl


class IdleBreakdown(unittest.TestCase):
    def test_kinds(self):
        run, mix, tl = idle_run()
        idle, pieces = bm.idle_breakdown(run, mix, tl)
        # 70 idle ms = ready 13 (a's [5,10], [25,30]; b's [46,49]) + memory 15 ([0,5], [20,25], [40,45])
        #            + host 41 ([45,46], [60,100]) + switch 1 ([49,50])
        self.assertEqual({k: round(v / M, 6) for k, v in idle.items()},
                         {"ready": 13, "memory": 15, "queued": 0, "host": 41, "switch": 1})
        self.assertEqual([(a // M, b // M, k) for a, b, k in pieces[0]],
                         [(0, 5, "memory"), (5, 10, "ready"), (20, 25, "memory"), (25, 30, "ready"),
                          (40, 45, "memory"), (45, 46, "host"), (46, 49, "ready"), (60, 100, "host")])

    def test_queued(self):
        run, mix, tl = idle_run()
        run.state["c"] = {"proc": Proc(4243), "spawn_ns": 70 * M, "end_ns": 100 * M, "rc": 0, "device": 0,
                          "job": {"name": "c", "arrive_s": 0.060}}
        run.records["c"] = None
        idle, _ = bm.idle_breakdown(run, mix, tl)
        # c arrived at 60 ms and started at 70: those 10 host ms are 'queued'
        self.assertEqual((round(idle["host"] / M), round(idle["queued"] / M), round(idle["ready"] / M)),
                         (31, 10, 13))

    def test_handovers(self):
        run, mix, tl = idle_run()
        # a high: only a's end at 40 ms to b's kernel at 50 counts (10 ms), not a's own gap from 20 to 30
        self.assertEqual(bm.handovers(run, dict(mix, hp="a"), tl),
                         {"n": 1, "median_us": 10000.0, "p90_us": 10000.0, "sum_s": 0.01, "probe_ends": 0})
        self.assertIsNone(bm.handovers(run, dict(mix, hp=None), tl))
        self.assertEqual(bm.handovers(run, dict(mix, hp="b"), tl)["n"], 0)

    def test_ready_causes(self):
        run, mix, tl = idle_run()
        # b's launches wait in rota's gate [40, 48] ms (two threads: [40, 44] and [42, 48]); a's never
        run._events = [{"ts_us": t * 1000, "pid": 12, "ev": e} for t, e in
                       ((40, "hold"), (42, "hold"), (44, "release"), (48, "release"))]
        _, pieces = bm.idle_breakdown(run, mix, tl)
        # ready: a's [5,10] and [25,30] (not held: waiting), b's [46,49]: held to 48, then waiting
        self.assertEqual({k: round(v / M, 6) for k, v in bm.ready_causes(run, mix, tl, pieces).items()},
                         {"held": 2, "high": 0, "waiting": 11})
        # a as the high-priority job: its ready time is its own
        self.assertEqual({k: round(v / M, 6) for k, v in bm.ready_causes(run, dict(mix, hp="a"), tl,
                                                                          pieces).items()},
                         {"held": 2, "high": 10, "waiting": 1})
        # a hold whose release never came (the job was killed) lasts to the run's end
        run._events = [{"ts_us": 47000, "pid": 12, "ev": "hold"}]
        self.assertEqual(bm.hold_spans(run), {"b": [(47 * M, 100 * M)]})
        self.assertEqual(round(bm.ready_causes(run, mix, tl, pieces)["held"] / M, 6), 2)

    def test_intervals(self):
        x, y = [(0, 10), (20, 30)], [(5, 7), (8, 22), (25, 26)]
        self.assertEqual(bm.intersect(x, y), [(5, 7), (8, 10), (20, 22), (25, 26)])
        self.assertEqual(bm.subtract(x, y), [(0, 5), (7, 8), (22, 25), (26, 30)])
        self.assertEqual(bm.subtract([(0, 10)], [(-5, 3), (9, 15)]), [(3, 9)])
        self.assertEqual(bm.subtract([(0, 10)], [(0, 10)]), [])

    def test_merge(self):
        self.assertEqual(bm.merge([(5, 10), (0, 3), (11, 12), (20, 20)], slack=1), [[0, 3], [5, 12]])


class Samples(unittest.TestCase):
    def test_busy_at(self):
        run = bm.RunRecord(samples=[(0, [0, 0]), (10, [10, 0]), (20, [10, 20])])
        self.assertEqual(run.busy_at(5, 0), 5)      # linear between samples
        self.assertEqual(run.busy_at(15, 1), 10)
        self.assertEqual(run.busy_at(15), 20)       # all GPUs: 10 + 10
        self.assertEqual(run.busy_at(-1), 0)
        self.assertEqual(run.busy_at(99, 1), 20)


class Steal(unittest.TestCase):
    def test_steal(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "stat")
            with open(p, "w") as f:
                f.write("cpu  100 0 50 800 0 0 0 50 7 0\ncpu0 50 0 25 400 0 0 0 25 0 0\n")
            a = bm.cpu_times(p)
            with open(p, "w") as f:
                f.write("cpu  160 0 70 1020 0 0 0 150 9 0\n")
            b = bm.cpu_times(p)
            # 400 ticks in all (first eight fields), 100 of them steal; guest ticks are inside user already
            self.assertEqual(bm.steal_fraction(a, b), 0.25)
            self.assertIsNone(bm.cpu_times(os.path.join(d, "none")))
        self.assertIsNone(bm.steal_fraction(None, b))
        self.assertIsNone(bm.steal_fraction(a, a))


class Priorities(unittest.TestCase):
    def test_one_table(self):
        """The bench's class names are runtime/lib/prio.c's table, in its order."""
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "runtime", "lib", "prio.c")
        with open(src) as f:
            table = re.findall(r'\[ROTA_PRIO_(\w+)\]\s*=\s*"(\w+)"', f.read())
        self.assertEqual(tuple(n for _, n in table), bmix.PRIORITIES)
        self.assertEqual([c.lower() for c, _ in table], list(bmix.PRIORITIES))

    def test_read_table(self):
        """PRIORITIES is read from a prio.c table in its order; a file without one is an error, not a guess."""
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "prio.c")
            with open(p, "w") as f:
                f.write('static const char *const prio_names[3] = {\n    [ROTA_PRIO_A] = "urgent",\n'
                        '    [ROTA_PRIO_B] = "idle",\n};\n')
            self.assertEqual(bmix.read_priorities(p), ("urgent", "idle"))
            with open(p, "w") as f:
                f.write("/* no table */\n")
            with self.assertRaises(RuntimeError):
                bmix.read_priorities(p)

    def test_parse(self):
        self.assertEqual(bmix.parse_priority("HIGH"), "high")
        self.assertEqual(bmix.parse_priority("low"), "low")
        self.assertIsNone(bmix.parse_priority("urgent"))
        self.assertIsNone(bmix.parse_priority(2))


if __name__ == "__main__":
    unittest.main()
