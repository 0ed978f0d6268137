#!/usr/bin/env bash
# Where a query's time goes under load with the GPU service: pgbench over a
# gpu_ivfpq index (approximate and exact mode) and a gpu_graph index on
# synthetic clustered data, beside two floors measured in the same run
# (PostgreSQL answering a trivial prepared statement, and the same
# statement fetching the query vector as the searches do), at 1 / 16 / 64
# clients. Per cell: QPS and mean latency, and the host's CPU split over the
# cell (cores busy in all, in the service process, in pgbench, the rest:
# the backends and the system), and what the service counted (requests,
# batches and their mean size, the executors' busy time per second).
# With perf on the host, a system-wide profile of one 16-client cell per
# engine, by command and shared object.
#
#   bench/service-cpu.sh OUT_DIR [N=60000] [DIM=784]
#
# Needs a running server with gknn preloaded (its service on), psql and
# pgbench on PATH, the connection in PGHOST / PGPORT / PGUSER /
# PGDATABASE, and build/bench/gknn-synth, gknn-load. Writes
# OUT_DIR/service-cpu.md.
set -euo pipefail
out=${1:?output folder}
n=${2:-60000} dim=${3:-784}
here=$(cd "$(dirname "$0")/.." && pwd)
tools=${GKNN_BENCH_TOOLS:-$here/build/bench}
secs=${SECS:-5}
mkdir -p "$out"
md=$out/service-cpu.md
q() { psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }

setup() {
  "$tools/gknn-synth" --base "$out/base.fvecs" --queries "$out/queries.fvecs" --n "$n" --nq 200 --dim "$dim" \
    --clusters 100 >/dev/null
  q <<SQL
CREATE EXTENSION IF NOT EXISTS gknn;
DROP TABLE IF EXISTS items, items_g, queries;
CREATE TABLE items (id integer, emb vector($dim));
CREATE TABLE queries (qid integer, q vector($dim));
SQL
  "$tools/gknn-load" --base "$out/base.fvecs" --table items --columns 'id, emb' >/dev/null
  "$tools/gknn-load" --base "$out/queries.fvecs" --table queries --columns 'qid, q' >/dev/null
  q -c "CREATE TABLE items_g AS SELECT * FROM items"
  q -c "SET maintenance_work_mem = '4GB'" \
    -c "CREATE INDEX ON items USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 256, m = $((dim % 49 == 0 ? 49 : dim / 4)))" \
    -c "CREATE INDEX ON items_g USING gpu_graph (emb vector_l2_ops) WITH (degree = 32)" \
    -c "CREATE UNIQUE INDEX ON queries (qid)" \
    -c "VACUUM ANALYZE items" -c "VACUUM ANALYZE items_g" -c "VACUUM ANALYZE queries"
}

# Busy and total clock ticks of the whole host (/proc/stat's cpu line).
host_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
# The service's CPU ticks so far (all its threads).
service_ticks() { awk '{ print $14 + $15 }' "/proc/$(q -c "SELECT pid FROM gknn_service_status()")/stat"; }
counters() { q -F ' ' -c "SELECT requests, batches, busy_ms FROM gknn_service_status()"; }

# cell NAME SQL SETTINGS CLIENTS: one table row's cells.
cell() {
  local sql=$2 settings=$3 c=$4 h0 h1 s0 s1 c0 c1 tps lat
  printf '\\set q random(0, 199)\n%s\n' "$sql" >"$out/query.sql"
  read -r -a h0 < <(host_ticks)
  s0=$(service_ticks)
  read -r -a c0 < <(counters)
  PGOPTIONS="$settings" /usr/bin/time -f '%U %S' -o "$out/pgbench.time" \
    pgbench -n -M prepared -f "$out/query.sql" -c "$c" -j "$c" -T "$secs" >"$out/pgbench.log" 2>&1 ||
    { echo "pgbench failed: $(tail -n 3 "$out/pgbench.log" | tr '\n' ' ')" >&2; printf ' failed |'; return 0; }
  read -r -a h1 < <(host_ticks)
  s1=$(service_ticks)
  read -r -a c1 < <(counters)
  read -r tps lat < <(awk '/latency average/ { l = $4 } /^tps/ { t = $3 } END { print t, l }' "$out/pgbench.log")
  awk -v tps="$tps" -v lat="$lat" -v hz="$(getconf CLK_TCK)" -v cores="$(nproc)" \
    -v busy=$((h1[0] - h0[0])) -v total=$((h1[1] - h0[1])) -v svc=$((s1 - s0)) \
    -v bench="$(awk '{ print $1 + $2 }' "$out/pgbench.time")" \
    -v req=$((c1[0] - c0[0])) -v bat=$((c1[1] - c0[1])) -v busy_ms="$(awk -v a="${c0[2]}" -v b="${c1[2]}" 'BEGIN { print b - a }')" \
    'BEGIN {
       wall = total / hz / cores;                  # seconds the cell took
       all = busy / hz / wall; s = svc / hz / wall; p = bench / wall;
       printf " %.0f | %.3f | %.1f | %.1f | %.1f | %.1f | %s | %.2f |", tps, lat, all, s, p, all - s - p,
         (bat > 0 ? sprintf("%.1f", req / bat) : "-"), busy_ms / 1000 / wall
     }'
}

