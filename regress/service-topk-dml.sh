#!/usr/bin/env bash
# GpuTopK through the gknn GPU service while the table changes under it, as
# TAP, against a running server (PGHOST/PGPORT/PGUSER) with gknn in
# shared_preload_libraries (its service on a GPU or on the CPU):
#   16 sessions run Q1-Q3-style top-k queries and a vector distance, each
#   check in one REPEATABLE READ transaction: the query ranked by GpuTopK
#   through the service, then by PostgreSQL's own plan (gknn.enable_topk =
#   off), under the same snapshot; meanwhile other sessions UPDATE, DELETE
#   and INSERT rows, VACUUM the table (which sets pages all-visible again),
#   and TRUNCATE it and fill it again (a new relfilenode). Every answer must
#   equal PostgreSQL's (GpuTopK proposes candidates, the backend's fetch under
#   its snapshot decides), and the checks must really have ranked in the
#   service.
#
#   regress/service-topk-dml.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
DB=gknn_service_topk_dml
. "$(dirname "$0")/service-lib.sh"
SECS=${GKNN_DML_SECS:-12}

fresh_gknn_db
check "the service is ready" wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 300
on_cpu=$(sql -c "SELECT device = 'cpu' FROM gknn_service_status()")
where=$([ "$on_cpu" = t ] && echo 'service CPU' || echo 'service GPU 0')

sql >/dev/null <<'SQL'
SELECT setseed(0.31);
-- id is int4: each ORDER BY key with id as the tie-break makes two key
-- limbs, a shape a GPU service's kernels take (int8 takes two alone)
CREATE TABLE tw (id serial PRIMARY KEY, tweet_time timestamp, retweet_count int, likes_count int,
                 lang int, e vector(4));
