#!/usr/bin/env bash
# `make demo`: gknn at work on Fashion-MNIST (60,000 training images of 784
# pixels), from plain SQL.
#
# Installs what it needs (apt), builds and installs gknn, starts a cluster in
# .demo/ with shared_preload_libraries = gknn (the GPU service; the data are
# kept for the next run and loaded only once, the index is built every run),
# then
#   1. says who answers index searches: the GPU service on a host with a GPU,
#      else (gknn_service_status() gives the reason) each backend's CPU path,
#      with the same results;
#   2. builds a gpu_ivfpq index on the table, timed, and prints its shape and
#      size;
#   3. shows the plan (an Index Scan using it) and the ten nearest neighbours
#      of a test image through it, with the time of a first and a second run;
#   4. computes the exact answer for $QUERIES test images (index scans off) and
#      prints recall@10 and time per query of the index at a few settings and
#      with gknn.ivfpq_exact = on;
#   5. prints one line of gknn_service_status();
# then stops the cluster.
#
# Environment: GKNN_DEMO_INDEX (which t10k test image, default 0),
# GKNN_DEVICE (auto|gpu|cpu, passed as -c gknn.device=...; gpu stops at once,
# with the service's reason, where no GPU serves), GKNN_SKIP_APT=1,
# GKNN_SKIP_BUILD=1 (use the gknn already installed).
set -euo pipefail
cd "$(dirname "$0")/.."
. regress/cluster.sh

DEMO_DIR=.demo
DB=gknn_demo
INDEX=${GKNN_DEMO_INDEX:-0}
LOADER=scripts/load_fashion_mnist.py
ROWS=60000
QUERIES=20 # test images #0.. whose recall is measured
# The index, as the benchmarks build it. On the CPU path of a 2-core VM the
# build takes 14-20 s when the VM is idle (up to 50 s under other load);
# fewer k-means iterations (kmeans_iters = 5, training_sample = 10000) saved
# only 2-6 s there, so the defaults stay.
INDEX_OPTIONS='lists = 256, m = 49'
PROBES=16
REFINE=16

psql_demo() { cluster_psql -d "$DB" "$@"; }

