#!/usr/bin/env bash
# The GPU service's round trip under load, with and without polling
# (gknn.service_poll_us): pgbench over a gpu_ivfpq and a gpu_graph index on
# synthetic clustered data, 1 / 16 / 64 clients, each poll setting in the
# same run; with the service's CPU time, so that what polling costs shows
# beside what it gains.
#
#   bench/service-poll.sh OUT_DIR [N=60000] [DIM=784] [POLLS="0 1000"]
#
# Needs a running server with gknn preloaded (its service on), psql and
# pgbench on PATH, the connection in PGHOST / PGPORT / PGUSER / PGDATABASE,
# and build/bench/gknn-synth, gknn-load (cmake -S bench -B build/bench).
# Writes OUT_DIR/service-poll.md.
set -euo pipefail
out=${1:?output folder}
n=${2:-60000} dim=${3:-784} polls=${4:-0 1000}
here=$(cd "$(dirname "$0")/.." && pwd)
tools=${GKNN_BENCH_TOOLS:-$here/build/bench}
secs=${SECS:-5}
mkdir -p "$out"
md=$out/service-poll.md
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
    -c "VACUUM ANALYZE items" -c "VACUUM ANALYZE items_g" -c "VACUUM ANALYZE queries"
}

# The service's CPU time so far (clock ticks, from /proc).
service_ticks() {
  local pid
  pid=$(q -c "SELECT pid FROM gknn_service_status()")
  awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0
}

# run TABLE SETTINGS CLIENTS: "tps | mean latency ms | service CPU s per s"
run() {
  local table=$1 settings=$2 c=$3 t0 t1 tps lat
  printf '\\set q random(0, 199)\nSELECT id FROM %s ORDER BY emb <-> (SELECT q FROM queries WHERE qid = :q) LIMIT 10;\n' \
    "$table" >"$out/query.sql"
  t0=$(service_ticks)
  if ! PGOPTIONS="$settings" pgbench -n -M prepared -f "$out/query.sql" -c "$c" -j "$c" -T "$secs" \
    >"$out/pgbench.log" 2>&1 || grep -q 'failed: [1-9]' "$out/pgbench.log"; then
    echo "pgbench failed ($c clients): $(tail -n 3 "$out/pgbench.log" | tr '\n' ' ')" >&2
    printf 'failed | - | -'
    return 0
  fi
  read -r tps lat < <(awk '/latency average/ { l = $4 } /^tps/ { t = $3 } END { print t, l }' "$out/pgbench.log")
  t1=$(service_ticks)
  awk -v tps="$tps" -v lat="$lat" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v s="$secs" \
    'BEGIN { printf "%.0f | %.3f | %.2f", tps, lat, ticks / hz / s }'
}

main() {
  setup
  {
    echo "# gknn service polling, $(date -u +%F), $(q -c "SELECT name FROM gknn_devices() LIMIT 1" || echo cpu)"
    echo
    echo "N=$n, dim=$dim, ${secs} s per cell, pgbench -M prepared, one random query of 200 per transaction."
    echo "Per client count: QPS, mean latency (ms), the service's CPU seconds per second."
    echo
    echo "| index | gknn.service_poll_us | QPS, 1 client | ms | service CPU | QPS, 16 clients | ms | service CPU | QPS, 64 clients | ms | service CPU |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  } >"$md"
  local poll table settings row c
  for poll in $polls; do
    q -c "ALTER SYSTEM SET gknn.service_poll_us = $poll" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 1
    for table in items items_g; do
      settings="-c gknn.ivfpq_probes=16 -c gknn.ivfpq_refine=16 -c gknn.graph_ef_search=64"
      run "$table" "$settings" 1 >/dev/null  # warm: the image shipped to the service
      row="| $([ "$table" = items ] && echo 'gpu_ivfpq (probes 16, refine 16)' || echo 'gpu_graph (ef 64)') | $poll"
      for c in 1 16 64; do row="$row | $(run "$table" "$settings" "$c")"; done
      echo "$row |" | tee -a "$md"
    done
  done
  q -c "ALTER SYSTEM RESET gknn.service_poll_us" -c "SELECT pg_reload_conf()" >/dev/null
  {
    echo
    echo '```'
    q -x -c "SELECT requests, searches, batches, mean_batch, busy_ms, images, memory_used FROM gknn_service_status()"
    echo '```'
  } >>"$md"
  rm -f "$out"/*.fvecs
}

main "$@"
