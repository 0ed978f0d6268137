#!/usr/bin/env bash
# `make demo`: the ten nearest neighbours of a Fashion-MNIST test image among
# the 60,000 training images, found by gknn from plain SQL.
#
# Installs what it needs (apt), builds and installs gknn, starts a cluster in
# .demo/ (kept for the next run; the data are loaded only once), runs
#   SELECT id, label, emb <-> $q AS distance FROM fashion ORDER BY emb <-> $q LIMIT 10
# and prints the rows with their class names and the query time, then stops
# the cluster.
#
# Environment: GKNN_DEMO_INDEX (which t10k test image, default 0),
# GKNN_DEVICE (auto|gpu|cpu, passed as -c gknn.device=...), GKNN_SKIP_APT=1.
set -euo pipefail
cd "$(dirname "$0")/.."
. regress/cluster.sh

DEMO_DIR=.demo
DB=gknn_demo
INDEX=${GKNN_DEMO_INDEX:-0}
LOADER=scripts/load_fashion_mnist.py
ROWS=60000

psql_demo() { cluster_psql -d "$DB" "$@"; }

prepare() {
  [ "${GKNN_SKIP_APT:-0}" = 1 ] ||
    ensure_packages postgresql-15 postgresql-server-dev-15 dataset-fashion-mnist \
      python3 cmake g++ make
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

loaded_rows() {
  if [ -z "$(psql_demo -Atc "SELECT to_regclass('fashion')")" ]; then
    echo 0
  else
    psql_demo -Atc 'SELECT count(*) FROM fashion'
  fi
}

# The training set through COPY, in one transaction: a run stopped halfway
# leaves no partial table behind.
load() {
  if [ "$(loaded_rows)" = "$ROWS" ]; then
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
  [ "$(loaded_rows)" = "$ROWS" ] || { echo "fashion: expected $ROWS rows after loading" >&2; return 1; }
  echo "loaded in $((SECONDS - start)) s"
}

# The first run in a session also loads gknn (and, on a GPU, initialises
# CUDA); it is timed apart from the second, whose rows are shown.
query() {
  local line label name vec
  line=$(python3 "$LOADER" query --set t10k --index "$INDEX")
  IFS=$'\t' read -r label name vec <<<"$line"
  echo
  echo "query: Fashion-MNIST test image #$INDEX, label $label ($name)"
  echo "device: $(psql_demo -qAt -c "LOAD 'gknn'" -c "SHOW gknn.device")"
  # The kNN query itself is the subquery; the join only adds class names.
  psql_demo -q -v q="$vec" <<'SQL'
\timing on
\echo first run:
SELECT n.id, n.label, c.name AS class, round(n.distance::numeric, 3) AS distance
FROM (SELECT id, label, emb <-> :'q' AS distance
      FROM fashion ORDER BY emb <-> :'q' LIMIT 10) n
JOIN fashion_class c USING (label)
ORDER BY n.distance, n.id \g /dev/null
\echo second run:
\g
SQL
}

main() {
  mkdir -p "$DEMO_DIR"
  [ -z "${GKNN_DEVICE:-}" ] || export PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c gknn.device=$GKNN_DEVICE"
  prepare
  cluster_start "$DEMO_DIR"
  ensure_extension
  load
  query
  cluster_stop
}

main "$@"
