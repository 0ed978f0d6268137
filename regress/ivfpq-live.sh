#!/usr/bin/env bash
# gpu_ivfpq against a running server (PGHOST/PGPORT/PGUSER), as TAP:
#   concurrency: pgbench sessions inserting, searching, deleting and
#     vacuuming one indexed table at once; afterwards the index holds every
#     row and answers exactly when every list is probed and every row re-ranked;
#   crash safety: a backend inserting rows is killed with SIGKILL (the
#     postmaster then resets every backend and replays WAL from the last
#     checkpoint); after recovery the index finds every committed row and
#     answers as a freshly rebuilt one (REINDEX) does.
# Used by regress/run-all.sh (last: it crashes the server it is given).
#
#   regress/ivfpq-live.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
DB=gknn_ivfpq_live
. "$(dirname "$0")/live-lib.sh"
. "$(dirname "$0")/index-live-lib.sh"
fresh_gknn_db

# index_complete TABLE: every row found through the index (all lists, every
# row re-ranked); index_exact TABLE: the 10 nearest of a few queries through
# the index equal the exact ones.
index_complete() {
  equal "$(sql -c "SELECT count(*) FROM $1 WHERE emb IS NOT NULL")" "
    SET enable_seqscan = off; SET gknn.ivfpq_probes = 100000; SET gknn.ivfpq_refine = 100000;
    SELECT count(*) FROM (SELECT id FROM $1 ORDER BY emb <-> '[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]' LIMIT 1000000) s
    WHERE id IS NOT NULL"
}
index_exact() {
  equal t "
    CREATE TEMP TABLE qs AS SELECT q, ARRAY(SELECT ((q * 31 + j * 17) % 101) / 101.0 FROM generate_series(1, 8) j)::float8[]::vector AS v
      FROM generate_series(1, 5) q;
    CREATE FUNCTION pg_temp.knn(v vector, idx bool) RETURNS float8[] LANGUAGE plpgsql AS \$\$
    DECLARE r float8[];
    BEGIN
      EXECUTE format('SET LOCAL enable_seqscan = %s', NOT idx); EXECUTE format('SET LOCAL enable_indexscan = %s', idx);
      EXECUTE 'SELECT array_agg(emb <-> \$1) FROM (SELECT emb FROM $1 ORDER BY emb <-> \$1 LIMIT 10) s' INTO r USING v;
      RETURN r;
    END \$\$;
    SET gknn.ivfpq_probes = 100000; SET gknn.ivfpq_refine = 100000;
    SELECT bool_and(pg_temp.knn(v, true) = pg_temp.knn(v, false)) FROM qs"
}

# --- concurrency --------------------------------------------------------------
concurrent_workload "gpu_ivfpq (emb) WITH (lists = 16, m = 4)"
check "after concurrent work the index finds every row" index_complete t
check "after concurrent work the index answers exactly with every list probed" index_exact t
sql -c 'VACUUM t' >/dev/null
check "the index's entries are the table's rows once vacuumed" equal t "
  SELECT entries = (SELECT count(*) FROM t) FROM gknn_ivfpq_info('t_emb')"

# --- crash ---------------------------------------------------------------------
crash_while_inserting "gpu_ivfpq (emb) WITH (lists = 16, m = 4)" ivfpq_filler
# t and c now hold what WAL replay made of them
check "after the crash the index finds every committed row" index_complete c
check "after the crash the index answers exactly with every list probed" index_exact c
check "after the crash the concurrency table's index is intact too" index_complete t
sql -c 'REINDEX INDEX c_emb' >/dev/null
check "after REINDEX the exact answers are the same" index_exact c
check "after REINDEX the index holds every row once" equal t "
  SELECT entries = (SELECT count(*) FROM c) FROM gknn_ivfpq_info('c_emb')"

drop_db
tap_end
