"""Results of one experiment run: the JSON document, a Markdown table and
the plots (bench/plot.py). Used by run_experiment.py; `report.py RESULT.json`
rewrites the .md and .png of a saved result."""
import array
import json
import os
import re
import struct
import sys


def read_fvecs(path, rows):
    """The first ROWS vectors of an fvecs file, as lists of floats."""
    out = []
    with open(path, "rb") as f:
        for _ in range(rows):
            head = f.read(4)
            if len(head) < 4:
                break
            dim, = struct.unpack("<i", head)
            a = array.array("f")
            a.fromfile(f, dim)
            out.append(a.tolist())
    return out


def device_label(gpus, device_setting):
    """'cpu' when gknn runs on the CPU, else the first GPU's short name
    ('NVIDIA H200' -> 'H200')."""
    if not gpus or device_setting == "cpu":
        return "cpu"
    name = gpus.split(",")[0].strip()
    return re.sub(r"^NVIDIA\s+", "", name)


def slug(text):
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "unknown"


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def alone_text(a):
    """A run's `alone` timings (run_experiment.alone) for the table."""
    if not a:
        return "-"
    return " / ".join(fmt(a.get(key), 3) for key in ("execution_ms", "queue_wait_ms", "service_ms"))


def round_trip_ms(run):
    """A closed-loop point's mean round trip (each client has one query in flight): clients / QPS, or None."""
    return 1000.0 * run["clients"] / run["qps"] if run.get("qps") else None


def load_text(run):
    """A run's service means under load (run_experiment.service_delta) for the table: the closed-loop round
    trip, each search's queue wait and time in the service, the executors' time per batch. '-' for an engine
    without the service; results written before the service counted waits show '-' for those."""
    s = run.get("service")
    if not s:
        return "-"
    return " / ".join(fmt(x, 3) for x in (round_trip_ms(run), s.get("wait_ms_per_search"),
                                          s.get("held_ms_per_search"), s.get("busy_ms_per_batch")))


def settings_text(run, engine_doc):
    sweep = engine_doc.get("sweep_names", [])
    shown = {n: v for n, v in run.get("settings", {}).items() if not sweep or n in sweep}
    return ", ".join(f"{n}={v}" for n, v in shown.items()) or "-"


# The recall floors the targets are set at (issues 14 and 15); an experiment
# file's "recall_floors" replaces them.
RECALL_FLOORS = (0.99, 0.995)


def side(engine_name):
    """Which side of the comparison an engine is on, by the experiment files'
    naming: "gknn" (gknn-*), "pgvector" (pgvector-*), or None for a baseline
    such as postgres-exact (PostgreSQL's own plan, run in gknn's database)."""
    for prefix in ("gknn", "pgvector"):
        if engine_name.startswith(prefix + "-"):
            return prefix
    return None


def best_at_recall(doc, family, floor, clients):
    """The run with the most QPS at `clients` among the engines of `family`
    ("gknn" or "pgvector") whose recall reaches `floor` without errors; None
    when none does. A comparison at a recall takes each side's best setting
    there, not the settings a sweep happened to list."""
    best = None
    for e in doc["engines"]:
        if e.get("skipped") or side(e["engine"]) != family:
            continue
        for r in e.get("runs", []):
            recall = (r.get("recall") or {}).get("mean")
            if (r.get("clients") != clients or recall is None or recall < floor or not r.get("qps")
                    or r.get("errors")):
                continue
            if best is None or r["qps"] > best["qps"]:
                best = dict(r, engine=e["engine"], sweep_names=e.get("sweep_names", []))
    return best


def at_recall_lines(doc):
    """A table of each side's best QPS at each recall floor and client count,
    and gknn's over pgvector's; none where no engine reaches a floor."""
    floors = doc.get("experiment_file", {}).get("recall_floors") or RECALL_FLOORS
    clients = sorted({r["clients"] for e in doc["engines"] for r in e.get("runs", []) if "clients" in r})
    k = doc["k"]

    def cell(r):
        if r is None:
            return "none reaches it"
        return (f"{r['engine']} {settings_text(r, r)}: {fmt(r['qps'])} "
                f"({fmt(r['recall']['mean'], 4)})")

    rows = []
    for floor in floors:
        for c in clients:
            g, p = best_at_recall(doc, "gknn", floor, c), best_at_recall(doc, "pgvector", floor, c)
            if g is None and p is None:
                continue
            ratio = f"{g['qps'] / p['qps']:.2f}x" if g and p else "-"
            rows.append(f"| {floor} | {c} | {cell(g)} | {cell(p)} | {ratio} |")
    if not rows:
        return []
    return ["", f"At a recall: each side's most QPS among its settings whose recall@{k} reaches the floor, "
                "without errors (the comparison the targets make; postgres-exact, a baseline, on neither side)", "",
            f"| recall@{k} >= | clients | gknn's best | pgvector's best | gknn / pgvector |",
            "| ---: | ---: | --- | --- | ---: |"] + rows


