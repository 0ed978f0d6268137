#!/usr/bin/env bash
# What an insert costs a gpu_ivfpq index searched through the GPU service:
# each insert makes a new generation of the index, and the next search must
# bring the service's image up to it. With gknn.ivfpq_delta = on (default)
# the backend ships the changed pages' entries (a delta); with off, the
# whole image, as gknn did before its change log. Runs INSERTS times
# "INSERT one row; search" (pgbench, one client), once per setting, then a
# DELETE of 0.2% of the rows + VACUUM + search (a VACUUM that rewrites more
# pages than the change log holds, 448, reloads the image whole), and prints the service's
# counters (whole loads and their bytes, deltas and theirs) and the latency.
#
#   bench/delta-refresh.sh [ROWS [DIM [INSERTS]]]   (default 100000 128 200)
#
# Needs a server with gknn in shared_preload_libraries (PGHOST/PGPORT/PGUSER;
# GKNN_PSQL, GKNN_PGBENCH name the clients). Markdown on stdout.
set -euo pipefail
ROWS=${1:-100000}
DIM=${2:-128}
INSERTS=${3:-200}
PSQL=${GKNN_PSQL:-psql}
PGBENCH=${GKNN_PGBENCH:-pgbench}
DB=gknn_delta_bench
sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
counters() { sql -c "SELECT loads || ' ' || loaded_bytes || ' ' || deltas || ' ' || delta_bytes FROM gknn_service_status()"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" \
  -c "CREATE DATABASE $DB" >/dev/null
sql -c 'CREATE EXTENSION gknn' >/dev/null
[ "$(sql -c "SELECT state FROM gknn_service_status()")" = ready ] || {
  echo "the gknn service is not ready: $(sql -c "SELECT state, reason FROM gknn_service_status()")" >&2
  exit 1
}
# Clustered rows (64 centres), an index of sqrt(rows) lists.
lists=$(awk -v n="$ROWS" 'BEGIN { l = int(sqrt(n)); print (l < 4 ? 4 : l) }')
sql >/dev/null <<SQL
CREATE TABLE t (id bigint PRIMARY KEY, emb vector($DIM)) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, ARRAY(SELECT (i % 64) + ((i * 7919 + j * 104729) % 1009) / 1009.0
                              FROM generate_series(1, $DIM) j)::float8[]::vector
  FROM generate_series(1, $ROWS) i;
CREATE INDEX t_idx ON t USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = $lists);
SQL
cat >"$tmp/step.sql" <<SQL
\set i random(1000000000, 2000000000)
INSERT INTO t SELECT :i, ARRAY(SELECT (:i % 64) + ((:i::bigint * 31 + j * 7) % 97) / 97.0
                               FROM generate_series(1, $DIM) j)::float8[]::vector ON CONFLICT DO NOTHING;
SELECT id FROM t ORDER BY emb <-> (SELECT emb FROM t WHERE id = 1 + :i % $ROWS) LIMIT 10;
SQL
read -r l0 b0 d0 db0 <<<"$(counters)"
sql -c "SET enable_seqscan = off" -c "SELECT id FROM t ORDER BY emb <-> (SELECT emb FROM t WHERE id = 1) LIMIT 10" >/dev/null
read -r l1 b1 d1 db1 <<<"$(counters)"
image=$((b1 - b0))
echo "# delta refresh: $ROWS x $DIM rows, $lists lists, image $((image / 1024)) kB ($(sql -c "SELECT device FROM gknn_service_status()"))"
echo
echo "| gknn.ivfpq_delta | work | latency ms (mean) | whole loads | bytes shipped whole | deltas | bytes shipped as deltas | bytes per insert |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for mode in off on; do
  read -r l1 b1 d1 db1 <<<"$(counters)"
  PGOPTIONS="-c gknn.ivfpq_delta=$mode -c enable_seqscan=off" \
    "$PGBENCH" -n -c 1 -t "$INSERTS" -f "$tmp/step.sql" "$DB" >"$tmp/pgbench.log" 2>&1 || {
    cat "$tmp/pgbench.log" >&2
    exit 1
  }
  lat=$(awk '/latency average/ {print $4}' "$tmp/pgbench.log")
  read -r l2 b2 d2 db2 <<<"$(counters)"
  echo "| $mode | $INSERTS x (insert 1 row; search) | $lat | $((l2 - l1)) | $((b2 - b1)) | $((d2 - d1)) | $((db2 - db1)) | $(((b2 - b1 + db2 - db1) / INSERTS)) |"
done
for mode in off on; do
  read -r l1 b1 d1 db1 <<<"$(counters)"
  t0=$(date +%s%3N)
  sql -c "DELETE FROM t WHERE id % 500 = $([ "$mode" = off ] && echo 7 || echo 8)" -c "VACUUM t" >/dev/null
  PGOPTIONS="-c gknn.ivfpq_delta=$mode" sql -c "SET enable_seqscan = off" \
    -c "SELECT id FROM t ORDER BY emb <-> (SELECT emb FROM t WHERE id = 2) LIMIT 10" >/dev/null
  t1=$(date +%s%3N)
  read -r l2 b2 d2 db2 <<<"$(counters)"
  echo "| $mode | DELETE 0.2% + VACUUM; search | $((t1 - t0)) (once) | $((l2 - l1)) | $((b2 - b1)) | $((d2 - d1)) | $((db2 - db1)) | |"
done
"$PSQL" -X -q -d postgres -c "DROP DATABASE $DB" >/dev/null
