#!/usr/bin/env bash
# GpuTopK benchmark: the SIGMOD'18 §6.8 top-k queries on a synthetic tweets
# table, and exact vector search, each timed with gknn's plan and with
# PostgreSQL's own (gknn.enable_topk = off, parallel workers = the host's
# cores), side by side in one run. Needs a running server with gknn
# installed, given by PGHOST/PGPORT/PGUSER/PGDATABASE (on the GPU host:
# ../shared/gpu-host/start-postgres.sh, then `. /tmp/gknn-pg.env`).
#
#   bench/topk/run.sh [ROWS...]      default: 10000000 100000000
#
# Environment: GKNN_DEVICE (auto), REPS (3, the median is reported),
# VEC_ROWS (1000000), VEC_DIM (128), KEEP=1 keeps the tables between runs,
# GKNN_WORKERS (the host's cores): max_parallel_workers_per_gather on gknn's
# side, CONFIGS (default "auto serial parallel parallel-cpu"): which gknn configurations
# each query is timed under, beside PostgreSQL's own plan:
#   auto      gknn.enable_topk = on, GKNN_WORKERS workers: the planner's choice
#   serial    GpuTopK forced (enable_sort = off), no workers: one backend scans
#   parallel  GpuTopK forced (enable_sort = off), GKNN_WORKERS workers: Limit
#             over Gather Merge over a partial GpuTopK in every participant
#   parallel-cpu  as parallel, with gknn.topk_parallel_device = cpu (the
#             participants rank on the CPU: no CUDA context per worker)
# ("forced" only where the planner offers GpuTopK at all; the plan column
# says what ran: GM(n) = Gather Merge with n workers launched).
# Writes bench/results/topk-<device>-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS=("${@:-10000000 100000000}")
read -r -a ROWS <<<"${ROWS[*]}"
REPS=${REPS:-3}
DEVICE=${GKNN_DEVICE:-auto}
CORES=$(nproc)
WORKERS=${GKNN_WORKERS:-$CORES}
read -r -a CONFIGS <<<"${CONFIGS:-auto serial parallel parallel-cpu}"
VEC_ROWS=${VEC_ROWS:-1000000}
VEC_DIM=${VEC_DIM:-128}
q() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }

q -c 'CREATE EXTENSION IF NOT EXISTS gknn'
device=$(q -c "SET gknn.device = '$DEVICE'; SELECT gknn_current_device()")
# "gpu 0: NVIDIA H200" -> H200, "cpu" -> cpu
label=$(echo "$device" | sed -e 's/^gpu [0-9]*: //' -e 's/^NVIDIA //' | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
out=bench/results/topk-$label-$(date +%F).md

# Median wall time (ms) of a query under the given settings, from
# EXPLAIN ANALYZE's execution time, and the plan's shape below the Limit.
# One psql session per query and configuration: it LOADs gknn first
# (GpuTopK's planner hook exists only once the library is loaded, and a
# query without a gknn type or function, Q1-Q3, does not load it), runs the
# query once untimed (the backend opens the GPU: a pooled connection's
# state), then REPS times under EXPLAIN ANALYZE. Parallel workers are new
# processes every time, so their set-up is in every timed run.
time_query() {
  local settings=$1 sql=$2 workers=${3:-$CORES} args=() i
  args=(-c "LOAD 'gknn'; SET gknn.device = '$DEVICE'; SET max_parallel_workers_per_gather = $workers; SET gknn.topk_min_rows = 0; $settings"
    -c '\o /dev/null' -c "$sql" -c '\o')
  for ((i = 0; i < REPS; i++)); do args+=(-c "EXPLAIN (ANALYZE, FORMAT JSON) $sql"); done
  q "${args[@]}" | python3 -c '
import json, sys
def shape(p):
    name = p.get("Custom Plan Provider") or p["Node Type"]
    kids = p.get("Plans", [])
    if name == "Limit" and kids:
        return shape(kids[0])
    if name in ("Gather Merge", "Gather") and kids:
        return "GM(%s)>%s" % (p.get("Workers Launched", 0), shape(kids[0]))
    return name
text, dec, docs, pos = sys.stdin.read(), json.JSONDecoder(), [], 0
while text[pos:].strip():
    pos += len(text[pos:]) - len(text[pos:].lstrip())
    doc, pos = dec.raw_decode(text, pos)
    docs.append(doc[0])
times = sorted(d["Execution Time"] for d in docs)
print(times[(len(times) - 1) // 2], shape(docs[-1]["Plan"]))'
}

make_tweets() {
  local n=$1
  if [ "${KEEP:-0}" = 1 ] && [ "$(q -c "SELECT count(*) FROM pg_class WHERE relname = 'tweets_$n'")" = 1 ]; then return; fi
  q -c "DROP TABLE IF EXISTS tweets_$n" \
    -c "CREATE UNLOGGED TABLE tweets_$n (id bigint, tweet_time timestamp, retweet_count int4, likes_count int4, lang int2, uid int8)" \
    -c "INSERT INTO tweets_$n SELECT g, timestamp '2020-01-01' + (g * 3) * interval '1 second',
          (random() ^ 8 * 100000)::int4, (random() ^ 6 * 500000)::int4, (random() * 40)::int2, (random() * 1e8)::int8
        FROM generate_series(1, $n) g" \
    -c "VACUUM ANALYZE tweets_$n"
}

# PostgreSQL's plan as it chooses (workers by its log-of-size rule) and with
# the table's parallel_workers at the host's cores; speed-ups are against the
# faster of the two.
row() {  # label, query, table
  local b a c r best cells=''
  b=$(time_query "SET gknn.enable_topk = off" "$2")
  q -c "ALTER TABLE $3 SET (parallel_workers = $CORES)"
  a=$(time_query "SET gknn.enable_topk = off" "$2")
  q -c "ALTER TABLE $3 RESET (parallel_workers)"
  best=$(python3 -c "print(min(${b%% *}, ${a%% *}))")
  for c in "${CONFIGS[@]}"; do
    case $c in
      auto) r=$(time_query "SET gknn.enable_topk = on" "$2" "$WORKERS") ;;
      serial) r=$(time_query "SET gknn.enable_topk = on; SET enable_sort = off" "$2" 0) ;;
      parallel) r=$(time_query "SET gknn.enable_topk = on; SET enable_sort = off" "$2" "$WORKERS") ;;
      parallel-cpu) r=$(time_query "SET gknn.enable_topk = on; SET enable_sort = off; SET gknn.topk_parallel_device = cpu" "$2" "$WORKERS") ;;
      *) echo "unknown configuration $c" >&2; exit 1 ;;
    esac
    cells+=$(printf ' %s | %s | %.2f |' "${r#* }" "${r%% *}" "$(python3 -c "print($best / max(${r%% *}, 1e-9))")")
  done
  printf '| %s | %s | %s | %s | %s |%s\n' "$1" "${b#* }" "${b%% *}" "${a#* }" "${a%% *}" "$cells" | tee -a "$out"
}

