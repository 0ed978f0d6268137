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
# VEC_ROWS (1000000; 0: no vector search), VEC_DIM (128), KEEP=1 keeps the
# tables between runs (a later run with KEEP=1 reuses them), LOAD_ONLY=1
# makes the tweets tables and stops,
# GKNN_WORKERS (the host's cores): max_parallel_workers_per_gather on gknn's
# side, CONFIGS (default "auto serial parallel parallel-cpu"): which gknn configurations
# each query is timed under, beside PostgreSQL's own plan:
#   auto      gknn.enable_topk = on, GKNN_WORKERS workers: the planner's choice
#   serial    GpuTopK forced (enable_sort = off), no workers: one backend scans
#   parallel  GpuTopK forced (enable_sort = off), GKNN_WORKERS workers: Limit
#             over Gather Merge over a partial GpuTopK in every participant
#   parallel-cpu  as parallel, with gknn.device = cpu (every participant
#             ranks on its own CPU; with gknn preloaded, parallel ranks in
#             the GPU service)
#   cache     GpuTopK forced, serial (what the table cache serves): the
#             server's gknn.topk_cache_mb is set to CACHE_MB (16384) and
#             the table's entry filled by gknn_cache_table() before the
#             queries (its time is reported on its own); needs gknn in
#             shared_preload_libraries (the cache lives in the GPU service)
# CLIENTS=N (unset: none) adds a concurrency table: each query run by N
# sessions at once through pgbench for DURATION (5) seconds, PostgreSQL's
# plan serial and with 2 workers per query (its default), and GpuTopK
# under each of CONC_CONFIGS (default: cache if CONFIGS has it, else
# serial); QPS side by side, with the service's GpuTopK batches per second
# and rows ranked per query from gknn_service_status().
# The tables are WAL-logged (the cache needs page LSNs) and vacuumed.
# ("forced" only where the planner offers GpuTopK at all; the plan column
# says what ran: GM(n) = Gather Merge with n workers launched).
# Writes bench/results/topk-<device>-<date>[-$TAG].md and prints it.
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
out=bench/results/topk-$label-$(date +%F)${TAG:+-$TAG}.md

