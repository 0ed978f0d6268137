#!/usr/bin/env python3
"""TAP checks of bench/host_cpu.py (no server, no GPU): samples grouped by the
step log's line count (a progress bar's carriage returns counted as wc -l
counts them), a group named by the point that ended it or, before a point's
start line, as what ran before it (an index build); a sample pair across two
groups or out of order counted for neither; busy, system and switch figures
from /proc/stat differences; the load generator's result lines parsed into
(label, clients), a run without recall included."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import host_cpu  # noqa: E402

checks = []


def ok(cond, name):
    checks.append((bool(cond), name))


def sample(t, count, user, system, idle, ctxt, running):
    # /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice
    # (all user time guest time here: counted twice it would change every share)
    return f"{t} {count} cpu {user} 0 {system} {idle} 0 0 0 0 {user} 0 ctxt {ctxt} procs_running {running}\n"


LOG = [
    "bench: loading\n",
    "[#     ] 5 rows\r[###   ] 10 rows\r[##### ] 15 rows\r[######] 20 rows\n",  # one line for wc -l
    "bench: gknn-graph: CREATE INDEX ...\n",  # 3 lines: the build runs
    "bench: gknn-graph graph_ef_search=16, 16 clients: start\n",  # 4: the point runs
    "label clients queries QPS p50 p95 p99 recall errors\n",
    "gknn-graph graph_ef_search=16    16   1000  94273.6  0.16  0.24  0.28  0.995  0\n",
    "bench: gknn-graph graph_ef_search=16, 16 clients: the service ran ...\n",
    "bench: postgres-exact, 64 clients: start\n",  # 8: the second point runs
    "label clients queries QPS p50 p95 p99 recall errors\n",
    "postgres-exact                   64   2000  21532.5  2.71  5.73  7.67  -  0\n",
]

with tempfile.TemporaryDirectory() as d:
    step = os.path.join(d, "step.log")
    with open(step, "w", newline="") as f:
        f.write("".join(LOG))
    cpu = os.path.join(d, "cpu.log")
    with open(cpu, "w") as f:
        f.write(sample(0.0, 3, 0, 0, 0, 0, 1))  # the build: 2 pairs, 20 % busy
        f.write(sample(0.5, 3, 10, 10, 80, 10, 2))
        f.write(sample(1.0, 3, 20, 20, 160, 20, 2))
        f.write(sample(1.5, 4, 40, 30, 180, 100, 3))  # across the point's start: for neither
        f.write(sample(2.0, 4, 65, 55, 230, 600, 20))  # the point: 50 % busy, 25 % system, 1,000 switches/s
        f.write(sample(2.5, 4, 90, 80, 280, 1100, 22))
        f.write(sample(2.5, 4, 91, 81, 281, 1101, 23))  # a repeated time: skipped
        f.write("garbage line\n")
        f.write(sample(3.0, 8, 190, 80, 280, 1200, 60))  # across: for neither
        f.write(sample(3.5, 8, 290, 80, 280, 1300, 70))  # the second point: all busy
    points = host_cpu.by_point(cpu, step)
    names = [p[0] for p in points]
    ok(len(points) == 3, "three groups: the build, two points (the garbage line skipped)")
    build, first, second = points
    ok(build[0] == "before gknn-graph graph_ef_search=16 16" and build[1] is None,
       "the build's group is named as what ran before the point, with no point key")
    ok(abs(build[2]["busy"] - 0.2) < 1e-9 and build[2]["samples"] == 2, "the build's own figures")
    ok(first[1] == ("gknn-graph graph_ef_search=16", 16), "the point's group has its (label, clients)")
    ok(first[2]["samples"] == 2, "pairs across groups and a repeated time count for neither")
    ok(abs(first[2]["busy"] - 0.5) < 1e-9 and abs(first[2]["system"] - 0.25) < 1e-9, "busy and system shares "
       "(guest time, within user, not counted twice)")
    ok(abs(first[2]["switches"] - 1000) < 1e-6, "context switches a second")
    ok(abs(first[2]["runnable"] - 21) < 1e-9, "runnable tasks: the mean of the samples")
    ok(second[1] == ("postgres-exact", 64), "the second point, found where the carriage returns count as wc -l "
       "counts (not as line ends)")
    ok(abs(second[2]["busy"] - 1.0) < 1e-9 and second[2]["system"] == 0, "a fully busy group, no system time")

ok(host_cpu.point_key("gknn-graph graph_ef_search=16    16   1000  94273.6  0.16  0.24  0.28  0.995  0")
   == ("gknn-graph graph_ef_search=16", 16), "a result line's label (with spaces) and clients")
ok(host_cpu.point_key("gknn-ivfpq-exact    64   137957   68461.0  0.89  1.42  1.84  1  0") == ("gknn-ivfpq-exact", 64),
   "a label of one word")
ok(host_cpu.point_key("label clients queries QPS p50 p95 p99 recall errors") is None, "the header is no point")
ok(host_cpu.point_key("bench: loaded in 1.8 s") is None, "nor a bench line")

print(f"1..{len(checks)}")
for i, (good, name) in enumerate(checks, 1):
    print(f"{'ok' if good else 'not ok'} {i} - {name}")
sys.exit(0 if all(g for g, _ in checks) else 1)
