#!/usr/bin/env bash
# The ORDER BY distance an ordered scan's rows would have recomputed
# (extension/am/ordered_projection.cpp), measured: one local server (no
# GPU, no service: each backend searches on its CPU), a gpu_graph index on
# N x DIM synthetic vectors, pgbench (1 client, 5 s a cell, two rounds) of
# the top-level query (the planner hook's case: the distance becomes a NULL)
# and the same query wrapped in a subquery (the hook leaves it: computed for
# every returned row), LIMIT 10 and 100. Prints "cell: latency average".
#
#   bench/ordered-projection-ab.sh [N=10000] [DIM=784]
#
# Needs gknn installed into the local PostgreSQL, build/bench (gknn-synth,
# gknn-load) and pgbench.
set -euo pipefail
n=${1:-10000} dim=${2:-784}
cd "$(dirname "$0")/.."
. regress/cluster.sh
cluster_start_temp
out=$(mktemp -d)
chmod 777 "$out"
build/bench/gknn-synth --base "$out/base.fvecs" --queries "$out/q.fvecs" --n "$n" --nq 200 --dim "$dim" \
  --clusters 50 >/dev/null
psql -X -q -c "CREATE EXTENSION gknn" -c "CREATE TABLE items_g (id integer, emb vector($dim))" \
  -c "CREATE TABLE queries (qid integer, q vector($dim))"
build/bench/gknn-load --base "$out/base.fvecs" --table items_g --columns 'id, emb' >/dev/null 2>&1
build/bench/gknn-load --base "$out/q.fvecs" --table queries --columns 'qid, q' >/dev/null 2>&1
psql -X -q -c "CREATE INDEX ON items_g USING gpu_graph (emb vector_l2_ops) WITH (degree = 32)" \
  -c "CREATE UNIQUE INDEX ON queries (qid)" -c "VACUUM ANALYZE items_g" -c "VACUUM ANALYZE queries"
vec="(SELECT q FROM queries WHERE qid = :q)"
for lim in 10 100; do
  printf '\\set q random(0, 199)\nSELECT id FROM items_g ORDER BY emb <-> %s LIMIT %s;\n' "$vec" $lim >"$out/hook$lim.sql"
  printf '\\set q random(0, 199)\nSELECT id FROM (SELECT id FROM items_g ORDER BY emb <-> %s LIMIT %s) s;\n' \
    "$vec" $lim >"$out/wrapped$lim.sql"
done
chmod 644 "$out"/*.sql
for round in 1 2; do
  for f in wrapped10 hook10 wrapped100 hook100; do
    echo "round $round, $f: $(PGOPTIONS='-c gknn.graph_ef_search=20' pgbench -n -M prepared -f "$out/$f.sql" \
      -c 1 -j 1 -T 5 2>&1 | grep -E 'latency average')"
  done
done
rm -rf "$out"