# Median wall time (ms) of a query under the given settings, from
# EXPLAIN ANALYZE's execution time, and the plan's shape below the Limit.
# One psql session per query and configuration: it LOADs gknn first
# (GpuTopK's planner hook exists only once the library is loaded, and a
# query without a gknn type or function, Q1-Q3, does not load it), runs the
# query once first, not counted in the median (the backend opens the GPU,
# the table cache is built: a pooled connection's state), then REPS times,
# all under EXPLAIN ANALYZE. Parallel workers are new
# processes every time, so their set-up is in every timed run.
time_query() {
  local settings=$1 sql=$2 workers=${3:-$CORES} args=() i
  args=(-c "LOAD 'gknn'; SET gknn.device = '$DEVICE'; SET max_parallel_workers_per_gather = $workers; SET gknn.topk_min_rows = 0; $settings"
    -c "EXPLAIN (ANALYZE, FORMAT JSON) $sql")
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
def topk(p):
    if p.get("Custom Plan Provider") == "GpuTopK":
        return p
    for c in p.get("Plans", []):
        t = topk(c)
        if t:
            return t
# Where GpuTopK time went: per participant (the mean over the leader and
# the workers that ran), heap scan + deform and ranking, and GPU time and
# bytes moved in all.
def breakdown(p):
    t = topk(p)
    if not t:
        return "-"
    parts = ([t] if "Scan Time" in t else []) + t.get("GpuTopK Workers", [])
    n = max(len(parts), 1)
    scan = sum(x.get("Scan Time", 0) for x in parts) / n
    rank = sum(x.get("Rank Time", 0) for x in parts) / n
    gpu = sum(x.get("GPU Time", 0) for x in parts)
    mb = sum(x.get("Bytes To Device", 0) for x in parts) / 1e6
    places = sorted(set(x.get("Ranked On", "?") for x in parts))
    dev = "gpu" if any("GPU" in p for p in places) else "cpu"
    out = "%d x %s: scan+deform %.1f, rank %.1f" % (n, " / ".join(places), scan, rank)
    if "Table Cache" in t:
        out += ", cache %s (%d rows)" % (t["Table Cache"], t["Cached Rows"])
    if dev == "gpu":
        out += ", GPU %.1f ms, %.0f MB to device" % (gpu, mb)
    if any("Service Requests" in x for x in parts):
        out += ", service: %d requests, queue %.1f ms, in service %.1f ms" % (
            sum(x.get("Service Requests", 0) for x in parts), sum(x.get("Queue Wait Time", 0) for x in parts),
            sum(x.get("Service Time", 0) for x in parts))
    return out
text, dec, docs, pos = sys.stdin.read(), json.JSONDecoder(), [], 0
while text[pos:].strip():
    pos += len(text[pos:]) - len(text[pos:].lstrip())
    doc, pos = dec.raw_decode(text, pos)
    docs.append(doc[0])
first, docs = docs[0], sorted(docs[1:], key=lambda d: d["Execution Time"])
mid = docs[(len(docs) - 1) // 2]
print("%s\t%s\t%s; first run %.1f ms" % (mid["Execution Time"], shape(mid["Plan"]), breakdown(mid["Plan"]),
                                       first["Execution Time"]))'
}

# The table, generated by one INSERT per core (a 100M-row table by one
# backend takes minutes).
make_tweets() {
  local n=$1 parts=$CORES p
  if [ "${KEEP:-0}" = 1 ] && [ "$(q -c "SELECT count(*) FROM pg_class WHERE relname = 'tweets_$n'")" = 1 ]; then return; fi
  q -c "DROP TABLE IF EXISTS tweets_$n" \
    -c "CREATE TABLE tweets_$n (id bigint, tweet_time timestamp, retweet_count int4, likes_count int4, lang int2, uid int8)"
  for ((p = 0; p < parts; p++)); do
    q -c "INSERT INTO tweets_$n SELECT g, timestamp '2020-01-01' + (g * 3) * interval '1 second',
          (random() ^ 8 * 100000)::int4, (random() ^ 6 * 500000)::int4, (random() * 40)::int2, (random() * 1e8)::int8
        FROM generate_series($((p * n / parts + 1)), $(((p + 1) * n / parts))) g" &
  done
  wait
  q -c "VACUUM ANALYZE tweets_$n"
}

# A configuration's session settings, "name=value" pairs (after time_query's
# own: gknn.device, the workers, gknn.topk_min_rows = 0). pg-serial and
# pg-2 are PostgreSQL's side of the concurrency table.
config_settings() {  # c
  case $1 in
    pg-serial) echo "gknn.enable_topk=off max_parallel_workers_per_gather=0" ;;
    pg-2) echo "gknn.enable_topk=off max_parallel_workers_per_gather=2" ;;
    auto) echo "gknn.enable_topk=on max_parallel_workers_per_gather=$WORKERS" ;;
    serial | cache) echo "gknn.enable_topk=on enable_sort=off max_parallel_workers_per_gather=0" ;;
    parallel) echo "gknn.enable_topk=on enable_sort=off max_parallel_workers_per_gather=$WORKERS" ;;
    parallel-cpu) echo "gknn.enable_topk=on enable_sort=off max_parallel_workers_per_gather=$WORKERS gknn.device=cpu" ;;
    *) echo "unknown configuration $1" >&2; exit 1 ;;
  esac
}

# Runs the configuration `c` of a query: "ms<TAB>plan<TAB>breakdown".
run_config() {  # c query
  local settings='' kv
  for kv in $(config_settings "$1"); do settings+="SET ${kv%%=*} = '${kv#*=}'; "; done
  time_query "$settings" "$2"
}

