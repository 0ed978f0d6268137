#!/usr/bin/env python3
"""Host CPU by benchmark point, from the /proc/stat sampler bench/gpu-host-bench.sh runs
beside every step (OUT/STEP.cpu.log beside OUT/STEP.log):
    bench/host_cpu.py OUT/STEP.cpu.log OUT/STEP.log
Each sample carries the step log's line count, so samples group by the point that was running
(a point's result lines are written when it ends). Prints, per group, the point that ended it,
the CPU busy share (user, system), context switches per second and the mean runnable tasks
(procs_running). by_point() gives the same to other scripts (service_ab_table.py).
"""
import collections
import sys


def samples(path):
    for line in open(path):
        p = line.split()
        try:
            cpu = list(map(int, p[3:13]))
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
        [float(x) for x in t[-7:]]
    except ValueError:
        return None
    return " ".join(t[:-8]), clients


def by_point(cpu_log, step_log):
    """[(the result line that ended the group, {busy, user, system, switches, runnable, samples})]."""
    # As wc -l counts: progress bars hold \r, which text mode would take for line ends.
    lines = open(step_log, newline="").read().split("\n")
    rows = list(samples(cpu_log))
    groups = collections.OrderedDict()
    for a, b in zip(rows, rows[1:]):
        total = sum(b[2]) - sum(a[2])
        if total <= 0:
            continue
        idle = (b[2][3] + b[2][4]) - (a[2][3] + a[2][4])
        groups.setdefault(b[1], []).append((1 - idle / total, (b[2][0] - a[2][0]) / total,
                                            (b[2][2] - a[2][2]) / total, (b[3] - a[3]) / (b[0] - a[0]), b[4]))
    out = []
    for n, v in groups.items():
        nxt = next((l for l in lines[n:] if l and not l.startswith(("label", "bench:", "[", "#"))), "")
        mean = [sum(x[i] for x in v) / len(v) for i in range(5)]
        out.append((nxt, dict(zip(("busy", "user", "system", "switches", "runnable"), mean), samples=len(v))))
    return out


def main(cpu_log, step_log):
    print("| point (the next result line) | samples | busy | user | system | context switches/s | runnable |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for line, s in by_point(cpu_log, step_log):
        print("| %s | %d | %.0f%% | %.0f%% | %.0f%% | %.0f | %.1f |" % (" ".join(line.split()[:5]), s["samples"],
              100 * s["busy"], 100 * s["user"], 100 * s["system"], s["switches"], s["runnable"]))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:3])