{
  echo "# GpuTopK benchmark, $(date +%F)"
  echo
  echo "Device: $device. Host cores: $CORES (max_parallel_workers_per_gather: PostgreSQL $CORES, gknn $WORKERS). Median of $REPS runs, EXPLAIN ANALYZE execution time, in a session that ran the query once before (the GPU opened). PostgreSQL's plan twice: as it chooses, and with the table's parallel_workers = $CORES. Speedup: the faster of those two / that configuration's ms."
  echo "lang is an int2 code (0..40); 'en' and 'es' are codes 1 and 2. Configurations: ${CONFIGS[*]} (see bench/topk/run.sh)."
  echo
  header="| query | PostgreSQL plan | PostgreSQL ms | PostgreSQL all-cores plan | all-cores ms |"
  rule="|---|---|---|---|---|"
  for c in "${CONFIGS[@]}"; do
    header+=" $c plan | $c ms | $c speedup |"
    rule+="---|---|---|"
  done
  echo "$header"
  echo "$rule"
} >"$out"

for n in "${ROWS[@]}"; do
  make_tweets "$n"
  t=tweets_$n
  for sel in 0.1 0.25 0.5 0.75 1; do
    cut=$(q -c "SELECT timestamp '2020-01-01' + ($sel * $n * 3) * interval '1 second'")
    row "$n Q1 sel=$sel" "SELECT id FROM $t WHERE tweet_time < '$cut' ORDER BY retweet_count DESC LIMIT 50" "$t"
  done
  for k in 10 50 500; do
    row "$n Q2 k=$k" "SELECT id FROM $t ORDER BY retweet_count + 0.5 * likes_count DESC LIMIT $k" "$t"
    row "$n Q3 k=$k" "SELECT id FROM $t WHERE lang IN (1, 2) ORDER BY retweet_count DESC LIMIT $k" "$t"
  done
  [ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE $t"
done

q -c "DROP TABLE IF EXISTS vecs" \
  -c "CREATE UNLOGGED TABLE vecs (id int, emb vector($VEC_DIM))" \
  -c "INSERT INTO vecs SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, $VEC_DIM) WHERE g > 0)::vector FROM generate_series(1, $VEC_ROWS) g" \
  -c "VACUUM ANALYZE vecs"
qv=$(q -c "SELECT emb FROM vecs WHERE id = 1")
row "vector $VEC_ROWS x $VEC_DIM k=10" "SELECT id FROM vecs ORDER BY emb <-> '$qv' LIMIT 10" vecs
[ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE vecs"
echo "results: $out"