CREATE FUNCTION fill(n int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO tw (tweet_time, retweet_count, likes_count, lang, e)
  SELECT timestamp '2024-01-01' + (random() * 5000)::int * interval '1 minute',
         CASE WHEN random() < 0.01 THEN NULL ELSE (random() * 1000)::int END, (random() * 300)::int,
         (random() * 6)::int, ARRAY[(random() * 4)::int, (random() * 4)::int, (random() * 4)::int, 1]::vector
  FROM generate_series(1, n) $$;
SELECT fill(100000);
VACUUM ANALYZE tw;
CREATE TABLE queries (n int, q text);
INSERT INTO queries VALUES
  (1, $$SELECT id FROM tw WHERE tweet_time < '2024-01-02 12:00' ORDER BY retweet_count DESC, id LIMIT 50$$),
  (2, $$SELECT id FROM tw ORDER BY retweet_count + 0.5 * likes_count DESC, id LIMIT 100$$),
  (3, $$SELECT id FROM tw WHERE lang IN (1, 2) ORDER BY retweet_count DESC NULLS LAST, id LIMIT 10$$),
  (4, $$SELECT id FROM tw ORDER BY e <-> '[1,2,3,1]', id LIMIT 20$$);
CREATE TABLE mismatches (n int, topk bigint[], pg bigint[], at timestamptz DEFAULT now());
CREATE TABLE checks (n int, ranked text);
-- One check: the query by GpuTopK, then by PostgreSQL's plan, in the
-- caller's transaction (REPEATABLE READ: one snapshot for both). GpuTopK is
-- forced (enable_sort = off, no minimum table size); where it ranked is
-- read from its EXPLAIN ANALYZE, run under the same snapshot.
CREATE FUNCTION topk_check(qn int) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  q text := (SELECT queries.q FROM queries WHERE n = qn);
  a bigint[];
  b bigint[];
  line text;
  ranked text := 'not GpuTopK';
BEGIN
  PERFORM set_config('gknn.topk_min_rows', '0', true);
  PERFORM set_config('enable_sort', 'off', true);
  PERFORM set_config('max_parallel_workers_per_gather', '0', true);
  PERFORM set_config('gknn.enable_topk', 'on', true);
  EXECUTE 'SELECT array_agg(id) FROM (' || q || ') x' INTO a;
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Ranked On: ' THEN ranked := substring(line FROM 'Ranked On: (.*)$'); END IF;
  END LOOP;
  PERFORM set_config('gknn.enable_topk', 'off', true);
  PERFORM set_config('enable_sort', 'on', true);
  EXECUTE 'SELECT array_agg(id) FROM (' || q || ') x' INTO b;
  IF a IS DISTINCT FROM b THEN INSERT INTO mismatches (n, topk, pg) VALUES (qn, a, b); END IF;
  INSERT INTO checks VALUES (qn, ranked);
END $f$;
SQL

cat >"$tmp/read.sql" <<'SQL'
\set qn random(1, 4)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT topk_check(:qn);
COMMIT;
SQL
cat >"$tmp/write.sql" <<'SQL'
\set id random(1, 200000)
\set r random(0, 1200)
UPDATE tw SET retweet_count = :r, likes_count = likes_count + 1 WHERE id BETWEEN :id AND :id + 20;
DELETE FROM tw WHERE id BETWEEN :id + 100 AND :id + 110;
SELECT fill(40);
SQL
cat >"$tmp/vacuum.sql" <<'SQL'
VACUUM tw;
SELECT pg_sleep(0.3);
SQL
cat >"$tmp/truncate.sql" <<'SQL'
SELECT pg_sleep(4);
BEGIN;
TRUNCATE tw;
SELECT fill(60000);
COMMIT;
VACUUM tw;
SQL

before=$(status topk_sessions)
node=$(sql -c "SELECT pg_relation_filenode('tw')")
run_all() {
  local pids=() rc=0 f
  "$PGBENCH" -n -c 16 -j 4 -T "$SECS" -f "$tmp/read.sql" "$DB" >"$tmp/read.log" 2>&1 &
  pids+=($!)
  "$PGBENCH" -n -c 2 -j 1 -T "$SECS" -f "$tmp/write.sql" "$DB" >"$tmp/write.log" 2>&1 &
  pids+=($!)
  "$PGBENCH" -n -c 1 -j 1 -T "$SECS" -f "$tmp/vacuum.sql" "$DB" >"$tmp/vacuum.log" 2>&1 &
  pids+=($!)
  "$PGBENCH" -n -c 1 -j 1 -T "$SECS" -f "$tmp/truncate.sql" "$DB" >"$tmp/truncate.log" 2>&1 &
  pids+=($!)
  for f in "${pids[@]}"; do wait "$f" || rc=1; done
  for f in read write vacuum truncate; do
    echo "# $f: $(grep -E 'number of transactions actually processed|number of failed|aborted' "$tmp/$f.log" | tr '\n' ' ')"
    grep -q -i 'error\|aborted' "$tmp/$f.log" && { grep -i -m 3 'error' "$tmp/$f.log"; rc=1; }
  done
  return $rc
}
check "16 sessions check GpuTopK against PostgreSQL's plan while 4 others UPDATE, DELETE, INSERT, VACUUM and TRUNCATE, without errors" run_all
check "every answer equals PostgreSQL's plan under the same snapshot" equal 0 "SELECT count(*) FROM mismatches"
sql -c "SELECT n, topk[1:5], pg[1:5] FROM mismatches LIMIT 3" | sed 's/^/# /'
check "the checks ran (at least 100, every query)" equal "t|4" \
  "SELECT count(*) >= 100, count(DISTINCT n) FROM checks"
check "every check was GpuTopK ranked in the service ($where)" equal "" \
  "SELECT string_agg(DISTINCT ranked, ', ') FROM checks WHERE ranked <> '$where'"
check "the service opened a session for every check's GpuTopK runs" equal t \
  "SELECT topk_sessions - $before >= 2 * (SELECT count(*) FROM checks) FROM gknn_service_status()"
check "the table was truncated and refilled during the checks (a new relfilenode)" equal t \
  "SELECT pg_relation_filenode('tw') <> $node"
echo "# checks: $(sql -c "SELECT count(*) || ' (' || string_agg(DISTINCT ranked, ', ') || ')' FROM checks")"

tap_end