def markdown(doc):
    env, ds = doc["environment"], doc["dataset"]
    gt = ds.get("ground_truth", {})
    k = doc["k"]
    if gt.get("cpu_checked_queries"):
        gt_check = (f"GPU result checked against the CPU reference on {gt['cpu_checked_queries']} queries, "
                    f"{gt.get('cpu_mismatches', 0)} differ")
    else:
        gt_check = "computed by the CPU reference itself"
    lines = [f"# {doc['experiment']} on {env['device']}, {doc['date']}", "",
             doc.get("description", ""), "",
             f"- dataset: {ds['name']}, {ds['base_rows']:,} x {ds['dim']}, metric {ds['metric']}; "
             f"{doc['queries']:,} query vectors; source: {ds.get('source', '')}",
             f"- ground truth: exact top {gt.get('k')} of {gt.get('queries')} queries by {gt.get('device')} "
             f"in {fmt(gt.get('seconds'))} s; {gt_check}",
             f"- server: {env['server']}",
             f"- gknn {env['gknn'].get('version', '-')}, gknn.device = {env['gknn'].get('device_setting', '-')}, "
             f"GPUs: {env['gknn'].get('gpus') or 'none'}; host CPU: {env['cpu']}; load average (1/5/15 min) "
             f"{' '.join(env.get('loadavg_start', ['-']))} at the start, {' '.join(env.get('loadavg_end', ['-']))} "
             "at the end (other work on the host slows every engine alike)",
             f"- each point: {doc['duration_s']} s after {doc['warmup_s']} s warm-up per client, "
             "query vectors cycled; latency is client-side (libpq round trip)", "",
             "- alone: one query after the load, EXPLAIN ANALYZE's Execution Time, and for a search through "
             "gknn's GPU service its Queue Wait and Service Time (medians of 5 queries, ms)",
             "- load: for a search through gknn's GPU service, means over the point from the service's counters "
             "(warm-up included): the round trip (clients / QPS), each search's wait from submission to its "
             "batch's start on an executor, its time from submission to answer (the rest of the round trip is "
             "the backend, libpq, the client and wake-ups), the executors' time per batch (ms); a gpu_graph "
             "search the resident kernel's ring answered waits in no queue, its time runs from the request "
             "written to the answer read, and it rides in no batch", "",
             f"| engine | settings | clients | QPS | p50 ms | p95 ms | p99 ms | recall@{k} | errors | plan | alone: "
             "execution / queue / service ms | load: round trip / queue wait / in service / executor per batch ms |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    skipped = []
    for e in doc["engines"]:
        if e.get("skipped"):
            skipped.append(f"- {e['engine']}: skipped, {e['skipped']}")
            continue
        for r in e["runs"]:
            lat = r.get("latency_ms", {})
            recall = r.get("recall") or {}
            lines.append(f"| {e['engine']} | {settings_text(r, e)} | {r['clients']} | {fmt(r.get('qps'))} | "
                         f"{fmt(lat.get('p50'), 2)} | {fmt(lat.get('p95'), 2)} | {fmt(lat.get('p99'), 2)} | "
                         f"{fmt(recall.get('mean'), 4)} | {r.get('errors', 0)} | {r.get('plan') or '-'} | "
                         f"{alone_text(r.get('alone'))} | {load_text(r)} |")
        if e.get("index"):
            skipped.append(f"- {e['engine']}: index `{e['index']['ddl']}` built in {e['index']['build_s']} s, "
                           f"{e['index']['size']}")
        if e.get("setup"):
            skipped.append(f"- {e['engine']}: setup ({'; '.join(e['setup']['sql'])}) in {e['setup']['s']} s")
    lines += [""] + skipped
    lines += at_recall_lines(doc)
    tc = doc.get("timing_check")
    if tc:
        rounds = "; ".join(f"{fmt(r['loadgen_p50_ms'], 2)} / {fmt(r['psql_p50_ms'], 2)}" for r in tc["rounds"])
        lines += ["", f"Latency check against psql's \\timing: the same {tc['samples']} queries, 1 client, no "
                      f"parallel workers, {len(tc['rounds'])} alternating rounds. Fastest round's p50: gknn-loadgen "
                      f"{fmt(tc['loadgen_best_p50_ms'], 2)} ms, psql {fmt(tc['psql_best_p50_ms'], 2)} ms "
                      f"(ratio {fmt(tc['best_ratio'], 2)}); median of the per-round ratios {fmt(tc['median_ratio'], 2)}; "
                      f"per round loadgen / psql p50 ms: {rounds}. psql sends the vector as text, loadgen in binary."]
    lines += ["", f"Plot: `{os.path.basename(doc.get('plot') or '-')}`. Reproduce (bench/README.md): "
                  f"`{doc.get('command', 'bench/run-experiment.sh')}`"]
    return "\n".join(lines) + "\n"


def write(doc, base, plot=True):
    for e in doc["engines"]:
        spec = next((x for x in doc["experiment_file"]["engines"] if x["name"] == e["engine"]), {})
        e["sweep_names"] = list(spec.get("sweep", {}))
    doc["plot"] = None
    if plot:
        try:
            import plot as plotter  # bench/plot.py, needs matplotlib
            plotter.plot(doc, base + ".png")
            doc["plot"] = base + ".png"
        except ImportError as e:
            print(f"report: no plot ({e}); apt-get install python3-matplotlib", file=sys.stderr)
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(doc))


if __name__ == "__main__":
    path = sys.argv[1]
    with open(path) as f:
        saved = json.load(f)
    write(saved, path[:-len(".json")])