# The same settings as PGOPTIONS, for pgbench's sessions.
config_options() {  # c
  local o="-c gknn.device=$DEVICE -c gknn.topk_min_rows=0" kv
  for kv in $(config_settings "$1"); do o+=" -c $kv"; done
  echo "$o"
}

# The service's GpuTopK counters: "batches rows" (0 0 without the service).
topk_counters() {
  q -c "SELECT coalesce((SELECT topk_batches || ' ' || topk_rows FROM gknn_service_status()), '0 0')" 2>/dev/null || echo "0 0"
}

# QPS of a query run by CLIENTS sessions at once for DURATION seconds under
# a configuration: "qps<TAB>service batches per query<TAB>rows ranked in
# the service per query".
conc_qps() {  # c sql
  local f log before after qps
  f=$(mktemp) && log=$(mktemp)
  printf '%s;\n' "$2" >"$f"
  before=$(topk_counters)
  PGOPTIONS=$(config_options "$1") pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "${DURATION:-5}" -f "$f" \
    "${PGDATABASE:-postgres}" >"$log" 2>&1 || { cat "$log" >&2; rm -f "$f" "$log"; exit 1; }
  after=$(topk_counters)
  qps=$(awk '/^tps = / {print $3; exit}' "$log")
  python3 -c "
b, a, qps, t = [int(x) for x in '$before'.split()], [int(x) for x in '$after'.split()], float('$qps'), ${DURATION:-5}
n = max(qps * t, 1)
print('%.0f\t%.2f\t%.0f' % (qps, (a[0] - b[0]) / n, (a[1] - b[1]) / n))"
  rm -f "$f" "$log"
}

# One query's concurrency row: PostgreSQL serial and with 2 workers, then
# each of CONC_CONFIGS; the speedup is over the better PostgreSQL QPS.
conc_row() {  # label sql
  local s p c r best cells=''
  s=$(conc_qps pg-serial "$2")
  p=$(conc_qps pg-2 "$2")
  best=$(python3 -c "print(max($(cut -f1 <<<"$s"), $(cut -f1 <<<"$p"), 1e-9))")
  for c in "${CONC_CONFIGS[@]}"; do
    r=$(conc_qps "$c" "$2")
    cells+=$(printf ' %s | %.1f | %s | %s |' "$(cut -f1 <<<"$r")" "$(python3 -c "print($(cut -f1 <<<"$r") / $best)")" \
      "$(cut -f2 <<<"$r")" "$(cut -f3 <<<"$r")")
  done
  printf '| %s | %s | %s |%s\n' "$1" "$(cut -f1 <<<"$s")" "$(cut -f1 <<<"$p")" "$cells" >>"$conc"
}

# The cache configuration: the table's entry filled ahead of the queries
# (timed; the fill is reported in the notes), under the budget set below.
fill_cache() {  # table columns
  local t0 t1 rows
  t0=$(date +%s.%N)
  rows=$(q -c "SELECT gknn_cache_table('$1', $2)")
  t1=$(date +%s.%N)
  printf '%s: gknn_cache_table filled %s rows in %.0f ms\n' "$1" "$rows" "$(python3 -c "print(($t1 - $t0) * 1000)")" >>"$fills"
}

