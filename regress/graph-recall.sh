#!/usr/bin/env bash
# gpu_graph's recall on a real dataset, as TAP, against a running server
# (PGHOST/PGPORT/PGUSER): Fashion-MNIST from Debian's dataset-fashion-mnist
# (the first $BASE training images are the table, the first 200 test images
# the queries, L2), an index WITH (degree = 32), and recall@10 against the
# exact search at the settings README's "The gpu_graph index" names, each
# asserted with a floor it reaches: freshly built, after 20 % more rows were
# inserted, and after a third of the rows were deleted and VACUUM repaired
# the graph. The CPU build is deterministic (fixed seed), so these numbers
# are the same on every run. A returned row counts as a hit when its
# distance is within the 10th exact distance.
# Used by regress/run-all.sh; skipped (TAP SKIP) without the dataset.
#
#   regress/graph-recall.sh   (GKNN_PSQL names psql; GKNN_FMNIST_DIR the idx files)
set -uo pipefail
DB=gknn_graph_recall
BASE=${GKNN_GRAPH_BASE:-10000}
INSERTS=$((BASE / 5))
QUERIES=200
. "$(dirname "$0")/live-lib.sh"
. "$(dirname "$0")/fmnist.sh"
fmnist_require
fresh_gknn_db
to_copy "$DIR/train-images-idx3-ubyte.gz" "$((BASE + INSERTS))" "$tmp/all.tsv"
head -n "$BASE" "$tmp/all.tsv" >"$tmp/base.tsv"
tail -n "$INSERTS" "$tmp/all.tsv" >"$tmp/more.tsv"
to_copy "$DIR/t10k-images-idx3-ubyte.gz" "$QUERIES" "$tmp/queries.tsv"
sql -c "CREATE TABLE fm (id int PRIMARY KEY, emb vector(784))" -c "\\copy fm FROM '$tmp/base.tsv'" \
  -c "CREATE TABLE fq (qid int PRIMARY KEY, q vector(784))" -c "\\copy fq FROM '$tmp/queries.tsv'" \
  -c "ANALYZE fm" -c "ANALYZE fq" >/dev/null

# The exact 10th distance of every query, for the table as it is now.
truth() {
  sql -c "SET enable_indexscan = off" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS truth" \
    -c "CREATE TABLE truth AS SELECT qid, (SELECT emb <-> q FROM fm ORDER BY emb <-> q LIMIT 1 OFFSET 9) AS kth FROM fq" \
    >/dev/null
}
RECALL_SQL="SELECT round(avg(hits) / 10, 3) FROM (
  SELECT (SELECT count(*) FROM (SELECT emb <-> q AS d FROM fm ORDER BY emb <-> q LIMIT 10) r
          WHERE r.d <= t.kth * (1 + 1e-6)) AS hits
  FROM fq JOIN truth t USING (qid)) s"
# Sorting and GpuTopK are off, so every setting measures the index
# (at_least checks the plan too). ef 0: the GUC's default.
at_setting() {  # ef SQL
  local set="SET enable_sort = off; SET gknn.enable_topk = off"
  [ "$1" = 0 ] || set="$set; SET gknn.graph_ef_search = $1"
  sql -c "$set" -c "$2"
}
at_least() {  # ef floor
  local plan got
  plan=$(at_setting "$1" "EXPLAIN (COSTS OFF) $RECALL_SQL") || return 1
  grep -q 'Index Scan using fm_graph' <<<"$plan" || { echo "$plan"; return 1; }
  got=$(at_setting "$1" "$RECALL_SQL") || return 1
  echo "recall@10 = $got at ef_search $1 (floor $2)"
  python3 -c "import sys; sys.exit(0 if float('$got') >= $2 else 1)"
}

# GKNN_GRAPH_SWEEP=1: recall@10 at several ef_search, as TAP comments.
sweep() {  # stage
  [ "${GKNN_GRAPH_SWEEP:-0}" = 1 ] || return 0
  local ef
  for ef in 10 16 24 32 40 64 128; do
    echo "# $1: recall@10 = $(at_setting "$ef" "$RECALL_SQL") at ef_search $ef"
  done
}

truth
check "gpu_graph builds on Fashion-MNIST ($BASE x 784, degree 32)" \
  sql -c "CREATE INDEX fm_graph ON fm USING gpu_graph (emb vector_l2_ops) WITH (degree = 32)"
sweep fresh
check "fresh: recall@10 >= 0.99 at ef_search 10 (the LIMIT)" at_least 10 0.99
check "fresh: recall@10 >= 0.995 at the default ef_search" at_least 0 0.995

check "$INSERTS rows inserted (20 %)" sql -c "\\copy fm FROM '$tmp/more.tsv'"
truth
sweep "after inserts"
check "after inserts: recall@10 >= 0.98 at ef_search 10" at_least 10 0.98
check "after inserts: recall@10 >= 0.995 at the default ef_search" at_least 0 0.995

check "a third of the rows deleted, VACUUM" sql -c "DELETE FROM fm WHERE id % 3 = 0" -c "VACUUM fm"
check "after VACUUM: no edge to a dead node" \
  test "$(sql -c "SELECT dead_edges FROM gknn_graph_info('fm_graph')")" = 0
truth
sweep "after VACUUM"
check "after VACUUM: recall@10 >= 0.98 at ef_search 10" at_least 10 0.98
check "after VACUUM: recall@10 >= 0.995 at the default ef_search" at_least 0 0.995
[ -n "${KEEP:-}" ] || drop_db
tap_end