profile() {  # profile NAME SQL SETTINGS: perf over a 16-client cell
  command -v perf >/dev/null || return 0
  printf '\\set q random(0, 199)\n%s\n' "$2" >"$out/query.sql"
  PGOPTIONS="$3" pgbench -n -M prepared -f "$out/query.sql" -c 16 -j 16 -T $((secs + 2)) >/dev/null 2>&1 &
  local bg=$!
  sleep 1
  perf record -a -F 499 -o "$out/perf-$1.data" -- sleep "$secs" >/dev/null 2>&1 || true
  wait "$bg" || true
  {
    echo
    echo "### perf, 16 clients: $1 (share of samples by command, shared object)"
    echo '```'
    perf report -i "$out/perf-$1.data" --stdio --sort comm,dso 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 25
    echo '```'
  } >>"$md"
  rm -f "$out/perf-$1.data"
}

main() {
  setup
  local vec="(SELECT q FROM queries WHERE qid = :q)"
  local engines=(
    "floor: SELECT :q|SELECT :q::int AS id|"
    "floor: the query vector fetched|SELECT qid AS id FROM queries WHERE qid = :q AND q IS NOT NULL|"
    "gpu_ivfpq probes 16 refine 16|SELECT id FROM items ORDER BY emb <-> $vec LIMIT 10|-c gknn.ivfpq_probes=16 -c gknn.ivfpq_refine=16"
    "gpu_ivfpq exact|SELECT id FROM items ORDER BY emb <-> $vec LIMIT 10|-c gknn.ivfpq_exact=on"
    "gpu_graph ef 20|SELECT id FROM items_g ORDER BY emb <-> $vec LIMIT 10|-c gknn.graph_ef_search=20"
  )
  {
    echo "# Where the time goes under load, $(date -u +%F), $(q -c "SELECT device FROM gknn_service_status()"), $(nproc) cores"
    echo
    echo "N=$n, dim=$dim, ${secs} s per cell, pgbench -M prepared -j clients, one random query vector of 200"
    echo "per transaction. Cores: busy in all / the service / pgbench / the rest (backends, system)."
    echo "Batch: requests per batch the service ran; GPU s/s: its executors' busy seconds per second."
    echo
    echo "| engine | clients | QPS | ms | cores busy | service | pgbench | rest | batch | exec s/s |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  } >"$md"
  local e name sql settings c
  for e in "${engines[@]}"; do
    IFS='|' read -r name sql settings <<<"$e"
    cell "$name" "$sql" "$settings" 1 >/dev/null  # warm: images in the service
    for c in 1 16 64; do echo "| $name | $c |$(cell "$name" "$sql" "$settings" "$c")" | tee -a "$md"; done
  done
  for e in "${engines[@]:2}"; do
    IFS='|' read -r name sql settings <<<"$e"
    profile "${name// /-}" "$sql" "$settings"
  done
  {
    echo
    echo "One query alone (EXPLAIN ANALYZE, after the load):"
    echo '```'
    for e in "${engines[@]:2}"; do
      IFS='|' read -r name sql settings <<<"$e"
      echo "-- $name"
      PGOPTIONS="$settings" q -c "EXPLAIN (ANALYZE, COSTS OFF) ${sql//:q/7}" | grep -E 'Time|Wait|Batch|Index Scan|Planning'
    done
    echo '```'
  } >>"$md"
  rm -f "$out"/*.fvecs
}

main "$@"
