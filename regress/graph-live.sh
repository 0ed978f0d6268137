#!/usr/bin/env bash
# gpu_graph against a running server (PGHOST/PGPORT/PGUSER), as TAP:
#   concurrency: pgbench sessions inserting, searching, deleting and
#     vacuuming one indexed table at once; afterwards the index returns every
#     row once, its first rows are the exact nearest, and no list points to a
#     dead node once vacuumed;
#   crash safety: a backend inserting rows is killed with SIGKILL (the
#     postmaster resets every backend and replays WAL from the last
#     checkpoint: the build's log_newpage_range and the inserts' Generic WAL);
#     after recovery the index reads without error, finds every committed
#     row, and answers as a freshly rebuilt one (REINDEX) does.
# Used by regress/run-all.sh (after ivfpq-live: it crashes the server too).
#
#   regress/graph-live.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
PSQL=${GKNN_PSQL:-psql}
PGBENCH=${GKNN_PGBENCH:-pgbench}
DB=gknn_graph_live
. "$(dirname "$0")/tap.sh"
sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
# equal EXPECTED SQL: the query's output is EXPECTED
equal() {
  local got
  got=$(sql -c "$2") || return 1
  [ "$got" = "$1" ] || { echo "expected: $1"; echo "got: $got"; return 1; }
}
wait_ready() {  # the server accepts queries again (after crash recovery)
  local i
  for ((i = 0; i < 120; i++)); do
    "$PSQL" -X -qAt -d postgres -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

"$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" \
  -c "CREATE DATABASE $DB" >/dev/null
sql -c 'CREATE EXTENSION gknn' >/dev/null

# index_complete TABLE: every row comes out of the index once (a LIMIT above
# the row count: the scan ranks every row). index_exact TABLE: for a few
# queries, the 10 first rows of such a scan are the exact 10 nearest.
index_complete() {
  equal "$(sql -c "SELECT count(*) || '|' || count(*) FROM $1")" "
    SET enable_seqscan = off;
    SELECT count(*) || '|' || count(DISTINCT id) FROM
      (SELECT id FROM $1 ORDER BY emb <-> '[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]' LIMIT 1000000) s"
}
index_exact() {
  equal t "
    CREATE TEMP TABLE qs AS SELECT q, ARRAY(SELECT ((q * 31 + j * 17) % 101) / 101.0 FROM generate_series(1, 8) j)::float8[]::vector AS v
      FROM generate_series(1, 5) q;
    CREATE FUNCTION pg_temp.knn(v vector, idx bool) RETURNS float8[] LANGUAGE plpgsql AS \$\$
    DECLARE r float8[];
    BEGIN
      EXECUTE format('SET LOCAL enable_seqscan = %s', NOT idx); EXECUTE format('SET LOCAL enable_indexscan = %s', idx);
      EXECUTE 'SELECT (array_agg(d))[1:10] FROM (SELECT emb <-> \$1 AS d FROM $1 ORDER BY emb <-> \$1 LIMIT 1000000) s' INTO r USING v;
      RETURN r;
    END \$\$;
    SELECT bool_and(pg_temp.knn(v, true) = pg_temp.knn(v, false)) FROM qs"
}

# --- concurrency --------------------------------------------------------------
sql <<'SQL' >/dev/null
CREATE TABLE t (id bigserial PRIMARY KEY, emb vector(8));
INSERT INTO t (emb)
SELECT ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 3000) i;
CREATE INDEX t_emb ON t USING gpu_graph (emb) WITH (degree = 8);
SQL
cat >"$tmp/insert.sql" <<'SQL'
\set i random(1, 100000)
INSERT INTO t (emb) SELECT ARRAY(SELECT ((:i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector;
SQL
cat >"$tmp/query.sql" <<'SQL'
\set i random(1, 1000000)
SELECT id FROM t ORDER BY emb <-> (SELECT ARRAY(SELECT ((:i * 31 + j * 17) % 101) / 101.0 FROM generate_series(1, 8) j)::float8[]::vector) LIMIT 10;
SQL
cat >"$tmp/delete.sql" <<'SQL'
\set i random(1, 6000)
DELETE FROM t WHERE id = :i;
SQL
cat >"$tmp/vacuum.sql" <<'SQL'
VACUUM t;
SQL
check "pgbench: 4 sessions insert, search, delete and vacuum concurrently without errors" \
  "$PGBENCH" -n -c 4 -j 2 -t 150 -f "$tmp/insert.sql@10" -f "$tmp/query.sql@10" \
  -f "$tmp/delete.sql@3" -f "$tmp/vacuum.sql@1" "$DB"
check "after concurrent work the index returns every row once" index_complete t
check "after concurrent work its first rows are the exact nearest" index_exact t
sql -c 'VACUUM t' >/dev/null
check "once vacuumed: its live nodes are the table's rows, no edge to a dead node" equal t "
  SELECT live = (SELECT count(*) FROM t) AND dead_edges = 0 FROM gknn_graph_info('t_emb')"

# --- crash ---------------------------------------------------------------------
sql -c 'CHECKPOINT' >/dev/null
sql <<'SQL' >/dev/null
CREATE TABLE c (id bigserial PRIMARY KEY, emb vector(8));
INSERT INTO c (emb)
SELECT ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 2000) i;
CREATE INDEX c_emb ON c USING gpu_graph (emb) WITH (degree = 8);
CREATE PROCEDURE fill() LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..100000 LOOP
    INSERT INTO c (emb) SELECT ARRAY(SELECT ((i * 31 + j * 7) % 997) / 997.0 FROM generate_series(1, 8) j)::float8[]::vector
      FROM generate_series(1, 5);
    IF i % 3 = 0 THEN COMMIT; END IF;
  END LOOP;
END $$;
SQL
# The index build and these inserts are only in WAL (no checkpoint since).
PGAPPNAME=graph_filler "$PSQL" -X -q -d "$DB" -c 'CALL fill()' >/dev/null 2>&1 &
filler=$!
sleep 3
pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'graph_filler'")
check "a backend inserting into the index is running" test -n "$pid"
[ -n "$pid" ] && kill -9 "$pid"
wait "$filler" 2>/dev/null
check "the server recovers after the backend is killed" wait_ready
check "after the crash some inserted rows were committed" equal t "SELECT count(*) > 2000 FROM c"
check "after the crash the index reads without error (gknn_graph_info)" \
  sql -c "SELECT * FROM gknn_graph_info('c_emb')"
check "after the crash the index returns every committed row once" index_complete c
check "after the crash its first rows are the exact nearest" index_exact c
check "after the crash the concurrency table's index is intact too" index_complete t
check "rows inserted after the crash are found" equal t "
  INSERT INTO c (emb) VALUES ('[9,9,9,9,9,9,9,9]');
  SET enable_seqscan = off;
  SELECT emb = '[9,9,9,9,9,9,9,9]' FROM c ORDER BY emb <-> '[9,9,9,9,9,9,9,9]' LIMIT 1"
sql -c 'REINDEX INDEX c_emb' >/dev/null
check "after REINDEX the exact answers are the same" index_exact c
check "after REINDEX the index holds every row once" equal t "
  SELECT live = (SELECT count(*) FROM c) AND nodes = live FROM gknn_graph_info('c_emb')"

"$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
tap_end