# One query: PostgreSQL's plan as it chooses (workers by its log-of-size
# rule), then with the table's parallel_workers at the host's cores, and
# the scan floor (the same scan and WHERE under that setting, aggregating
# the ranked columns: what any plan that reads the heap pays); speed-ups are
# against the faster PostgreSQL plan. `auto` runs twice, without and with
# the table's setting (the planner then weighs GpuTopK against
# PostgreSQL's all-cores plan). Rows go to the results table; where
# GpuTopK's time went, to the breakdown table.
row() {  # label, query, table, floor query
  local b a f r c best ms cells='' notes=''
  b=$(time_query "SET gknn.enable_topk = off" "$2")
  q -c "ALTER TABLE $3 SET (parallel_workers = $CORES)"
  a=$(time_query "SET gknn.enable_topk = off" "$2")
  f=$(time_query "SET gknn.enable_topk = off" "$4")
  r=$(run_config auto "$2")
  q -c "ALTER TABLE $3 RESET (parallel_workers)"
  best=$(python3 -c "print(min($(cut -f1 <<<"$b"), $(cut -f1 <<<"$a")))")
  ms=$(cut -f1 <<<"$r")
  cells=$(printf ' %s | %s | %.2f |' "$(cut -f2 <<<"$r")" "$ms" "$(python3 -c "print($best / max($ms, 1e-9))")")
  notes="| $1 | auto, all-cores table | $(cut -f3 <<<"$r") |"$'\n'
  for c in "${CONFIGS[@]}"; do
    r=$(run_config "$c" "$2")
    ms=$(cut -f1 <<<"$r")
    cells+=$(printf ' %s | %s | %.2f |' "$(cut -f2 <<<"$r")" "$ms" "$(python3 -c "print($best / max($ms, 1e-9))")")
    notes+="| $1 | $c | $(cut -f3 <<<"$r") |"$'\n'
  done
  printf '| %s | %s | %s | %s | %s | %s | %.1f |%s\n' "$1" "$(cut -f2 <<<"$b")" "$(cut -f1 <<<"$b")" \
    "$(cut -f2 <<<"$a")" "$(cut -f1 <<<"$a")" "$(cut -f1 <<<"$f")" "$(python3 -c "print($best / 5)")" "$cells" | tee -a "$out"
  printf '%s' "$notes" >>"$breakdown"
  [ -z "${CLIENTS:-}" ] || conc_row "$1" "$2"
}

if [ "${LOAD_ONLY:-0}" = 1 ]; then
  for n in "${ROWS[@]}"; do make_tweets "$n"; done
  q -c "SELECT relname, pg_size_pretty(pg_relation_size(oid)), reltuples FROM pg_class WHERE relname LIKE 'tweets_%'"
  exit 0
fi

breakdown=$(mktemp) conc=$(mktemp) fills=$(mktemp)
has_cache=0
for c in "${CONFIGS[@]}"; do [ "$c" = cache ] && has_cache=1; done
# The cache's budget is the server's (SIGHUP): set for this run, reset at
# its end, so later benchmarks on the same server run without it.
set_cache_budget() {  # SQL value, or DEFAULT
  q -c "ALTER SYSTEM SET gknn.topk_cache_mb = $1" -c "SELECT pg_reload_conf()" >/dev/null && sleep 1
}
on_exit() {
  rm -f "$breakdown" "$conc" "$fills"
  [ "$has_cache" = 0 ] || set_cache_budget DEFAULT
}
trap on_exit EXIT
[ "$has_cache" = 0 ] || set_cache_budget "${CACHE_MB:-16384}"
if [ -n "${CONC_CONFIGS:-}" ]; then
  read -r -a CONC_CONFIGS <<<"$CONC_CONFIGS"
elif [ "$has_cache" = 1 ]; then
  CONC_CONFIGS=(cache)
else
  CONC_CONFIGS=(serial)
