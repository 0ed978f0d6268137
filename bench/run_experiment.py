#!/usr/bin/env python3
"""Run one benchmark experiment against a running PostgreSQL server (the one
libpq's PGHOST/PGPORT/PGUSER name) and write its results.

  run_experiment.py EXPERIMENT.json [--queries N] [--duration S] [--clients 1,2,4]
                    [--device-label NAME] [--date YYYY-MM-DD] [--out bench/results]

bench/run-experiment.sh is the one command (packages, build, throwaway
cluster, then this). The experiment file format is described in
bench/experiments/README.md. For every engine of the experiment whose
requirements the server meets (an extension, an access method), and every
combination of its GUC sweep and client counts, gknn-loadgen runs the kNN
query for a fixed time; engines the server cannot run are reported as skipped
with the reason. Results: OUT/<experiment>-<device>-<date>.json, .md and .png.
"""
import argparse
import datetime
import itertools
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (bench/report.py)

OPERATORS = {"l2": ("<->", "vector_l2_ops"), "cosine": ("<=>", "vector_cosine_ops"),
             "ip": ("<#>", "vector_ip_ops"), "l1": ("<+>", "vector_l1_ops")}
DATABASES = {"gknn": "bench_gknn", "vector": "bench_pgvector"}


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Server:
    """psql against one database of the server named by the environment."""

    def __init__(self, psql):
        self.psql = psql

    def sql(self, db, statement, check=True):
        """STATEMENT: one string, or a list run one by one (each -c is its
        own transaction, as VACUUM and CREATE DATABASE need)."""
        statements = [statement] if isinstance(statement, str) else statement
        r = subprocess.run([self.psql, "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", db]
                           + [a for st in statements for a in ("-c", st)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"{db}: {statement}: {r.stderr.strip()}")
        return r.stdout.strip() if r.returncode == 0 else None

    def available(self, extension):
        return self.sql("postgres", f"SELECT 1 FROM pg_available_extensions WHERE name = '{extension}'") == "1"

    def ensure_database(self, db, extension):
        if self.sql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{db}'") != "1":
            self.sql("postgres", f'CREATE DATABASE "{db}"')
        self.sql(db, f'SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS "{extension}"')


def prepare_dataset(exp, args):
    cmd = [sys.executable, os.path.join(args.bench_dir, "datasets", "prepare.py"), exp["dataset"],
           "--data-dir", args.data_dir, "--tools", args.tools, "--queries", str(args.queries),
           "--gt-device", args.gt_device]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    with open(os.path.join(out, "meta.json")) as f:
        return out, json.load(f)


def load_table(server, db, table, data, meta, tools):
    """The base vectors as TABLE (id int, emb vector(dim)), loaded once: a
    table whose comment names the same data is reused."""
    stamp = f"gknn-bench {meta['name']} {meta['base_rows']}x{meta['dim']}"
    if server.sql(db, f"SELECT obj_description(to_regclass('{table}'), 'pg_class')") == stamp:
        log(f"{db}.{table}: already loaded")
        return
    server.sql(db, [f"DROP TABLE IF EXISTS {table}",
                    f"CREATE TABLE {table} (id int NOT NULL, emb vector({meta['dim']}) NOT NULL)"])
    log(f"{db}.{table}: loading {meta['base_rows']} x {meta['dim']} by binary COPY")
    start = time.monotonic()
    subprocess.run([os.path.join(tools, "gknn-load"), "--base", os.path.join(data, "base.fvecs"),
                    "--table", table, "--conninfo", f"dbname={db}"], check=True)
    seconds = time.monotonic() - start
    server.sql(db, [f"ALTER TABLE {table} ADD PRIMARY KEY (id)", f"VACUUM ANALYZE {table}",
                    f"COMMENT ON TABLE {table} IS '{stamp}'"])
    log(f"{db}.{table}: loaded in {seconds:.1f} s")


def missing_requirement(server, engine):
    """Why the server cannot run ENGINE, or None."""
    ext = engine.get("extension", "gknn")
    if not server.available(ext):
        return f"extension {ext} is not installed on the server"
    req = engine.get("requires", {})
    db = DATABASES[ext]
    if "access_method" in req:
        server.ensure_database(db, ext)
        if server.sql(db, f"SELECT 1 FROM pg_am WHERE amname = '{req['access_method']}'") != "1":
            return f"access method {req['access_method']} does not exist (not built yet)"
    if "setting" in req:
        server.ensure_database(db, ext)
        if server.sql(db, [f"LOAD '{ext}'", f"SELECT 1 FROM pg_settings WHERE name = '{req['setting']}'"],
                      check=False) != "1":
            return f"setting {req['setting']} does not exist"
    return None


def known_settings(server, db, ext, names):
    """Those of NAMES the server knows once the extension is loaded."""
    if not names:
        return set()
    listed = ", ".join(f"'{n}'" for n in names)
    out = server.sql(db, [f"LOAD '{ext}'", f"SELECT name FROM pg_settings WHERE name IN ({listed})"], check=False)
    return set((out or "").split())


def sweep_points(engine, optional=()):
    """Every combination of the engine's GUC sweep, as lists of (name, value),
    after its fixed settings and those optional ones the server knows."""
    sweep = engine.get("sweep", {})
    names = list(sweep)
    fixed = list(engine.get("settings", {}).items())
    fixed += [(n, str(v)) for n, v in engine.get("settings_if_known", {}).items() if n in optional]
    for values in itertools.product(*(sweep[n] for n in names)):
        yield fixed + list(zip(names, (sweep_value(v) for v in values)))


def sweep_value(v):
    """A sweep value as the GUC's text; "cores" is this host's CPU count (the
    runner and the server share the host), e.g. for PostgreSQL's parallel
    workers."""
    return str(os.cpu_count()) if v == "cores" else str(v)


def loadgen(args, db, sql_parts, data, settings, clients, label, extra=()):
    table, op, k = sql_parts
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [os.path.join(args.tools, "gknn-loadgen"), "--dbname", db, "--table", table, "--op", op,
               "--k", str(k), "--queries", os.path.join(data, "query.fvecs"), "--gt", os.path.join(data, "gt.ivecs"),
               "--gt-dist", os.path.join(data, "gt-dist.fvecs"), "--query-limit", str(args.queries),
               "--clients", str(clients), "--label", label, "--json", out.name, *extra]
        for name, value in settings:
            cmd += ["--set", f"{name}={value}"]
        if "--count" not in extra:
            cmd += ["--duration", str(args.duration)]
        cmd += ["--warmup", str(args.warmup)]
        r = subprocess.run(cmd, text=True, capture_output=True)
        sys.stderr.write(r.stdout + r.stderr)
        with open(out.name) as f:
            text = f.read()
        return json.loads(text) if text.strip() else {"errors": 1, "first_error": r.stderr.strip()}


def plan_of(server, db, table, op, k, settings, vector):
    """The plan a run point gets, as its node names top-down (EXPLAIN of the
    prepared statement with the first query vector)."""
    script = [f"SET {name} = '{value}';" for name, value in settings]
    script += [f"PREPARE knn(vector) AS SELECT id FROM {table} ORDER BY emb {op} $1 LIMIT {k};",
               f"EXPLAIN (COSTS OFF) EXECUTE knn('[{','.join(repr(x) for x in vector)}]');"]
    r = subprocess.run([server.psql, "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", db], input="\n".join(script),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    nodes = []
    for line in r.stdout.splitlines():
        text = line.strip()
        if text.startswith("->"):
            text = text[2:].strip()
        elif nodes:
            continue  # a detail line (Sort Key, Workers Planned, ...)
        nodes.append(text.split("  ")[0].split(" on ")[0].split(" using ")[0])
    return " > ".join(nodes)


def alone(server, db, table, op, k, settings, vectors):
    """Where one query's time goes when it runs alone, after the load (images
    warm): EXPLAIN ANALYZE of the query with each vector as a constant, twice,
    the second pass's medians of Execution Time and, for an index scan through
    gknn's GPU service, its Queue Wait and Service Time (EXPLAIN's lines; not
    of EXPLAIN EXECUTE, which PostgreSQL 15 gives extensions no hook for)."""
    script = [f"SET {name} = '{value}';" for name, value in settings]
    for _ in range(2):
        script += [f"EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM {table} ORDER BY emb {op} "
                   f"'[{','.join(repr(x) for x in v)}]' LIMIT {k};" for v in vectors]
    r = subprocess.run([server.psql, "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", db], input="\n".join(script),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    found = {"execution_ms": [], "queue_wait_ms": [], "service_ms": []}
    patterns = {"execution_ms": r"Execution Time: ([0-9.]+) ms", "queue_wait_ms": r"Queue Wait: ([0-9.]+) ms",
                "service_ms": r"Service Time: ([0-9.]+) ms"}
    for line in r.stdout.splitlines():
        for key, pattern in patterns.items():
            m = re.search(pattern, line)
            if m:
                found[key].append(float(m.group(1)))
    # The second pass: each list holds one value per EXPLAIN that printed it.
    return {"queries": len(vectors), **{key: median(v[len(v) // 2:]) for key, v in found.items()}}


def run_engine(server, args, exp, engine, data, meta):
    ext = engine.get("extension", "gknn")
    db, table = DATABASES[ext], exp["table"]
    op, opclass = OPERATORS[meta["metric"]]
    result = {"engine": engine["name"], "extension": ext, "description": engine.get("description", ""),
              "index": None, "runs": []}
    first_queries = report.read_fvecs(os.path.join(data, "query.fvecs"), 5)
    first_query = first_queries[0]
    try:
        # An engine's own preparation (SQL run one statement at a time, as
        # each may need to be outside a transaction: ALTER SYSTEM), its time
        # reported; inside the try, so that its teardown runs whatever fails.
        if engine.get("setup"):
            start = time.monotonic()
            server.sql(db, [st.format(table=table) for st in engine["setup"]])
            result["setup"] = {"sql": engine["setup"], "s": round(time.monotonic() - start, 3)}
            log(f"{engine['name']}: setup in {result['setup']['s']} s")
        if engine.get("index"):
            ddl = engine["index"].format(table=table, opclass=opclass, rows=meta["base_rows"], name="bench_idx")
            log(f"{engine['name']}: {ddl}")
            start = time.monotonic()
            server.sql(db, ["DROP INDEX IF EXISTS bench_idx", ddl])
            result["index"] = {"ddl": ddl, "build_s": round(time.monotonic() - start, 3),
                               "size": server.sql(db, "SELECT pg_size_pretty(pg_relation_size('bench_idx'))")}
        optional = known_settings(server, db, ext, list(engine.get("settings_if_known", {})))
        for settings in sweep_points(engine, optional):
            plan = plan_of(server, db, table, op, exp["k"], settings, first_query)
            for clients in engine.get("clients", args.clients):
                label = engine["name"] + "".join(f" {n.split('.')[-1]}={v}" for n, v in settings
                                                 if n in engine.get("sweep", {}))
                before = service_counters(server, db) if ext == "gknn" else None
                # Marks where the point starts in the log (bench/host_cpu.py: the
                # host's CPU by point, the index build and the plan apart).
                log(f"{label}, {clients} clients: start")
                run = loadgen(args, db, (table, op, exp["k"]), data, settings, clients, label)
                run.update(engine=engine["name"], settings=dict(settings), clients=clients, plan=plan)
                service = service_delta(before, service_counters(server, db) if before else None)
                if service:
                    # What the service did not hold of a round trip is the
                    # backend's, libpq's, the client's and wake-ups.
                    if run.get("qps"):
                        service["round_trip_ms"] = report.round_trip_ms(run)
                        if "held_ms_per_search" in service:
                            service["rest_ms"] = service["round_trip_ms"] - service["held_ms_per_search"]
                    run["service"] = service
                    log(f"{label}, {clients} clients: the service ran {service['searches']} searches, "
                        f"{service.get('ring_searches', 0)} through the resident kernel's ring and the rest in "
                        f"{service['batches']} batches (mean {report.fmt(service['mean_batch'])}), its executors "
                        f"busy {report.fmt(service['busy_ms_per_batch'], 3)} ms per batch; per search "
                        f"{report.fmt(service.get('wait_ms_per_search'), 3)} ms queued, "
                        f"{report.fmt(service.get('held_ms_per_search'), 3)} ms "
                        f"in the service (warm-up included); round trip "
                        f"{report.fmt(service.get('round_trip_ms'), 3)} ms, of which "
                        f"{report.fmt(service.get('rest_ms'), 3)} ms outside the service")
                result["runs"].append(run)
            one = alone(server, db, table, op, exp["k"], settings, first_queries)
            for run in result["runs"]:
                if run["settings"] == dict(settings):
                    run["alone"] = one
    finally:
        if engine.get("index"):
            server.sql(db, "DROP INDEX IF EXISTS bench_idx")
        if engine.get("teardown"):
            server.sql(db, [st.format(table=table) for st in engine["teardown"]])
    return result


def service_counters(server, db):
    """gknn's service counters (index searches, their batches, the searches answered by batches, executor busy ms,
    those searches' queue wait and time in the service, summed ms, the graph searches the resident kernel's ring
    answered and their summed ms), or None without a ready service. A database whose gknn predates the wait or
    the ring columns gives those as None."""
    status = "FROM gknn_service_status() WHERE state = 'ready'"
    first = "searches, batches, round(mean_batch * batches), busy_ms"
    out = None
    for rest in ("queue_wait_ms, search_ms, ring_searches, ring_ms", "queue_wait_ms, search_ms, NULL, NULL",
                 "NULL, NULL, NULL, NULL"):
        out = server.sql(db, f"SELECT {first}, {rest} {status}", check=False)
        if out:
            break
    if not out:
        return None
    searches, batches, batched, busy_ms, wait_ms, held_ms, ring_n, ring_ms = out.split("|")
    return (int(searches), int(batches), int(float(batched)), float(busy_ms),
            float(wait_ms) if wait_ms else None, float(held_ms) if held_ms else None,
            int(ring_n) if ring_n else None, float(ring_ms) if ring_ms else None)


def service_delta(before, after):
    """What the service did for one run point (where a point's time went: batch sizes, GPU calls' time, per search
    the wait for an executor and the time from submission to answer, over the searches batches answered and those
    the resident kernel's ring answered, which wait in no queue and whose time runs from the request written to
    the answer read; a search answered without either, the image not yet loaded, counts in searches only)."""
    if not before or not after or after[0] <= before[0]:
        return None
    searches, batches, batched = (a - b for a, b in zip(after[:3], before[:3]))
    known = lambda i: before[i] is not None and after[i] is not None  # noqa: E731
    ring = after[6] - before[6] if known(6) and known(7) else 0
    if batches <= 0 and ring <= 0:
        return None
    busy = after[3] - before[3]
    out = {"searches": searches, "batches": batches, "mean_batch": batched / batches if batches > 0 else None,
           "busy_ms": busy, "busy_ms_per_batch": busy / batches if batches > 0 else None}
    ring_ms = after[7] - before[7] if ring > 0 else 0.0
    if ring > 0:
        out["ring_searches"] = ring
        out["ring_ms_per_search"] = ring_ms / ring
    answered = max(batched, 0) + ring
    if answered > 0 and known(4) and known(5):
        out["wait_ms_per_search"] = (after[4] - before[4]) / answered
        out["held_ms_per_search"] = (after[5] - before[5] + ring_ms) / answered
    return out


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None


def psql_timings(server, db, table, op, k, vectors):
    """psql's \\timing of EXECUTE for each vector, second of two passes."""
    script = ["SET max_parallel_workers_per_gather = 0;",
              f"PREPARE knn(vector) AS SELECT id FROM {table} ORDER BY emb {op} $1 LIMIT {k};", "\\timing on"]
    script += [f"EXECUTE knn('[{','.join(repr(x) for x in v)}]');" for v in vectors] * 2
    r = subprocess.run([server.psql, "-X", "-q", "-d", db, "-o", "/dev/null"], input="\n".join(script),
                       capture_output=True, text=True, check=True)
    times = [float(line.split()[1]) for line in (r.stdout + r.stderr).splitlines() if line.startswith("Time: ")]
    return times[-len(vectors):]


def timing_check(server, args, exp, data, meta, samples=15, rounds=6):
    """Loadgen's latency next to psql's \\timing for the same queries: one
    client, the same prepared statement (psql sends the vector as text,
    loadgen in binary), both warmed up (loadgen for the warm-up time, psql by
    a first pass over the sample), in short alternating rounds so that a busy
    machine disturbs both alike. The fastest round of each (the least
    disturbed) and the median of the per-round ratios are reported."""
    db, table = DATABASES["gknn"], exp["table"]
    op, _ = OPERATORS[meta["metric"]]
    vectors = report.read_fvecs(os.path.join(data, "query.fvecs"), samples)
    per_round = []
    for _ in range(rounds):
        run = loadgen(args, db, (table, op, exp["k"]), data, [("max_parallel_workers_per_gather", "0")], 1,
                      "timing-check", extra=("--count", str(samples), "--query-limit", str(samples)))
        times = psql_timings(server, db, table, op, exp["k"], vectors)
        per_round.append({"loadgen_p50_ms": run["latency_ms"]["p50"], "loadgen_mean_ms": run["latency_ms"]["mean"],
                          "psql_p50_ms": median(times), "psql_mean_ms": sum(times) / len(times)})
    loadgen_best = min(r["loadgen_p50_ms"] for r in per_round)
    psql_best = min(r["psql_p50_ms"] for r in per_round)
    return {"samples": samples, "rounds": per_round, "loadgen_best_p50_ms": loadgen_best,
            "psql_best_p50_ms": psql_best, "best_ratio": loadgen_best / psql_best,
            "median_ratio": median([r["loadgen_p50_ms"] / r["psql_p50_ms"] for r in per_round])}


def environment(server, args):
    gknn = {}
    if server.available("gknn"):
        server.ensure_database(DATABASES["gknn"], "gknn")
        db = DATABASES["gknn"]
        gknn = {"version": server.sql(db, "SELECT gknn_version()"),
                "device_setting": server.sql(db, ["LOAD 'gknn'", "SELECT current_setting('gknn.device')"]),
                "gpus": server.sql(db, "SELECT string_agg(name, ', ') FROM gknn_devices()") or ""}
    label = args.device_label or report.device_label(gknn.get("gpus", ""), gknn.get("device_setting", ""))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    return {"device": label, "gknn": gknn, "cpu": f"{cpu} ({os.cpu_count()} cores)", "host": platform.node(),
            "loadavg_start": open("/proc/loadavg").read().split()[:3],
            "server": server.sql("postgres", "SELECT version()")}


def service_snapshot(server):
    """gknn's GPU service after the run (counters, resident images) and the GPU's memory, when there is one."""
    db = DATABASES["gknn"]
    snap = {"status": server.sql(db, "SELECT row_to_json(s) FROM gknn_service_status() s"),
            "images": server.sql(db, "SELECT json_agg(i) FROM gknn_service_images() i")}
    try:
        snap["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
        snap["nvidia_smi_processes"] = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return snap


def command_line():
    """How this run was started, with the environment that changes what runs."""
    env = [f"{n}={shlex.quote(os.environ[n])}" for n in ("GKNN_USE_SERVER", "GKNN_BENCH_PG_TREE")
           if os.environ.get(n)]
    return " ".join(env + [shlex.join(["bench/run-experiment.sh"] + sys.argv[1:])])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment")
    p.add_argument("--queries", type=int, help="query vectors used (ground truth for as many); default: the file's")
    p.add_argument("--duration", type=float, help="seconds per run point")
    p.add_argument("--warmup", type=float, help="warm-up seconds per run point")
    p.add_argument("--clients", help="comma-separated client counts")
    p.add_argument("--device-label", help="the <device> of the result names (default: GPU name or cpu)")
    p.add_argument("--date", default=datetime.date.today().isoformat())
    p.add_argument("--out", default="bench/results")
    p.add_argument("--data-dir", default="bench/data")
    p.add_argument("--tools", default="build/bench")
    p.add_argument("--gt-device", default="auto", choices=["auto", "gpu", "cpu"])
    p.add_argument("--psql", default=os.environ.get("GKNN_PSQL", "psql"))
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--engines", help="comma-separated engine names to run (default: all of the file's)")
    args = p.parse_args()
    args.bench_dir = os.path.dirname(os.path.abspath(__file__))
    with open(args.experiment) as f:
        exp = json.load(f)
    run = exp.get("run", {})
    args.queries = args.queries or exp.get("queries", 10000)
    args.duration = args.duration or run.get("duration_s", 10)
    args.warmup = args.warmup if args.warmup is not None else run.get("warmup_s", 1)
    args.clients = [int(c) for c in args.clients.split(",")] if args.clients else run.get("clients", [1])

    server = Server(args.psql)
    env = environment(server, args)
    log(f"experiment {exp['name']} on {env['device']}")
    data, meta = prepare_dataset(exp, args)
    engines, loaded = [], set()
    wanted = set(args.engines.split(",")) if args.engines else None
    for engine in exp["engines"]:
        if wanted is not None and engine["name"] not in wanted:
            continue
        why = missing_requirement(server, engine)
        if why:
            log(f"{engine['name']}: skipped: {why}")
            engines.append({"engine": engine["name"], "skipped": why, "runs": []})
            continue
        ext = engine.get("extension", "gknn")
        if ext not in loaded:
            server.ensure_database(DATABASES[ext], ext)
            load_table(server, DATABASES[ext], exp["table"], data, meta, args.tools)
            loaded.add(ext)
        engines.append(run_engine(server, args, exp, engine, data, meta))
    check = timing_check(server, args, exp, data, meta) if "gknn" in loaded else None
    env["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    env["gknn_service"] = service_snapshot(server) if "gknn" in loaded else None
    doc = {"experiment": exp["name"], "description": exp.get("description", ""), "date": args.date,
           "environment": env, "dataset": meta, "k": exp["k"], "queries": args.queries,
           "duration_s": args.duration, "warmup_s": args.warmup, "engines": engines, "timing_check": check,
           "experiment_file": exp,
           "command": command_line()}
    base = os.path.join(args.out, f"{exp['name']}-{report.slug(env['device'])}-{args.date}")
    os.makedirs(args.out, exist_ok=True)
    report.write(doc, base, plot=not args.no_plot)
    failed = sum(r.get("errors", 0) for e in engines for r in e["runs"])
    log(f"wrote {base}.json, .md" + (", .png" if doc["plot"] else "") + (f"; {failed} query errors" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
