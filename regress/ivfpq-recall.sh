#!/usr/bin/env bash
# gpu_ivfpq's recall on a real dataset, as TAP, against a running server
# (PGHOST/PGPORT/PGUSER): Fashion-MNIST from Debian's dataset-fashion-mnist
# (the first 10,000 training images are the table, the first 200 test images
# the queries, L2), an index WITH (lists = 100, m = 49), and recall@10
# against exact search at the settings README's "The gpu_ivfpq index" names,
# each asserted with a floor it reaches. Training is seeded and the CPU and
# GPU paths compute the same index, so the recall is the same on both.
# A returned row counts as a hit when its distance is within the 10th exact
# distance (ties at the boundary may be broken either way).
# Used by regress/run-all.sh; skipped (TAP SKIP) without the dataset.
#
#   regress/ivfpq-recall.sh   (GKNN_PSQL names psql; GKNN_FMNIST_DIR the idx files)
set -uo pipefail
DB=gknn_ivfpq_recall
BASE=10000
QUERIES=200
. "$(dirname "$0")/live-lib.sh"
. "$(dirname "$0")/fmnist.sh"
fmnist_require
fresh_gknn_db
to_copy "$DIR/train-images-idx3-ubyte.gz" "$BASE" "$tmp/base.tsv"
to_copy "$DIR/t10k-images-idx3-ubyte.gz" "$QUERIES" "$tmp/queries.tsv"
sql -c "CREATE TABLE fm (id int PRIMARY KEY, emb vector(784))" -c "\\copy fm FROM '$tmp/base.tsv'" \
  -c "CREATE TABLE fq (qid int PRIMARY KEY, q vector(784))" -c "\\copy fq FROM '$tmp/queries.tsv'" \
  -c "ANALYZE fm" -c "ANALYZE fq" >/dev/null

# The exact 10th distance of every query (the index not built yet).
sql -c "CREATE TABLE truth AS SELECT qid, (SELECT emb <-> q FROM fm ORDER BY emb <-> q LIMIT 1 OFFSET 9) AS kth FROM fq" \
  >/dev/null
check "gpu_ivfpq builds on Fashion-MNIST (10,000 x 784)" \
  sql -c "CREATE INDEX fm_ivfpq ON fm USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 100, m = 49)"

# recall@10 of the queries.
RECALL_SQL="SELECT round(avg(hits) / 10, 3) FROM (
  SELECT (SELECT count(*) FROM (SELECT emb <-> q AS d FROM fm ORDER BY emb <-> q LIMIT 10) r
          WHERE r.d <= t.kth * (1 + 1e-6)) AS hits
  FROM fq JOIN truth t USING (qid)) s"
# With more probes and candidates the index costs more than sorting 10,000
# rows, and the planner would answer exactly: sorting and GpuTopK are off, so
# every setting measures the index (at_least checks the plan too).
at_setting() {  # probes refine SQL
  sql -c "SET enable_sort = off; SET gknn.enable_topk = off; SET gknn.ivfpq_probes = $1; SET gknn.ivfpq_refine = $2" \
    -c "$3"
}
uses_index() {  # probes refine
  local plan
  plan=$(at_setting "$1" "$2" "EXPLAIN (COSTS OFF) $RECALL_SQL") || return 1
  grep -q 'Index Scan using fm_ivfpq' <<<"$plan" || { echo "$plan"; return 1; }
}
at_least() {  # probes refine floor
  local got
  uses_index "$1" "$2" || return 1
  got=$(at_setting "$1" "$2" "$RECALL_SQL") || return 1
  echo "recall@10 = $got at probes $1, refine $2 (floor $3)"
  python3 -c "import sys; sys.exit(0 if float('$got') >= $3 else 1)"
}
check "recall@10 >= 0.55 at probes 1, refine 1" at_least 1 1 0.55
check "recall@10 >= 0.95 at probes 4, refine 4" at_least 4 4 0.95
check "recall@10 >= 0.98 at probes 8, refine 4" at_least 8 4 0.98
check "recall@10 >= 0.995 at probes 16, refine 16" at_least 16 16 0.995
check "recall@10 = 1 with every list probed and refine 1000" at_least 100 1000 1.0
[ -n "${KEEP:-}" ] || drop_db
tap_end
