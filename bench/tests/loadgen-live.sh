#!/usr/bin/env bash
# gknn-loadgen against a running server (PGHOST/PGPORT/PGUSER), as TAP:
# a small synthetic dataset loaded by binary COPY with gknn-load, exact
# ground truth from gknn-groundtruth (CPU), and loadgen's recall, query count
# and error handling checked on it. Used by regress/run-all.sh; takes seconds.
#
#   bench/tests/loadgen-live.sh TOOLS_DIR   (build/bench)
set -uo pipefail
TOOLS=${1:-build/bench}
PSQL=${GKNN_PSQL:-psql}
DB=gknn_bench_smoke
. "$(dirname "$0")/../../regress/tap.sh"
sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 "$@"; }
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))' "$@"; }

check "gknn-synth writes 3000 x 16 base and 40 queries" \
  "$TOOLS/gknn-synth" --n 3000 --nq 40 --dim 16 --clusters 8 --seed 7 --base "$tmp/base.fvecs" --queries "$tmp/q.fvecs"
check "gknn-synth: the same bytes with 1 and 3 threads" bash -c "'$TOOLS/gknn-synth' --n 3000 --nq 40 --dim 16 \
  --clusters 8 --seed 7 --threads 1 --base '$tmp/b1.fvecs' --queries '$tmp/q1.fvecs' &&
  '$TOOLS/gknn-synth' --n 3000 --nq 40 --dim 16 --clusters 8 --seed 7 --threads 3 --base '$tmp/b3.fvecs' \
  --queries '$tmp/q3.fvecs' && cmp '$tmp/b1.fvecs' '$tmp/b3.fvecs' && cmp '$tmp/base.fvecs' '$tmp/b1.fvecs'"
if [ -x "$TOOLS/gknn-groundtruth" ]; then
  check "gknn-groundtruth computes exact top 20 on the CPU" \
    "$TOOLS/gknn-groundtruth" --base "$tmp/base.fvecs" --queries "$tmp/q.fvecs" --metric l2 --k 20 --device cpu \
    --ids "$tmp/gt.ivecs" --dist "$tmp/gt-dist.fvecs"
  check "gknn-groundtruth: the base in chunks of 700 rows gives the same answer" bash -c "'$TOOLS/gknn-groundtruth' \
    --base '$tmp/base.fvecs' --queries '$tmp/q.fvecs' --metric l2 --k 20 --device cpu --chunk-rows 700 \
    --ids '$tmp/gt2.ivecs' --dist '$tmp/gt2-dist.fvecs' && cmp '$tmp/gt.ivecs' '$tmp/gt2.ivecs' &&
    cmp '$tmp/gt-dist.fvecs' '$tmp/gt2-dist.fvecs'"
else
  echo "ok $((n += 1)) - gknn-groundtruth # SKIP not built (no core library)"
fi
check "database with gknn" sql -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
check "CREATE EXTENSION gknn" sql -d "$DB" -c "CREATE EXTENSION gknn" \
  -c "CREATE TABLE items (id int NOT NULL, emb vector(16) NOT NULL)"
check "gknn-load copies 3000 rows (binary COPY)" "$TOOLS/gknn-load" --base "$tmp/base.fvecs" --table items \
  --conninfo "dbname=$DB"
check "the table has 3000 rows, ids 0..2999" test "$(sql -d "$DB" -c 'SELECT count(*), min(id), max(id) FROM items')" = "3000|0|2999"

gt=()
[ -f "$tmp/gt.ivecs" ] && gt=(--gt "$tmp/gt.ivecs" --gt-dist "$tmp/gt-dist.fvecs")
check "gknn-loadgen runs 80 queries on 2 clients" "$TOOLS/gknn-loadgen" --dbname "$DB" --queries "$tmp/q.fvecs" \
  "${gt[@]}" --k 10 --clients 2 --count 80 --set max_parallel_workers_per_gather=0 --json "$tmp/run.json"
check "JSON: 80 queries, 0 errors, latency percentiles ordered" \
  test "$(json_field "$tmp/run.json" 'queries == 80 and errors == 0 and 0 < latency_ms["p50"] <= latency_ms["p95"] <= latency_ms["p99"] <= latency_ms["max"]')" = True
if [ ${#gt[@]} -gt 0 ]; then
  check "exact search has recall@10 = 1 against the ground truth" \
    test "$(json_field "$tmp/run.json" 'recall["mean"] == 1.0 and recall["min"] == 1.0')" = True
  # A query that returns the wrong rows (the farthest ones) must score low.
  check "a wrong answer scores recall < 0.5" "$TOOLS/gknn-loadgen" --dbname "$DB" --queries "$tmp/q.fvecs" \
    "${gt[@]}" --count 20 --json "$tmp/wrong.json" --sql 'SELECT id FROM items ORDER BY emb <-> $1 DESC LIMIT 10'
  check "  ... and it does" test "$(json_field "$tmp/wrong.json" 'recall["mean"] < 0.5')" = True
fi
check "an error (no such table) makes loadgen fail" \
  bash -c "! '$TOOLS/gknn-loadgen' --dbname $DB --queries '$tmp/q.fvecs' --table nosuch --count 5"
sql -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
tap_end
