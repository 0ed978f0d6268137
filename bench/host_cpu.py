#!/usr/bin/env python3
"""Host CPU by benchmark point, from the /proc/stat sampler bench/gpu-host-bench.sh runs
beside every step (OUT/STEP.cpu.log beside OUT/STEP.log):
    bench/host_cpu.py OUT/STEP.cpu.log OUT/STEP.log
Each sample carries the step log's line count, so samples group by the log lines written so
far. bench/run_experiment.py logs "bench: LABEL, N clients: start" before each point and the
load generator's result line ends it, so a group is either a point (named by its result line)
or what ran before one (an index build, the plan: named "before LABEL N"). Prints, per group,
the CPU busy share (user, system), context switches per second and the mean runnable tasks
(procs_running). by_point() gives the same to other scripts (service_ab_table.py).
"""
import collections
import re
import sys

START = re.compile(r"^bench: (.*), (\d+) clients: start$")


def samples(path):
    for line in open(path, errors="replace"):
        p = line.split()
        try:
            # user nice system idle iowait irq softirq steal (guest time is within user and nice)
            cpu = list(map(int, p[3:11]))
            yield (float(p[0]), int(p[1]), cpu, int(p[p.index("ctxt") + 1]), int(p[p.index("procs_running") + 1]))
        except (ValueError, IndexError):
            continue


def point_key(line):
    """(label, clients) of a load generator's result line, or None."""
    t = line.split()
    if len(t) < 9:
        return None
    try:
        clients = int(t[-8])
        [float(x) for x in t[-7:] if x != "-"]  # a run without recall prints "-"
    except ValueError:
        return None
    return " ".join(t[:-8]), clients


def group_name(lines):
    """The group's point: the first result line or point start among the lines after it."""
    for line in lines:
        m = START.match(line)
        if m:
            return "before " + m.group(1) + " " + m.group(2), None
        key = point_key(line)
        if key and not line.startswith(("label", "bench:")):
            return line, key
    return "", None


def by_point(cpu_log, step_log):
    """[(name, (label, clients) or None, {busy, user, system, switches, runnable, samples})]: a
    point's group has its key, a group before a point (or after the last) None."""
    # As wc -l counts: progress bars hold \r, which text mode would take for line ends.
    lines = open(step_log, newline="", errors="replace").read().split("\n")
    rows = list(samples(cpu_log))
    groups = collections.OrderedDict()
    for a, b in zip(rows, rows[1:]):
        total = sum(b[2]) - sum(a[2])
        # A pair across two groups (a point ended between them), or out of order, counts for neither.
        if total <= 0 or b[0] <= a[0] or b[1] != a[1]:
            continue
        idle = (b[2][3] + b[2][4]) - (a[2][3] + a[2][4])
        groups.setdefault(b[1], []).append((1 - idle / total, (b[2][0] - a[2][0]) / total,
                                            (b[2][2] - a[2][2]) / total, (b[3] - a[3]) / (b[0] - a[0]), b[4]))
    out = []
    for n, v in groups.items():
        name, key = group_name(lines[n:])
        mean = [sum(x[i] for x in v) / len(v) for i in range(5)]
        out.append((name, key, dict(zip(("busy", "user", "system", "switches", "runnable"), mean), samples=len(v))))
    return out


def main(cpu_log, step_log):
    print("| group | samples | busy | user | system | context switches/s | runnable |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, _, s in by_point(cpu_log, step_log):
        print("| %s | %d | %.0f%% | %.0f%% | %.0f%% | %.0f | %.1f |" % (" ".join(name.split()[:5]), s["samples"],
              100 * s["busy"], 100 * s["user"], 100 * s["system"], s["switches"], s["runnable"]))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:3])
