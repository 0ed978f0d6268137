#!/usr/bin/env python3
"""TAP checks of bench/host_cpu.py (no server, no GPU): samples grouped by the
step log's line count, each group named by the result line that ended it (a
progress bar's carriage returns counted as wc -l counts them), the busy,
system and switch figures from /proc/stat differences, and the load
generator's result lines parsed into (label, clients)."""
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
    return f"{t} {count} cpu {user} 0 {system} {idle} 0 0 0 0 0 0 ctxt {ctxt} procs_running {running}\n"


with tempfile.TemporaryDirectory() as d:
    step = os.path.join(d, "step.log")
    with open(step, "w", newline="") as f:
        f.write("bench: loading\n[#     ] 5 rows\r[###   ] 10 rows\r[##### ] 15 rows\r[######] 20 rows\n")  # 2 lines for wc -l
        f.write("label clients queries QPS p50 p95 p99 recall errors\n")
        f.write("gknn-graph graph_ef_search=16    16   1000  94273.6  0.16  0.24  0.28  0.995  0\n")
        f.write("bench: gknn-graph graph_ef_search=16, 16 clients: ...\n")
        f.write("label clients queries QPS p50 p95 p99 recall errors\n")
        f.write("pgvector-hnsw ef_search=24       64   2000  21532.5  2.71  5.73  7.67  0.991  0\n")
    cpu = os.path.join(d, "cpu.log")
    with open(cpu, "w") as f:
        # Two lines written: the first point runs; 50 % busy, 25 % system, 1,000 switches/s.
        f.write(sample(0.0, 2, 0, 0, 0, 0, 3))
        f.write(sample(0.5, 2, 25, 25, 50, 500, 20))
        f.write(sample(1.0, 2, 50, 50, 100, 1000, 22))
        # Five lines written: the second point runs; all busy, no system time.
        f.write(sample(1.5, 5, 150, 50, 100, 1100, 60))
        f.write("garbage line\n")
        f.write(sample(2.0, 5, 250, 50, 100, 1200, 70))
    points = host_cpu.by_point(cpu, step)
    ok(len(points) == 2, "two groups, the garbage line skipped")
    first, second = points[0], points[1]
    ok(first[0].startswith("gknn-graph graph_ef_search=16"), "the first group is named by the point that ended it "
       "(the progress bar's carriage return not taken for a line end)")
    ok(abs(first[1]["busy"] - 0.5) < 1e-9 and abs(first[1]["system"] - 0.25) < 1e-9, "busy and system shares")
    ok(abs(first[1]["switches"] - 1000) < 1e-6, "context switches a second")
    ok(first[1]["samples"] == 2 and abs(first[1]["runnable"] - 21) < 1e-9, "runnable tasks: the mean of the samples")
    ok(second[0].startswith("pgvector-hnsw ef_search=24"), "the second group is the next point's")
    ok(abs(second[1]["busy"] - 1.0) < 1e-9 and second[1]["system"] == 0, "a fully busy group, no system time")

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
