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
PSQL=${GKNN_PSQL:-psql}
DB=gknn_ivfpq_recall
DIR=${GKNN_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
BASE=10000
QUERIES=200
. "$(dirname "$0")/tap.sh"
sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

if [ ! -f "$DIR/train-images-idx3-ubyte.gz" ] || [ ! -f "$DIR/t10k-images-idx3-ubyte.gz" ]; then
  echo "1..0 # SKIP no Fashion-MNIST in $DIR (Debian package dataset-fashion-mnist)"
  exit 0
fi

# idx3 images -> COPY text rows "id<TAB>[p0,p1,...]" (raw pixels 0..255),
# read by the benchmark's own reader (bench/datasets/prepare.py).
to_copy() {  # file rows out
  python3 - "$1" "$2" "$(dirname "$0")/../bench/datasets" >"$3" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from prepare import read_idx_images
n, dim, pixels = read_idx_images(sys.argv[1])
for i in range(min(int(sys.argv[2]), n)):
    print(f"{i}\t[{','.join(map(str, pixels[i * dim:(i + 1) * dim]))}]")
PY
}

"$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" \
  -c "CREATE DATABASE $DB" >/dev/null
sql -c 'CREATE EXTENSION gknn' >/dev/null
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
[ -n "${KEEP:-}" ] || "$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null
tap_end
