#!/usr/bin/env python3
"""One side-by-side table of fashion-mnist-service-ab runs (bench/service-ab.sh).

    service_ab_table.py SETTING... -- LABEL=RESULT.json...

LABEL is A<n> (the server as packed) or B<n> (started with SETTING...). Per
cell: QPS (client p50 ms; the service's mean batch, executor ms per batch,
a search's queue wait ms; the host's CPU busy and system shares while the
point ran, where the run's directory holds gpu-host-bench.sh's CPU samples),
then B's mean QPS over A's.
"""
import json
import os
import sys

from host_cpu import by_point

STEP = "fashion-mnist-service-ab"


def cpu_by_point(result_path):
    """{(label, clients): the host's CPU while that point ran} from the run's directory, or {}."""
    d = os.path.dirname(result_path)
    cpu_log, step_log = os.path.join(d, STEP + ".cpu.log"), os.path.join(d, STEP + ".log")
    if not (os.path.exists(cpu_log) and os.path.exists(step_log)):
        return {}
    try:
        return {key: s for _, key, s in by_point(cpu_log, step_log) if key}
    except (OSError, ValueError) as e:  # the table goes without the CPU columns
        print(f"service_ab_table: {cpu_log}: {e}", file=sys.stderr)
        return {}


def cells(path):
    with open(path) as f:
        doc = json.load(f)
    host = cpu_by_point(path)
    out = {}
    for engine in doc["engines"]:
        for run in engine["runs"]:
            svc = run.get("service") or {}
            cpu = host.get((run["label"], run["clients"]))
            out[(run["label"], run["clients"])] = (run["qps"], run["latency_ms"]["p50"], svc.get("mean_batch"),
                                                   svc.get("busy_ms_per_batch"), svc.get("wait_ms_per_search"), cpu)
    return doc, out


def show(cell):
    if cell is None:
        return "-"
    qps, p50, batch, busy, wait, cpu = cell
    extra = f"; {batch:.2f}, {busy:.3f}" if batch is not None and busy is not None else ""
    extra += f", {wait:.3f}" if extra and wait is not None else ""
    extra += f"; CPU {100 * cpu['busy']:.0f} %, {100 * cpu['system']:.0f} % sys" if cpu else ""
    return f"{qps:,.0f} ({p50:.2f}{extra})"


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    settings, runs = argv[:cut], [a.split("=", 1) for a in argv[cut + 1:]]
    loaded = [(label, *cells(path)) for label, path in runs]
    first = loaded[0][1]
    env = first.get("environment", {})
    print(f"# GPU service A/B: {' '.join(settings)} ({env.get('device', '?')}, {first.get('date', '?')})\n")
    order = " ".join(label[0] for label, _ in runs)
    print(f"fashion-mnist-service-ab run {order} on one host: A the server as packed, B started with "
          f"`{' '.join(settings)}` (a name with a dot a server setting, else in its environment; bench/service-ab.sh). gknn "
          f"{env.get('gknn', {}).get('version', '?')}, {env.get('cpu', '?')}. Per cell: QPS (client p50 ms; "
          "the service's mean batch, executor ms per batch, a search's queue wait ms; the host's CPU busy "
          "and system shares while the point ran, bench/host_cpu.py).\n")
    labels = [label for label, _, _ in loaded]
    print("| engine | clients | " + " | ".join(labels) + " | B / A |")
    print("|---|---:|" + "---:|" * (len(labels) + 1))
    for key in loaded[0][2]:
        row = [c.get(key) for _, _, c in loaded]
        a = [r[0] for (label, _, _), r in zip(loaded, row) if r and label.startswith("A")]
        b = [r[0] for (label, _, _), r in zip(loaded, row) if r and label.startswith("B")]
        ratio = f"{(sum(b) / len(b)) / (sum(a) / len(a)):.3f}" if a and b else "-"
        print(f"| {key[0]} | {key[1]} | " + " | ".join(show(r) for r in row) + f" | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1:])
