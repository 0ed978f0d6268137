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
DB=gknn_graph_live
. "$(dirname "$0")/live-lib.sh"
. "$(dirname "$0")/index-live-lib.sh"
fresh_gknn_db

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
concurrent_workload "gpu_graph (emb) WITH (degree = 8)"
check "after concurrent work the index returns every row once" index_complete t
check "after concurrent work its first rows are the exact nearest" index_exact t
sql -c 'VACUUM t' >/dev/null
check "once vacuumed: its live nodes are the table's rows, no edge to a dead node" equal t "
  SELECT live = (SELECT count(*) FROM t) AND dead_edges = 0 FROM gknn_graph_info('t_emb')"

# --- crash ---------------------------------------------------------------------
crash_while_inserting "gpu_graph (emb) WITH (degree = 8)" graph_filler
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

drop_db
tap_end
