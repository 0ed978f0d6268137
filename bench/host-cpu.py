#!/usr/bin/env python3
"""Host CPU by benchmark point, from the /proc/stat sampler bench/gpu-host-bench.sh runs
beside every step (OUT/STEP.cpu.log beside OUT/STEP.log):
    bench/host-cpu.py OUT/STEP.cpu.log OUT/STEP.log
Each sample carries the step log's line count, so samples group by the point that was running
(a point's result lines are written when it ends). Prints, per group, the point that ended it,
the CPU busy share (user, system), context switches per second and the mean runnable tasks
(procs_running).
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


def main(cpu_log, step_log):
    lines = open(step_log, newline="").read().split("\n")  # as wc -l counts (progress bars hold \r)
    rows = list(samples(cpu_log))
    groups = collections.OrderedDict()
    for a, b in zip(rows, rows[1:]):
        total = sum(b[2]) - sum(a[2])
        if total <= 0:
            continue
        idle = (b[2][3] + b[2][4]) - (a[2][3] + a[2][4])
        g = groups.setdefault(b[1], [])
        g.append((1 - idle / total, (b[2][0] - a[2][0]) / total, (b[2][2] - a[2][2]) / total,
                  (b[3] - a[3]) / (b[0] - a[0]), b[4]))
    print("| point (the next result line) | samples | busy | user | system | context switches/s | runnable |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, v in groups.items():
        nxt = next((l for l in lines[n:] if l and not l.startswith(("label", "bench:", "[", "#"))), "")
        k = len(v)
        mean = lambda i: sum(x[i] for x in v) / k
        print("| %s | %d | %.0f%% | %.0f%% | %.0f%% | %.0f | %.1f |" % (" ".join(nxt.split()[:5]), k, 100 * mean(0),
              100 * mean(1), 100 * mean(2), mean(3), mean(4)))


if __name__ == "__main__":
    main(*sys.argv[1:3])
