#!/usr/bin/env python3
"""TAP checks of bench/report.py's comparison at a recall (no server, no
GPU): each side's best setting among those reaching the floor, never a faster
one below it, the client counts kept apart, a side with none said so; and of
the service's per-point means (run_experiment.service_delta, with searches
the resident graph kernel's ring answered)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report  # noqa: E402

checks = []


def ok(cond, name):
    checks.append((bool(cond), name))


def run(clients, qps, recall, **settings):
    return {"clients": clients, "qps": qps, "recall": {"mean": recall}, "settings": settings}


def doc(engines, floors=None):
    spec = {"engines": [{"name": e["engine"], "sweep": {}} for e in engines]}
    if floors:
        spec["recall_floors"] = floors
    return {"k": 10, "engines": engines, "experiment_file": spec}


graph = {"engine": "gknn-graph", "extension": "gknn", "sweep_names": ["ef"],
         "runs": [run(16, 90000, 0.9926, ef=12), run(16, 95000, 0.9967, ef=20), run(16, 120000, 0.98, ef=8),
                  run(64, 130000, 0.9953, ef=16)]}
hnsw = {"engine": "pgvector-hnsw", "extension": "vector", "sweep_names": ["ef"],
        "runs": [run(16, 30000, 0.988, ef=20), run(16, 25000, 0.9912, ef=24), run(16, 19000, 0.9961, ef=40),
                 run(64, 16000, 0.9961, ef=40)]}
d = doc([graph, hnsw])

b = report.best_at_recall(d, "gknn", 0.99, 16)
ok(b and b["qps"] == 95000, "gknn's best at 0.99 is its fastest setting reaching it, not a faster one below")
b = report.best_at_recall(d, "pgvector", 0.99, 16)
ok(b and b["qps"] == 25000, "pgvector's best at 0.99 skips ef 20 (0.988), takes ef 24 over ef 40")
b = report.best_at_recall(d, "pgvector", 0.995, 16)
ok(b and b["qps"] == 19000, "at 0.995 only ef 40 reaches it")
ok(report.best_at_recall(d, "gknn", 0.999, 16) is None, "no setting reaching the floor: None")
b = report.best_at_recall(d, "gknn", 0.99, 64)
ok(b and b["qps"] == 130000, "client counts are kept apart")

lines = report.at_recall_lines(d)
text = "\n".join(lines)
ok("| 0.99 | 16 | gknn-graph ef=20: 95000.0 (0.9967) | pgvector-hnsw ef=24: 25000.0 (0.9912) | 3.80x |" in text,
   "the table row at 0.99, 16 clients: both bests and their ratio")
ok("| 0.995 | 64 | gknn-graph ef=16: 130000.0 (0.9953) | pgvector-hnsw ef=40: 16000.0 (0.9961) | 8.12x |" in text,
   "the table row at 0.995, 64 clients")

lone = doc([graph])
text = "\n".join(report.at_recall_lines(lone))
ok("| 0.99 | 16 | gknn-graph ef=20: 95000.0 (0.9967) | none reaches it | - |" in text,
   "without a pgvector engine: its side says so, no ratio")
ok(report.at_recall_lines(doc([graph], floors=[0.9999])) == [], "no engine reaches any floor: no table")
text = "\n".join(report.at_recall_lines(doc([graph, hnsw], floors=[0.95])))
ok("| 0.95 | 16 | gknn-graph ef=8: 120000.0 (0.9800) |" in text, "an experiment's recall_floors replace the default")
skipped = dict(hnsw, skipped="no pgvector")
ok(report.best_at_recall(doc([graph, skipped]), "pgvector", 0.99, 16) is None, "a skipped engine is not counted")

# postgres-exact runs in gknn's database (extension "gknn") but is PostgreSQL's
# own plan: a baseline, on neither side; sides go by the engines' names.
exact = {"engine": "postgres-exact", "extension": "gknn", "sweep_names": [],
         "runs": [run(16, 500000, 1.0)]}
b = report.best_at_recall(doc([graph, hnsw, exact]), "gknn", 0.99, 16)
ok(b and b["engine"] == "gknn-graph", "postgres-exact is not gknn's best")
ok(report.best_at_recall(doc([exact]), "pgvector", 0.99, 16) is None, "nor pgvector's")
bare = {"engine": "pgvector-ivfflat", "sweep_names": [], "runs": [run(16, 21000, 0.9995)]}
b = report.best_at_recall(doc([graph, bare]), "pgvector", 0.99, 16)
ok(b and b["qps"] == 21000, "an engine without an extension field goes by its name")

# Runs that cannot be compared: no recall, no QPS, errors.
odd = {"engine": "gknn-ivfpq", "extension": "gknn", "sweep_names": [],
       "runs": [{"clients": 16, "qps": 999999, "settings": {}}, dict(run(16, 0, 0.999)),
                dict(run(16, 888888, 0.999), errors=3)]}
ok(report.best_at_recall(doc([odd]), "gknn", 0.99, 16) is None,
   "runs without recall, without QPS or with errors are never a best")
nofile = {"k": 10, "engines": [graph, hnsw]}
ok(any("| 0.99 | 16 |" in line for line in report.at_recall_lines(nofile)),
   "a document without its experiment file takes the default floors")

# The service's counters per point (run_experiment.service_delta): searches
# the resident graph kernel's ring answered count beside the batched ones.
import run_experiment  # noqa: E402

ring_only = run_experiment.service_delta((100, 10, 30, 5.0, 1.0, 2.0, 0, 0.0), (1100, 10, 30, 5.0, 1.0, 2.0, 1000, 90.0))
ok(ring_only and ring_only["ring_searches"] == 1000 and ring_only["mean_batch"] is None
   and ring_only["busy_ms_per_batch"] is None and abs(ring_only["held_ms_per_search"] - 0.09) < 1e-9
   and ring_only["wait_ms_per_search"] == 0, "a point the ring answered alone: its time per search, no batch, no wait")
ok(report.load_text({"clients": 16, "qps": 128000, "service": ring_only}) == "0.125 / 0.000 / 0.090 / -",
   "its load cell: round trip, no queue wait, time in the ring, no executor time")
mixed = run_experiment.service_delta((0, 0, 0, 0.0, 0.0, 0.0, 0, 0.0), (300, 50, 100, 4.0, 2.0, 10.0, 200, 16.0))
ok(mixed and abs(mixed["held_ms_per_search"] - 26.0 / 300) < 1e-9 and abs(mixed["wait_ms_per_search"] - 2.0 / 300) < 1e-9
   and mixed["mean_batch"] == 2.0 and mixed["busy_ms_per_batch"] == 0.08,
   "batched and ring searches together: means over both, batch means over the batches")
old_gknn = run_experiment.service_delta((10, 5, 5, 1.0, None, None, None, None), (20, 5, 5, 1.0, None, None, None, None))
ok(old_gknn is None, "no batch and no ring counters (an older gknn): nothing to say")
ok(run_experiment.service_delta((10, 5, 5, 1.0, 0.0, 0.0, 7, 1.0), (10, 5, 5, 1.0, 0.0, 0.0, 7, 1.0)) is None,
   "no search in the point: nothing")

print(f"1..{len(checks)}")
for i, (good, name) in enumerate(checks, 1):
    print(f"{'ok' if good else 'not ok'} {i} - {name}")
sys.exit(0 if all(g for g, _ in checks) else 1)
