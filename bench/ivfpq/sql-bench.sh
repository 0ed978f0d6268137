#!/usr/bin/env bash
# gpu_ivfpq through SQL on a running server (issue 5, item 6): synthetic
# clustered data (gknn-synth), loaded with gknn-load, then
#   - CREATE INDEX ... USING gpu_ivfpq, timed end to end;
#   - recall@10 of 200 queries at several probes / refine settings against
#     exact search (the index switched off) of the same queries;
#   - pgbench: one client (latency p50 / p99 from the per-transaction log)
#     and 16 clients (throughput), index scan against exact search.
#
#   bench/ivfpq/sql-bench.sh OUT_DIR [N=1000000] [DIM=128] [LISTS=1024] [M=32]
#
# Environment: NQ (200) queries. Settings reach the server per session
# (SET, PGOPTIONS), also before gknn's library is loaded.
#
# Needs psql and pgbench on PATH, the connection in PGHOST / PGPORT / PGUSER /
# PGDATABASE, python3, and build/bench/gknn-synth, gknn-load, gknn-groundtruth
# (cmake -S bench -B build/bench).
set -euo pipefail
out=${1:?output folder}
n=${2:-1000000} dim=${3:-128} lists=${4:-1024} m=${5:-32} nq=${NQ:-200}
here=$(cd "$(dirname "$0")/../.." && pwd)
tools=${GKNN_BENCH_TOOLS:-$here/build/bench}
mkdir -p "$out"
log=$out/sql-bench.md
q() { psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

"$tools/gknn-synth" --base "$out/base.fvecs" --queries "$out/queries.fvecs" --n "$n" --nq "$nq" --dim "$dim" \
  --clusters 1000 >/dev/null
q <<SQL
CREATE EXTENSION IF NOT EXISTS gknn;
DROP TABLE IF EXISTS items, queries, truth;
CREATE TABLE items (id integer, emb vector($dim));
CREATE TABLE queries (qid integer, q vector($dim));
SQL
"$tools/gknn-load" --base "$out/base.fvecs" --table items --columns 'id, emb' >/dev/null
"$tools/gknn-load" --base "$out/queries.fvecs" --table queries --columns 'qid, q' >/dev/null
q -c "VACUUM ANALYZE items" -c "VACUUM ANALYZE queries"

t=$(date +%s%N)
q -c "SET maintenance_work_mem = '4GB'; CREATE INDEX items_ivfpq ON items USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = $lists, m = $m, nbits = 8)"
build_ms=$(ms_since "$t")
device=$(q -c "SELECT name FROM gknn_devices() LIMIT 1" 2>/dev/null || true)
device=${device:-cpu}

# Exact answers: gknn-groundtruth (gknn's exact search on the GPU, checked
# bit for bit against the CPU reference on 100 queries; the CPU without one).
"$tools/gknn-groundtruth" --base "$out/base.fvecs" --queries "$out/queries.fvecs" --metric l2 --k 10 \
  --ids "$out/gt.ivecs" --dist "$out/gt-dist.fvecs" --report "$out/gt-report.json" >/dev/null
python3 - "$out/gt.ivecs" >"$out/truth.tsv" <<'PY'
import array, struct, sys
data = open(sys.argv[1], "rb").read()
k = struct.unpack_from("<i", data)[0]
rows = array.array("i", data)
for q in range(len(rows) // (k + 1)):
    print(f"{q}\t{{{','.join(str(x) for x in rows[q * (k + 1) + 1:(q + 1) * (k + 1)])}}}")
PY
q -c "CREATE TABLE truth (qid integer, ids integer[])" -c "\copy truth FROM '$out/truth.tsv'"

recall() {  # probes refine -> recall@10 over the queries
  q -c "SET gknn.ivfpq_probes = $1; SET gknn.ivfpq_refine = $2;
        SELECT round(avg(hit)::numeric, 3) FROM (
          SELECT (SELECT count(*) FROM unnest(t.ids) x WHERE x = ANY (
                   ARRAY(SELECT id FROM items ORDER BY emb <-> qq.q LIMIT 10)))::float8 / 10 AS hit
          FROM queries qq JOIN truth t USING (qid)) s" | tail -n 1
}

cat >"$out/query.sql" <<SQL
\\set qid random(0, $((nq - 1)))
SELECT id FROM items ORDER BY emb <-> (SELECT q FROM queries WHERE qid = :qid) LIMIT 10;
SQL
bench() {  # clients options... -> "tps p50_ms p99_ms"
  local c=$1
  shift
  rm -f "$out"/pgbench_log.*
  (cd "$out" && PGOPTIONS="$*" pgbench -n -f query.sql -c "$c" -j "$c" -T 10 -l --log-prefix=pgbench_log >"$out/pgbench-$c.txt" 2>&1)
  local tps
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out/pgbench-$c.txt" | head -n 1)
  cat "$out"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v tps="$tps" '
    { v[NR] = $1 } END { printf "%s %.2f %.2f", tps, v[int(NR * 0.5) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }'
}

{
  echo "# gpu_ivfpq through SQL ($device, $(date -u +%F))"
  echo
  echo "Synthetic clustered data (gknn-synth, 1000 clusters), n = $n, dim = $dim; index WITH (lists = $lists, m = $m, nbits = 8); $nq queries, k = 10."
  echo "Command: bench/ivfpq/sql-bench.sh OUT $n $dim $lists $m"
  echo
  echo "CREATE INDEX (end to end, gknn.device = $(q -c "LOAD 'gknn'" -c 'SHOW gknn.device')): $build_ms ms"
  echo
  echo "| probes | refine | recall@10 |"
  echo "|---:|---:|---:|"
  for pr in 1 4 16; do for rf in 1 4 10; do echo "| $pr | $rf | $(recall $pr $rf) |"; done; done
  echo
  echo "pgbench, 10 s each (probes 16, refine 10 for the index):"
  echo
  echo "| plan | clients | tps | p50 ms | p99 ms |"
  echo "|---|---:|---:|---:|---:|"
  for c in 1 16; do
    read -r tps p50 p99 <<<"$(bench "$c" -c gknn.ivfpq_probes=16 -c gknn.ivfpq_refine=10)"
    echo "| gpu_ivfpq | $c | $tps | $p50 | $p99 |"
    read -r tps p50 p99 <<<"$(bench "$c" -c enable_indexscan=off)"
    echo "| exact (index off) | $c | $tps | $p50 | $p99 |"
  done
} | tee "$log"
rm -f "$out"/*.fvecs "$out"/*.ivecs "$out"/pgbench_log.*
