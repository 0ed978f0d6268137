#!/usr/bin/env bash
# Where a lone gpu_graph query's time goes on the GPU host: the server
# (bench/gpu-host-bench.sh OUT server), a gpu_graph index over 60,000 x 784
# synthetic vectors, pgbench at one client for three statements (SELECT 1;
# the query vector fetched; the search, ef 20), the service's busy time per
# batch, then 12 EXPLAIN ANALYZE of the search (the Index Scan's first and
# last row times against the service's time).
#
#   bench/graph-explain.sh OUT     (on the GPU host, from the repository root)
set -uo pipefail
out=${1:?output folder}
timeout 60 bench/gpu-host-bench.sh "$out" server >"$out/server.out" 2>&1 || exit 1
. /tmp/gknn-pg.env
export PGDATABASE=postgres
d=$(mktemp -d)
chmod 777 "$d"
build/bench/gknn-synth --base "$d/base.fvecs" --queries "$d/q.fvecs" --n 60000 --nq 200 --dim 784 \
  --clusters 100 >/dev/null
psql -X -q -c "CREATE EXTENSION IF NOT EXISTS gknn" -c "CREATE TABLE items_g (id integer, emb vector(784))" \
  -c "CREATE TABLE queries (qid integer, q vector(784))"
build/bench/gknn-load --base "$d/base.fvecs" --table items_g --columns 'id, emb' >/dev/null
build/bench/gknn-load --base "$d/q.fvecs" --table queries --columns 'qid, q' >/dev/null
psql -X -q -c "CREATE INDEX ON items_g USING gpu_graph (emb vector_l2_ops) WITH (degree = 32)" \
  -c "CREATE UNIQUE INDEX ON queries (qid)" -c "VACUUM ANALYZE items_g" -c "VACUUM ANALYZE queries"
printf '\\set q random(0, 199)\nSELECT id FROM items_g ORDER BY emb <-> (SELECT q FROM queries WHERE qid = :q) LIMIT 10;\n' >"$d/g.sql"
printf '\\set q random(0, 199)\nSELECT qid AS id FROM queries WHERE qid = :q AND q IS NOT NULL;\n' >"$d/f.sql"
printf 'SELECT 1;\n' >"$d/one.sql"
chmod 644 "$d"/*.sql
for f in one f g; do
  echo "== $f"
  PGOPTIONS="-c gknn.graph_ef_search=20" pgbench -n -M prepared -f "$d/$f.sql" -c 1 -j 1 -T 4 2>&1 |
    grep -E 'latency average|tps'
done
psql -X -c "SELECT requests, batches, busy_ms, busy_ms / nullif(batches, 0) AS ms_per_batch FROM gknn_service_status()"
{
  echo "SET gknn.graph_ef_search = 20;"
  echo "PREPARE k(int) AS SELECT id FROM items_g ORDER BY emb <-> (SELECT q FROM queries WHERE qid = \$1) LIMIT 10;"
  for i in $(seq 1 60); do echo "EXECUTE k($i) \\g /dev/null"; done
  printf "%s\n" "\\timing on"
  for i in $(seq 1 12); do echo "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE k($((i * 7)));"; done
} >"$d/ex.sql"
psql -X -f "$d/ex.sql" 2>&1 | grep -E 'Time|Wait|Index Scan|Limit'
rm -rf "$d"