fi
{
  echo "# GpuTopK benchmark, $(date +%F)"
  echo
  echo "Device: $device. Host cores: $CORES (max_parallel_workers_per_gather: PostgreSQL $CORES, gknn $WORKERS). Median of $REPS runs, EXPLAIN ANALYZE execution time, in a session that ran the query once before (the GPU opened). PostgreSQL's plan twice: as it chooses, and with the table's parallel_workers = $CORES. Speedup: the faster of those two / that configuration's ms."
  echo "Scan floor: the same WHERE with max() of the ranked columns instead of ORDER BY ... LIMIT, PostgreSQL with parallel_workers = $CORES: the heap scan and deform any plan that reads the table pays. 5x target: the faster PostgreSQL plan / 5."
  echo "lang is an int2 code (0..40); 'en' and 'es' are codes 1 and 2. Configurations: auto with the table's parallel_workers = $CORES (auto-all-cores), then ${CONFIGS[*]} (see bench/topk/run.sh)."
  echo
  header="| query | PostgreSQL plan | PostgreSQL ms | PostgreSQL all-cores plan | all-cores ms | scan floor ms | 5x target ms | auto-all-cores plan | auto-all-cores ms | auto-all-cores speedup |"
  rule="|---|---|---|---|---|---|---|---|---|---|"
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
  [ "$has_cache" = 0 ] || fill_cache "$t" "ARRAY['id', 'tweet_time', 'retweet_count', 'likes_count', 'lang']"
  for sel in 0.1 0.25 0.5 0.75 1; do
    cut=$(q -c "SELECT timestamp '2020-01-01' + ($sel * $n * 3) * interval '1 second'")
    row "$n Q1 sel=$sel" "SELECT id FROM $t WHERE tweet_time < '$cut' ORDER BY retweet_count DESC LIMIT 50" "$t" \
      "SELECT max(retweet_count) FROM $t WHERE tweet_time < '$cut'"
  done
  for k in 10 50 500; do
    row "$n Q2 k=$k" "SELECT id FROM $t ORDER BY retweet_count + 0.5 * likes_count DESC LIMIT $k" "$t" \
      "SELECT max(retweet_count), max(likes_count) FROM $t"
    row "$n Q3 k=$k" "SELECT id FROM $t WHERE lang IN (1, 2) ORDER BY retweet_count DESC LIMIT $k" "$t" \
      "SELECT max(retweet_count) FROM $t WHERE lang IN (1, 2)"
  done
  [ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE $t"
done

if [ "$VEC_ROWS" -gt 0 ]; then
  q -c "DROP TABLE IF EXISTS vecs" \
    -c "CREATE TABLE vecs (id int, emb vector($VEC_DIM))" \
    -c "INSERT INTO vecs SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, $VEC_DIM) WHERE g > 0)::vector FROM generate_series(1, $VEC_ROWS) g" \
    -c "VACUUM ANALYZE vecs"
  [ "$has_cache" = 0 ] || fill_cache vecs "ARRAY['id', 'emb']"
  qv=$(q -c "SELECT emb FROM vecs WHERE id = 1")
  # The floor reads every vector (count(emb) only checks for NULL).
  row "vector $VEC_ROWS x $VEC_DIM k=10" "SELECT id FROM vecs ORDER BY emb <-> '$qv' LIMIT 10" vecs \
    "SELECT max(vector_dims(emb)) FROM vecs"
  [ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE vecs"
fi
{
  echo
  echo "Where GpuTopK's time went (the median run; per participant, the mean over the leader and the workers that ran; ms):"
  echo
  echo "| query | configuration | participants and time |"
  echo "|---|---|---|"
  cat "$breakdown"
  if [ -s "$fills" ]; then
    echo
    echo "Table cache fills (gknn.topk_cache_mb = ${CACHE_MB:-16384}):"
    echo
    sed 's/^/- /' "$fills"
  fi
  if [ -n "${CLIENTS:-}" ]; then
    echo
    echo "$CLIENTS clients at once (pgbench, ${DURATION:-5} s each, QPS): PostgreSQL serial and with 2 workers per query; GpuTopK under ${CONC_CONFIGS[*]}, speedup over the better PostgreSQL QPS; batches and rows: the GPU service's GpuTopK launches and rows ranked, per query."
    echo
    header="| query | PostgreSQL serial QPS | PostgreSQL 2 workers QPS |"
    rule="|---|---|---|"
    for c in "${CONC_CONFIGS[@]}"; do
      header+=" $c QPS | $c speedup | $c batches/query | $c rows/query |"
      rule+="---|---|---|---|"
    done
    echo "$header"
    echo "$rule"
    cat "$conc"
  fi
} | tee -a "$out"
echo "results: $out"