prepare() {
  [ "${GKNN_SKIP_APT:-0}" = 1 ] ||
    ensure_packages postgresql-15 postgresql-server-dev-15 dataset-fashion-mnist \
      python3 cmake g++ make
  # GKNN_SKIP_BUILD=1: gknn is installed already (a GPU host without compilers).
  [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && return 0
  make -j"$(nproc)" >"$DEMO_DIR/build.log" 2>&1 || { tail -n 40 "$DEMO_DIR/build.log"; return 1; }
  as_root make install >>"$DEMO_DIR/build.log" 2>&1 || { tail -n 20 "$DEMO_DIR/build.log"; return 1; }
}

# The extension in the demo database, recreated (with the data) when the
# installed script changed since it was created: its objects would be stale.
ensure_extension() {
  local script stamp=$DEMO_DIR/extension.md5 sum
  script=$(pg_config --sharedir)/extension/gknn--$(sed -n "s/^default_version = '\(.*\)'/\1/p" gknn.control).sql
  sum=$(md5sum <"$script")
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" != "$sum" ]; then
    echo "gknn's install script changed: recreating the demo database"
    cluster_psql -q -d postgres -c "DROP DATABASE IF EXISTS $DB"
  fi
  if [ -z "$(cluster_psql -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]; then
    cluster_psql -q -d postgres -c "CREATE DATABASE $DB"
  fi
  psql_demo -q -c 'SET client_min_messages = warning' -c 'CREATE EXTENSION IF NOT EXISTS gknn'
  echo "$sum" >"$stamp"
}

rows_of() {
  if [ -z "$(psql_demo -Atc "SELECT to_regclass('$1')")" ]; then
    echo 0
  else
    psql_demo -Atc "SELECT count(*) FROM $1"
  fi
}

# The training set through COPY, in one transaction: a run stopped halfway
# leaves no partial table behind.
load() {
  if [ "$(rows_of fashion)" = "$ROWS" ]; then
    echo "fashion: $ROWS rows already loaded"
    return 0
  fi
  echo "loading Fashion-MNIST train set ($ROWS x 784) ..."
  local start=$SECONDS
  python3 "$LOADER" rows --set train | psql_demo -q -1 -c 'SET client_min_messages = warning' \
    -c 'DROP TABLE IF EXISTS fashion, fashion_class' \
    -c 'CREATE TABLE fashion (id int PRIMARY KEY, label int NOT NULL, emb vector(784) NOT NULL)' \
    -c 'CREATE TABLE fashion_class (label int PRIMARY KEY, name text NOT NULL)' \
    -c '\copy fashion FROM pstdin'
  python3 "$LOADER" classes | psql_demo -q -c '\copy fashion_class FROM pstdin'
  psql_demo -q -c 'VACUUM ANALYZE fashion'
  [ "$(rows_of fashion)" = "$ROWS" ] || { echo "fashion: expected $ROWS rows after loading" >&2; return 1; }
  echo "loaded in $((SECONDS - start)) s"
}

# The first $QUERIES test images, the queries whose recall is measured.
load_queries() {
  [ "$(rows_of fashion_query)" = "$QUERIES" ] && return 0
  python3 "$LOADER" rows --set t10k --limit "$QUERIES" | psql_demo -q -1 -c 'SET client_min_messages = warning' \
    -c 'DROP TABLE IF EXISTS fashion_query' \
    -c 'CREATE TABLE fashion_query (id int PRIMARY KEY, label int NOT NULL, emb vector(784) NOT NULL)' \
    -c '\copy fashion_query FROM pstdin'
}

# Who answers index searches. The service settles within a second of the
# server's start (it looks for GPUs); until then it says "starting".
service_report() {
  local state device reason tries=0
  while :; do
    IFS=$'\t' read -r state device reason < <(psql_demo -AtF $'\t' \
      -c "SELECT state, coalesce(device, ''), coalesce(reason, '') FROM gknn_service_status()")
    if [ "$state" != starting ] || ((++tries > 50)); then break; fi
    sleep 0.2
  done
  echo
  local on_gpu=0
  [ "$state" = ready ] && [ "$device" != cpu ] && on_gpu=1
  if [ "${GKNN_DEVICE:-auto}" = gpu ] && ((!on_gpu)); then
    echo "GKNN_DEVICE=gpu, but no GPU serves the index: gknn service $state${reason:+ ($reason)}" >&2
    return 1
  elif [ "${GKNN_DEVICE:-auto}" = cpu ]; then
    echo "gknn.device = cpu: index searches run on each backend's CPU (service: $state${reason:+, $reason})"
  elif ((on_gpu)); then
    echo "gknn GPU service: ready on $device; it serves the index searches of every session"
  else
    echo "gknn GPU service: $state${reason:+ ($reason)}"
    echo "  index searches run on each backend's CPU path instead, with the same results"
  fi
}

# CREATE INDEX, timed by psql, then the index's shape and size.
build_index() {
  echo
  echo "building the index (device: $(psql_demo -At -c 'SELECT gknn_current_device()')):"
  local sql="CREATE INDEX fashion_emb_idx ON fashion USING gpu_ivfpq (emb vector_l2_ops) WITH ($INDEX_OPTIONS)"
  echo "  $sql"
  psql_demo -q -c 'SET client_min_messages = warning' -c 'DROP INDEX IF EXISTS fashion_emb_idx' -c '\timing on' -c "$sql" | sed 's/^/  /'
  psql_demo -At <<'SQL'
SELECT format('  %s entries in %s lists, %s sub-quantizers of %s bits, vectors stored for re-ranking: %s (%s pages; the table: %s)',
              i.entries, i.lists, i.m, i.nbits, pg_size_pretty(pg_relation_size('fashion_emb_idx')),
              i.pages, pg_size_pretty(pg_table_size('fashion')))
FROM gknn_ivfpq_info('fashion_emb_idx') i;
SQL
}

# The plan of the kNN query, its 784-value literal shortened.
show_plan() {
  echo
  echo "plan (EXPLAIN (COSTS OFF)):"
  psql_demo -At -v q="$1" <<<"EXPLAIN (COSTS OFF) SELECT id FROM fashion ORDER BY emb <-> :'q' LIMIT 10" |
    sed -E "s/'\[[0-9,.e+-]{40,}\]'/'[...784 values...]'/; s/^/  /"
}

# The query through the index (the first run in a session also loads the
# index: into the backend on the CPU path, onto the GPU in the service the
# first time any session needs it), then the recall table, in one session.
query() {
  local line label name vec
  line=$(python3 "$LOADER" query --set t10k --index "$INDEX")
  IFS=$'\t' read -r label name vec <<<"$line"
  echo
  echo "query: Fashion-MNIST test image #$INDEX, label $label ($name), gknn.ivfpq_probes = $PROBES, gknn.ivfpq_refine = $REFINE"
  show_plan "$vec"
  psql_demo -q -v q="$vec" -v probes="$PROBES" -v refine="$REFINE" -v queries="$QUERIES" -v last="$((QUERIES - 1))" <<'SQL'
SET gknn.ivfpq_probes = :probes;
SET gknn.ivfpq_refine = :refine;
\timing on
\echo first run (loads the index):
-- The kNN query itself is the subquery; the join only adds class names.
SELECT n.id, n.label, c.name AS class, round(n.distance::numeric, 3) AS distance
FROM (SELECT id, label, emb <-> :'q' AS distance
      FROM fashion ORDER BY emb <-> :'q' LIMIT 10) n
JOIN fashion_class c USING (label)
ORDER BY n.distance, n.id \g /dev/null
\echo second run:
\g
\timing off

-- The answers of each way of searching, for every test image, and the time
-- each took for all of them (one statement, planned afresh for each setting).
CREATE TEMP TABLE answer (search text, query int, id int);
CREATE TEMP TABLE took (n serial, search text, ms float8);
CREATE FUNCTION pg_temp.search_all(search text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE 'INSERT INTO answer SELECT $1, q.id, n.id FROM fashion_query q
           CROSS JOIN LATERAL (SELECT id FROM fashion ORDER BY emb <-> q.emb LIMIT 10) n' USING search;
  INSERT INTO took (search, ms) VALUES (search, extract(epoch FROM clock_timestamp() - t0) * 1000);
END $$;

\echo
\echo recall@10 against the exact answer, test images #0 to #:last, and time per query:
\set exact 'exact (index scans off)'
BEGIN;
SET LOCAL enable_indexscan = off;
SELECT pg_temp.search_all(:'exact') \g /dev/null
COMMIT;
BEGIN;
SET LOCAL gknn.ivfpq_probes = 1;
SET LOCAL gknn.ivfpq_refine = 1;
SELECT pg_temp.search_all('index, probes 1, refine 1') \g /dev/null
SET LOCAL gknn.ivfpq_probes = 4;
SET LOCAL gknn.ivfpq_refine = 4;
SELECT pg_temp.search_all('index, probes 4, refine 4') \g /dev/null
COMMIT;
SELECT pg_temp.search_all(format('index, probes %s, refine %s', :probes, :refine)) \g /dev/null
SET gknn.ivfpq_exact = on;
SELECT pg_temp.search_all('index, gknn.ivfpq_exact = on') \g /dev/null
RESET gknn.ivfpq_exact;

SELECT t.search, round(count(e.id)::numeric / (10 * :queries), 3) AS "recall@10",
       round((t.ms / :queries)::numeric, 1) AS "ms per query"
FROM took t
JOIN answer a USING (search)
LEFT JOIN answer e ON e.search = :'exact' AND e.query = a.query AND e.id = a.id
GROUP BY t.n, t.search, t.ms
ORDER BY t.n;
SQL
}

service_line() {
  psql_demo -At <<'SQL'
SELECT format('gknn_service_status(): state %s, device %s, searches %s, batches %s, images %s',
              state, coalesce(device, '-'), coalesce(searches, 0), coalesce(batches, 0), coalesce(images, 0))
FROM gknn_service_status();
SQL
}

main() {
  mkdir -p "$DEMO_DIR"
  [ -z "${GKNN_DEVICE:-}" ] || export PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c gknn.device=$GKNN_DEVICE"
  prepare
  cluster_start "$DEMO_DIR" shared_preload_libraries=gknn
  ensure_extension
  load
  load_queries
  service_report
  build_index
  query
  service_line
  cluster_stop
}

main "$@"
