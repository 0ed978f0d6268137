#!/usr/bin/env bash
# GpuTopK cost-model calibration: for a few queries, each plan's estimated
# total cost beside its measured time (median of REPS EXPLAIN ANALYZE runs),
# so the constants in extension/topk_planner.cpp can be checked against
# PostgreSQL's own plans on the same host: an honest model has about the same
# ms per cost unit for every plan of a query.
#
#   bench/topk/calibrate.sh [ROWS]     default 2000000 (VEC_ROWS: 200000 x VEC_DIM 128)
#
# Needs a running server with gknn (PGHOST/PGPORT/PGUSER/PGDATABASE).
# Environment: GKNN_DEVICE (cpu), REPS (3), WORKERS (nproc), KEEP=1,
# CACHE_MB: also the cached plan (topk-cached: the server's
# gknn.topk_cache_mb set to CACHE_MB for it, the tables' entries filled
# first, the setting reset at the end; needs the GPU service). The tables
# are logged: the cache takes only permanent tables.
set -euo pipefail
ROWS=${1:-2000000}
VEC_ROWS=${VEC_ROWS:-200000}
VEC_DIM=${VEC_DIM:-128}
REPS=${REPS:-3}
DEVICE=${GKNN_DEVICE:-cpu}
WORKERS=${WORKERS:-$(nproc)}
q() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }

q -c 'CREATE EXTENSION IF NOT EXISTS gknn'
if [ "${KEEP:-0}" != 1 ] || [ "$(q -c "SELECT count(*) FROM pg_class WHERE relname = 'cal_tweets'")" = 0 ]; then
  q -c "DROP TABLE IF EXISTS cal_tweets" \
    -c "CREATE TABLE cal_tweets (id bigint, tweet_time timestamp, retweet_count int4, likes_count int4, lang int2, uid int8)" \
    -c "INSERT INTO cal_tweets SELECT g, timestamp '2020-01-01' + (g * 3) * interval '1 second',
          (random() ^ 8 * 100000)::int4, (random() ^ 6 * 500000)::int4, (random() * 40)::int2, (random() * 1e8)::int8
        FROM generate_series(1, $ROWS) g" \
    -c "VACUUM ANALYZE cal_tweets"
  q -c "DROP TABLE IF EXISTS cal_vecs" \
    -c "CREATE TABLE cal_vecs (id int, emb vector($VEC_DIM))" \
    -c "INSERT INTO cal_vecs SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, $VEC_DIM) WHERE g > 0)::vector FROM generate_series(1, $VEC_ROWS) g" \
    -c "VACUUM ANALYZE cal_vecs"
fi
qv=$(q -c "SELECT emb FROM cal_vecs WHERE id = 1")

# config -> settings
settings() {
  case $1 in
    pg-serial) echo "SET gknn.enable_topk = off; SET max_parallel_workers_per_gather = 0" ;;
    pg-parallel) echo "SET gknn.enable_topk = off; SET max_parallel_workers_per_gather = $WORKERS" ;;
    topk-serial) echo "SET enable_sort = off; SET max_parallel_workers_per_gather = 0" ;;
    topk-parallel) echo "SET enable_sort = off; SET max_parallel_workers_per_gather = $WORKERS" ;;
    topk-cached) echo "SET enable_sort = off; SET max_parallel_workers_per_gather = 0" ;;
  esac
}

measure() {  # label, query, configs...
  local c res t cost plan times
  for c in "${@:3}"; do
    times=()
    for ((i = 0; i < REPS; i++)); do
      res=$(q -c "LOAD 'gknn'; SET gknn.device = '$DEVICE'; SET gknn.topk_min_rows = 0; $(settings "$c")" \
        -c "EXPLAIN (ANALYZE, FORMAT JSON) $2")
      times+=("$(echo "$res" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Execution Time"])')")
    done
    t=$(printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((REPS + 1) / 2))p")
    read -r cost plan < <(echo "$res" | python3 -c '
import json, sys
p = json.load(sys.stdin)[0]["Plan"]
def shape(p):
    name = p.get("Custom Plan Provider") or p["Node Type"]
    kids = p.get("Plans", [])
    if name == "Limit" and kids: return shape(kids[0])
    if name in ("Gather Merge", "Gather") and kids: return "GM(%s)>%s" % (p.get("Workers Launched", 0), shape(kids[0]))
    return name
print(p["Total Cost"], shape(p))')
    printf '| %s | %s | %s | %.1f | %.0f | %.4f |\n' "$1" "$c" "$plan" "$t" "$cost" "$(python3 -c "print($t / $cost)")"
  done
}

# The cache's budget is the server's (SIGHUP).
cache_budget() { q -c "ALTER SYSTEM SET gknn.topk_cache_mb = $1" -c "SELECT pg_reload_conf()" >/dev/null && sleep 1; }
CACHE_MB=${CACHE_MB:-0}
[ "$CACHE_MB" = 0 ] || { trap 'cache_budget DEFAULT' EXIT; cache_budget 0; }
queries=(
  "order by id" "SELECT id FROM cal_tweets ORDER BY id DESC LIMIT 50"
  "Q1 sel=1" "SELECT id FROM cal_tweets WHERE tweet_time < '2100-01-01' ORDER BY retweet_count DESC LIMIT 50"
  "Q2 k=50" "SELECT id FROM cal_tweets ORDER BY retweet_count + 0.5 * likes_count DESC LIMIT 50"
  "Q3 k=50" "SELECT id FROM cal_tweets WHERE lang IN (1, 2) ORDER BY retweet_count DESC LIMIT 50"
  "vector ${VEC_ROWS}x${VEC_DIM} k=10" "SELECT id FROM cal_vecs ORDER BY emb <-> '$qv' LIMIT 10"
)
echo "| query | config | plan | ms | est. cost | ms / cost unit |"
echo "|---|---|---|---|---|---|"
for ((j = 0; j < ${#queries[@]}; j += 2)); do
  measure "${queries[j]}" "${queries[j + 1]}" pg-serial pg-parallel topk-serial topk-parallel
done
if [ "$CACHE_MB" != 0 ]; then
  cache_budget "$CACHE_MB"
  q -c "SELECT gknn_cache_table('cal_tweets', ARRAY['id', 'tweet_time', 'retweet_count', 'likes_count', 'lang'])" \
    -c "SELECT gknn_cache_table('cal_vecs', ARRAY['id', 'emb'])" >/dev/null
  for ((j = 0; j < ${#queries[@]}; j += 2)); do measure "${queries[j]}" "${queries[j + 1]}" topk-cached; done
fi
[ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE cal_tweets" -c "DROP TABLE cal_vecs"
