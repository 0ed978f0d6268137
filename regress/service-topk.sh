#!/usr/bin/env bash
# GpuTopK through the gknn GPU service, against a running server
# (PGHOST/PGPORT/PGUSER) with gknn in shared_preload_libraries, as TAP. The
# service may run on a GPU (gknn.service = gpu) or on the CPU (gknn.service =
# cpu, CI):
#   answers: Q1-Q3-style queries (a filter, a weighted sum, an IN list), a
#     vector distance with OFFSET, a qual PostgreSQL rechecks, a LIMIT larger
#     than the rows: GpuTopK through the service equals PostgreSQL's own plan
#     (gknn.enable_topk = off), in serial and in parallel plans;
#   where: EXPLAIN ANALYZE says the service ranked (serial, every worker),
#     with its batches; the service's counters move; gknn.device = cpu ranks
#     on the backend's CPU and sends the service nothing; gknn.device = gpu
#     with a CPU service is 55000;
#   errors: a row that raises in the service's program is PostgreSQL's error;
#   cancellation: statement_timeout while batches are ranked, then with the
#     service stopped (SIGSTOP), statement_timeout and pg_cancel_backend end
#     a query waiting for it within a second; the slot serves again after;
#   faults: the service terminated (SIGTERM) before a query's session (auto:
#     the backend's CPU answers), and in the middle of a serial and of a
#     parallel scan (the rows it had are ranked again on the backend's CPU:
#     the same answer); killed with SIGKILL while four queries wait: none
#     hangs, and the recovered server ranks through the service again;
#   the table cache (gknn.topk_cache_mb): one entry for every session (listed
#     alike from two), its hits growing, answers equal to PostgreSQL's; a hit
#     whose entry holds every block is one request (ranked with its probe), and
#     16 sessions' hits at once are partly ranked together (topk_shared_hits); 16
#     sessions comparing GpuTopK with PostgreSQL's plan in REPEATABLE READ
#     transactions while UPDATE, DELETE, INSERT, VACUUM and TRUNCATE run: no
#     mismatch; a VACUUM that sets all-visible bits again (the map page's
#     LSN moved: the kept pages under it checked once, then trusted again);
#     eviction under a small budget; a dropped table's entry leaving; after the SIGKILL, the cache is empty
#     and filled again, with the same answers.
# It signals the service process, so it runs as root or as the server's OS
# user; it crashes the server on purpose (last in its stage).
#
#   regress/service-topk.sh   (GKNN_PSQL names the client)
set -uo pipefail
DB=gknn_service_topk
. "$(dirname "$0")/service-lib.sh"

fresh_gknn_db

check "the service is ready" wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 300
on_cpu=$(sql -c "SELECT device = 'cpu' FROM gknn_service_status()")
where=$([ "$on_cpu" = t ] && echo 'service CPU' || echo 'service GPU 0')
echo "# service on: $(status device)"

# Tweets-like rows (bench/topk's shape, smaller), ties on every key, NULLs,
# and a vector column; a larger table whose ranking takes seconds on a CPU
# service, for the faults in mid-scan.
sql >/dev/null <<'SQL'
SELECT setseed(0.17);
CREATE TABLE tw (id int, tweet_time timestamp, retweet_count int, likes_count int, lang int,
                 score float8, body text, e vector(4));
INSERT INTO tw SELECT i, timestamp '2024-01-01' + (i % 5000) * interval '1 minute',
  CASE WHEN i % 97 = 0 THEN NULL ELSE (random() * 1000)::int END, (random() * 300)::int, i % 7,
  CASE WHEN i % 89 = 0 THEN 'NaN' ELSE round(random()::numeric, 3)::float8 END, (i % 1000)::text,
  ARRAY[i % 5, i % 3, i % 11, 1]::vector
FROM generate_series(1, 300000) i;
ANALYZE tw;
CREATE TABLE big AS SELECT i AS id, random() AS b FROM generate_series(1, 800000) i;
ANALYZE big;
-- the array of ids a query returns, with GpuTopK or PostgreSQL's own plan
CREATE FUNCTION ids(q text, topk bool) RETURNS int[] LANGUAGE plpgsql AS $f$
DECLARE r int[];
BEGIN
  PERFORM set_config('gknn.enable_topk', CASE WHEN topk THEN 'on' ELSE 'off' END, true);
  EXECUTE 'SELECT array_agg(id) FROM (' || q || ') x' INTO r;
  PERFORM set_config('gknn.enable_topk', 'on', true);
  RETURN r;
END $f$;
CREATE FUNCTION plan_of(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE line text; p text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    p := p || line || E'\n';
  END LOOP;
  RETURN p;
END $f$;
CREATE TABLE queries (n int, q text);
INSERT INTO queries VALUES
  (1, $$SELECT id FROM tw WHERE tweet_time < '2024-01-02 12:00' ORDER BY retweet_count DESC, id LIMIT 50$$),
  (2, $$SELECT id FROM tw ORDER BY retweet_count + 0.5 * likes_count DESC, id LIMIT 100$$),
  (3, $$SELECT id FROM tw WHERE lang IN (1, 2) ORDER BY retweet_count DESC NULLS LAST, id LIMIT 10$$),
  (4, $$SELECT id FROM tw ORDER BY e <-> '[1,2,3,1]', id LIMIT 7 OFFSET 3$$),
  (5, $$SELECT id FROM tw WHERE body LIKE '12%' ORDER BY score, id LIMIT 20$$),
  (6, $$SELECT id FROM tw WHERE lang = 3 AND likes_count > 298 ORDER BY score DESC, id LIMIT 100000$$);
SQL

serial="SET gknn.topk_min_rows = 0; SET enable_sort = off; SET max_parallel_workers_per_gather = 0;"
parallel="SET gknn.topk_min_rows = 0; SET enable_sort = off; SET parallel_setup_cost = 0;
  SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;"

# --- answers and where they were ranked --------------------------------------------
# Where a plan's round was ranked: in the service; or, on a GPU service, on
# the backend's CPU for a K its kernels do not take (> 1024: query 6; or a
# recheck plan, query 5, whose rounds fetch LIMIT / selectivity candidates
# and more, while EXPLAIN's K is the LIMIT), saying so.
ranked_ok="(p ~ 'Ranked On: $where' OR ('$on_cpu' = 'f'
    AND p ~ 'Ranked On: backend CPU \(a shape the GPU kernels do not take\)'
    AND (substring(p FROM '\mK: ([0-9]+)')::bigint > 1024 OR p ~ 'Candidates Rechecked')))"
# queries ranked in the service whatever its device (k <= 1024 every round)
narrow=$([ "$on_cpu" = t ] && echo 6 || echo 4)
before=$(status "topk_sessions || ' ' || topk_batches || ' ' || topk_rows")
check "serial plans are GpuTopK ranked in the service ($where; K > 1024 on a GPU's: the backend's CPU)" \
  equal 6 "$serial
  SELECT count(*) FROM queries, plan_of(q) p WHERE p ~ 'Custom Scan \(GpuTopK\)' AND $ranked_ok AND p !~ 'Gather'"
check "serial: GpuTopK through the service equals PostgreSQL's plan (Q1-Q3, vector, recheck, k > rows)" \
  equal "" "$serial SELECT string_agg(n::text, ',') FROM queries WHERE ids(q, true) IS DISTINCT FROM ids(q, false)"
check "the answers are not empty" equal 6 "SELECT count(*) FROM queries WHERE cardinality(ids(q, true)) > 0"
after=$(status "topk_sessions || ' ' || topk_batches || ' ' || topk_rows")
counters_ok() {
  echo "before: $before; after: $after"
  read -r s0 b0 r0 <<<"$before"
  read -r s1 b1 r1 <<<"$after"
  # 2 serial runs (plan_of, ids) of the queries the service ranks, each at
  # least one session and a batch; queries 1-4 ship all 300,000 rows (5's
  # LIKE PostgreSQL may run during the scan, shipping only the rows that
  # pass; the third run, "not empty", may take another plan)
  local n=$((2 * narrow))
  ((s1 - s0 >= n && b1 - b0 >= n && r1 - r0 >= 8 * 300000))
}
check "the service's counters moved: sessions, batches, rows" counters_ok
check "parallel plans are Gather Merge over GpuTopK, every participant ranked in the service" equal 6 "$parallel
  SELECT count(*) FROM queries, plan_of(q) p WHERE p ~ 'Gather Merge' AND p ~ 'Parallel Custom Scan \(GpuTopK\)'
    AND $ranked_ok AND NOT (p ~ 'backend CPU' AND ('$on_cpu' = 't' OR p ~ 'backend CPU \((?!a shape the GPU)'))"
check "parallel: GpuTopK through the service equals PostgreSQL's plan" \
  equal "" "$parallel SELECT string_agg(n::text, ',') FROM queries WHERE ids(q, true) IS DISTINCT FROM ids(q, false)"
check "parallel workers ranked in the service (Worker lines with service batches)" equal t "$parallel
  SELECT plan_of(q) ~ 'Worker [0-9]+:  Ranked On: $where .*Service Batches: [1-9]' FROM queries WHERE n = 2"
check "EXPLAIN ANALYZE shows the service's batches, rows and requests" equal t "$serial
  SELECT plan_of(q) ~ 'Service Batches: 2\s+Service Rows: 300000\s+Service Requests: 4' FROM queries WHERE n = 2"
before=$(status topk_sessions)
check "gknn.device = cpu: the backend's CPU ranks, the same answer; the service sees no session" equal "t|t|t" "
  SET gknn.device = cpu; $serial
  SELECT plan_of(q) ~ 'Ranked On: backend CPU \(gknn.device = cpu\)', ids(q, true) = ids(q, false),
         (SELECT topk_sessions = $before FROM gknn_service_status()) FROM queries WHERE n = 1"
if [ "$on_cpu" = t ]; then
  gpu_ok() {
    local out
    out=$(sql -c "SET gknn.device = gpu; SET gknn.topk_min_rows = 0; SET enable_sort = off" \
      -c "\\set VERBOSITY sqlstate" -c "SELECT id FROM tw ORDER BY score, id LIMIT 5" 2>&1)
    echo "$out"
    grep -q 55000 <<<"$out"
  }
  check "gknn.device = gpu with the service on the CPU: 55000" gpu_ok
fi
raise_ok() {
  local out
  out=$(sql -c "$serial" -c "\\set VERBOSITY sqlstate" -c "SELECT id FROM tw ORDER BY 100 / (lang - 3), id LIMIT 3" 2>&1)
  echo "$out"
  grep -q 22012 <<<"$out" || return 1
  out=$(sql -c "$parallel" -c "\\set VERBOSITY sqlstate" -c "SELECT id FROM tw ORDER BY retweet_count * 2147483647, id LIMIT 3" 2>&1)
  echo "$out"
  grep -q 22003 <<<"$out"
}
check "a row that raises in the service's program: PostgreSQL's error (22012 serial, 22003 parallel)" raise_ok

# --- cancellation ---------------------------------------------------------------------
heavy="SELECT id FROM big ORDER BY sqrt(b) * ln(b + 1) + exp(b / 10) + sqrt(b + 1) * ln(b + 2) + exp(b / 11)
  + sqrt(b + 2) * ln(b + 3) + exp(b / 12), id LIMIT 25"
expected_heavy=$(sql -c "SELECT ids(\$\$$heavy\$\$, false)")
timeout_busy_ok() {
  local out
  out=$(sql -c "$serial SET statement_timeout = 50" -c "$heavy" 2>&1)
  echo "$out"
  grep -q 'statement timeout' <<<"$out" || return 1
  equal "$expected_heavy" "$serial SELECT ids(\$\$$heavy\$\$, true)"
}
if [ "$on_cpu" = t ]; then
  check "statement_timeout while the service ranks batches; the next query is answered" timeout_busy_ok
fi
q1="SELECT id FROM tw WHERE tweet_time < '2024-01-02 12:00' ORDER BY retweet_count DESC, id LIMIT 50"
expected_q1=$(sql -c "SELECT ids(\$\$$q1\$\$, false)")
spid=$(service_pid)
kill -STOP "$spid"
check "statement_timeout ends a GpuTopK query waiting for the stopped service" timeout_ok "$serial $q1"
check "pg_cancel_backend ends a GpuTopK query waiting for the stopped service" cancel_ok "$serial /* cancel me */ $q1" \
  "$serial /* cancel me */"
kill -CONT "$spid"
check "the service ranks again after the cancels, the same answer" equal "$expected_q1|t" "$serial
  SELECT ids(\$\$$q1\$\$, true), plan_of(\$\$$q1\$\$) ~ 'Ranked On: $where'"

# --- the service stops ------------------------------------------------------------------
check "service terminated while a GpuTopK query waits: gknn.device = auto answers on the backend's CPU; restarted" \
  fallback_ok "SET gknn.device = auto; $serial SELECT ids(\$\$$q1\$\$, true)" "$expected_q1"
midscan_ok() { # midscan_ok SETTINGS: SIGTERM as soon as the first batch was ranked (a CPU service: seconds)
  local pid b0 out rc=0
  pid=$(service_pid)
  b0=$(status topk_batches)
  sql -c "$1 SET client_min_messages = log" -c "SELECT ids(\$\$$heavy\$\$, true)" >"$tmp/mid.out" 2>&1 &
  local bg=$!
  # Polled every 5 ms in one session: the query has batches left to rank
  # when the service is stopped.
  sql -c "DO \$\$ BEGIN
    FOR i IN 1..4000 LOOP
      EXIT WHEN (SELECT topk_batches > $b0 FROM gknn_service_status());
      PERFORM pg_sleep(0.005);
    END LOOP;
  END \$\$" || rc=1
  kill -STOP "$pid"
  kill -TERM "$pid"
  kill -CONT "$pid"
  wait "$bg"
  out=$(cat "$tmp/mid.out")
  echo "$out"
  echo "expected $expected_heavy"
  wait_service_replaced "$pid" || rc=1
  grep -q "GPU service stopped during a GpuTopK scan; it goes on on the backend's CPU" <<<"$out" || rc=1
  [ "$(tail -n 1 <<<"$out")" = "$expected_heavy" ] || rc=1
  return $rc
}
if [ "$on_cpu" = t ]; then  # a GPU ranks the big table too fast to catch
  check "service terminated in the middle of a serial scan: the rows it had ranked again on the backend's CPU, the same answer" \
    midscan_ok "$serial"
  check "service terminated in the middle of a parallel scan: every participant goes on on its CPU, the same answer" \
    midscan_ok "$parallel"
else
  echo "# not run on a GPU service (it ranks the big table too fast to catch): SIGTERM in the middle of a scan"
fi

# --- the table cache ------------------------------------------------------------------
set_cache_mb() { # set_cache_mb SIZE: gknn.topk_cache_mb (the service's budget), reloaded
  "$PSQL" -X -qAt -d postgres -c "ALTER SYSTEM SET gknn.topk_cache_mb = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.5
}
sql >/dev/null <<'SQL'
SELECT setseed(0.29);
CREATE TABLE ct (id int, a int, b float8, c text);
INSERT INTO ct SELECT i, (random() * 5000)::int, round(random()::numeric, 4)::float8, 'r' || i
FROM generate_series(1, 40000) i;
VACUUM ANALYZE ct;
CREATE TABLE ct2 AS SELECT id, b FROM ct;
VACUUM ANALYZE ct2;
CREATE TABLE ct3 AS SELECT id, b FROM ct;
VACUUM ANALYZE ct3;
CREATE TABLE mismatches (q text, gknn int[], pg int[]);
-- Compares GpuTopK with PostgreSQL's plan under the caller's snapshot
-- (REPEATABLE READ: both see the same rows); a difference is recorded.
CREATE FUNCTION cmp(q text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE g int[]; p int[];
BEGIN
  g := ids(q, true);
  p := ids(q, false);
  IF g IS DISTINCT FROM p THEN INSERT INTO mismatches VALUES (q, g, p); END IF;
END $f$;
-- The table cache's part of a query's EXPLAIN ANALYZE: what it did, rows
-- from it and from the heap, pages checked.
CREATE FUNCTION cache_use(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE p jsonb;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO p;
  p := jsonb_path_query_first(p, 'strict $.**?(@."Custom Plan Provider" == "GpuTopK")');
  RETURN concat_ws(' ', p->>'Table Cache', p->>'Cached Rows', p->>'Rows Scanned', p->>'Cache Pages Checked');
END $f$;
-- The requests a query's GpuTopK sent the service.
CREATE FUNCTION requests_of(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE p jsonb;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO p;
  RETURN jsonb_path_query_first(p, 'strict $.**?(@."Custom Plan Provider" == "GpuTopK")')->>'Service Requests';
END $f$;
SQL
cq1="SELECT id FROM ct WHERE a < 2500 ORDER BY b DESC, id LIMIT 20"
cq2="SELECT id FROM ct ORDER BY a * 2 + b, id LIMIT 15"
same() { echo "SELECT ids(\$\$$1\$\$, true) = ids(\$\$$1\$\$, false)"; } # same QUERY: the SQL comparing it
use() { echo "SELECT cache_use(\$\$$1\$\$)"; }                           # use QUERY: the SQL of its cache use
set_cache_mb 64
check "the table cache: the first query fills the entry, the next hits it (every row from the cache)" \
  equal "$(printf 'built 40000 40000\nhit 40000 0 0')" "$serial $(use "$cq1"); $(use "$cq1")"
counted_ok() {  # a hit is one ranking in the service's counters, of the entry's rows
  local b1 b2 a1 a2
  read -r b1 b2 <<<"$(status "topk_batches || ' ' || topk_rows")"
  sql -c "$serial $(use "$cq1")" >/dev/null || return 1
  read -r a1 a2 <<<"$(status "topk_batches || ' ' || topk_rows")"
  echo "topk_batches $b1 -> $a1, topk_rows $b2 -> $a2"
  ((a1 == b1 + 1 && a2 == b2 + 40000))
}
check "gknn_service_status() counts a cache hit as one ranking of the entry's 40,000 rows" counted_ok
check "a hit whose entry holds every block is one request: ranked and finished with its probe" \
  equal 1 "$serial SELECT requests_of(\$\$$cq1\$\$)"
riders_ok() { # 16 sessions' one-shot hits on one entry at once: some ranked together
  local b a
  b=$(status topk_shared_hits)
  printf '%s\n' "$serial" "$cq1;" >"$tmp/hit.sql"
  "$PGBENCH" -n -c 16 -j 4 -t 40 -f "$tmp/hit.sql" "$DB" >"$tmp/hits.log" 2>&1 || {
    cat "$tmp/hits.log"
    return 1
  }
  a=$(status "topk_shared_hits || ' ' || topk_shared_rankings")
  echo "topk_shared_hits $b -> ${a% *} in ${a#* } shared rankings"
  ((${a% *} > b))
}
check "16 sessions' hits on one entry: gknn_service_status() shows some ranked together (topk_shared_hits)" riders_ok
bq="SELECT id FROM big ORDER BY b, id LIMIT 5"
big_ok() { sql -c "VACUUM big" && equal "$(printf 'built 800000 800000\nhit 800000 0 0\nt')" "$serial $(use "$bq"); $(use "$bq"); $(same "$bq")"; }
check "the table cache of a table with more blocks than a probe's payload (big: its map travels in the session's segment)" \
  big_ok
listed() { sql -c "SELECT count(*) || ' ' || sum(hits) FROM gknn_topk_cache() WHERE relation = 'ct'::regclass"; }
two_sessions_ok() {
  local h0 a b la lb
  read -r _ h0 <<<"$(listed)"
  a=$(sql -c "$serial $(same "$cq1")")
  read -r la ha <<<"$(listed)"
  b=$(sql -c "$serial $(same "$cq1")")
  read -r lb hb <<<"$(listed)"
  echo "hits before: $h0; session 1: $a, $la entries, $ha hits; session 2: $b, $lb entries, $hb hits"
  # one entry of ct's columns (id, a, b) whatever the session, its hits growing
  [ "$a" = t ] && [ "$b" = t ] && [ "$la" = 1 ] && [ "$lb" = 1 ] && ((ha > h0 && hb > ha))
}
check "the table cache: one entry whatever the session (listed alike from two), hits growing, answers equal PostgreSQL's" \
  two_sessions_ok
check "the table cache: a query of fewer of an entry's columns is served by it" equal "$(printf 'hit 40000 0 0\n1\nt')" \
  "$serial $(use "SELECT id FROM ct ORDER BY b, id LIMIT 9"); SELECT count(*) FROM gknn_topk_cache() WHERE relation = 'ct'::regclass;
  $(same "SELECT id FROM ct ORDER BY b, id LIMIT 9")"
vm_path_ok() {
  local out l1 l2 l3
  out=$(sql -c "$serial UPDATE ct SET b = 2 WHERE id = 1234" -c "$(use "$cq1")" -c "VACUUM ct" \
    -c "$(use "$cq1")" -c "$(use "$cq1")" -c "$(same "$cq1")")
  echo "$out"
  l1=$(sed -n 1p <<<"$out")
  l2=$(sed -n 2p <<<"$out")
  l3=$(sed -n 3p <<<"$out")
  # after the update: a hit, its changed pages checked (their bits are clear)
  # and read from the heap with their segments
  [[ "$l1" =~ ^hit\ [0-9]+\ [1-9][0-9]*\ [1-9][0-9]*$ ]] || return 1
  # after the VACUUM: the map page's LSN moved: every kept page under it checked once...
  [[ "$l2" =~ ^hit\ [0-9]+\ [0-9]+\ ([0-9]+)$ ]] && ((BASH_REMATCH[1] > 10)) || return 1
  # ... then the map is trusted again
  [[ "$l3" =~ ^hit\ [0-9]+\ [0-9]+\ 0$ ]] || return 1
  [ "$(sed -n 4p <<<"$out")" = t ]
}
check "the table cache after a VACUUM sets all-visible bits again: the kept pages checked once, then the map trusted; the same answer" \
  vm_path_ok
{
  echo "SET gknn.topk_min_rows = 0;"
  echo "SET enable_sort = off;"
  echo "SET max_parallel_workers_per_gather = 0;"
  echo "\\set q random(1, 2)"
  echo "BEGIN ISOLATION LEVEL REPEATABLE READ;"
  echo "SELECT cmp(CASE :q WHEN 1 THEN \$\$$cq1\$\$ ELSE \$\$$cq2\$\$ END);"
  echo "COMMIT;"
} >"$tmp/cmp.sql"
writer() { # changes to ct while the readers compare
  local i
  for i in $(seq 1 30); do
    sql -c "UPDATE ct SET b = random() WHERE id % 997 = $i" -c "DELETE FROM ct WHERE id % 1499 = $i" \
      -c "INSERT INTO ct SELECT 40000 + $i * 100 + g, (random() * 5000)::int, random(), 'n'
          FROM generate_series(1, 50) g" >/dev/null || return 1
    if ((i % 6 == 0)); then sql -c "VACUUM ct" >/dev/null || return 1; fi
    if ((i == 15)); then
      sql -c "TRUNCATE ct" -c "INSERT INTO ct SELECT i, (random() * 5000)::int, random(), 'r'
        FROM generate_series(1, 40000) i" -c "VACUUM ct" >/dev/null || return 1
    fi
  done
}
cache_hits() { sql -c "SELECT coalesce(sum(hits), 0) FROM gknn_topk_cache() WHERE relation = 'ct'::regclass"; }
concurrent_ok() {
  local rc=0 w rounds=0
  writer >"$tmp/writer.out" 2>&1 &
  w=$!
  # Rounds of readers until the writer is done: on a GPU host one round
  # ended before the writer's TRUNCATE, so the cache of the table it made
  # was never read (and the hits below counted nothing).
  : >"$tmp/pgbench.log"
  while :; do
    "$PGBENCH" -n -c 16 -j 4 -t 12 -f "$tmp/cmp.sql" "$DB" >>"$tmp/pgbench.log" 2>&1 || rc=1
    rounds=$((rounds + 1))
    kill -0 "$w" 2>/dev/null || break
  done
  echo "reader rounds: $rounds"
  wait "$w" || {
    echo "writer failed"
    rc=1
  }
  cat "$tmp/writer.out" "$tmp/pgbench.log"
  grep -qi 'aborted\|error' "$tmp/pgbench.log" && rc=1
  echo "mismatches: $(sql -c 'SELECT count(*) FROM mismatches')"
  sql -c "SELECT * FROM mismatches LIMIT 3"
  echo "hits of ct's entries now: $(cache_hits)"
  [ "$(sql -c 'SELECT count(*) FROM mismatches')" = 0 ] || rc=1
  # the readers used the cache (the entry of the relfilenode the TRUNCATE made was hit too)
  (($(cache_hits) > 0)) || rc=1
  return $rc
}
check "the table cache under 16 sessions, while UPDATE, DELETE, INSERT, VACUUM and TRUNCATE run: every answer equals PostgreSQL's plan in the same snapshot" \
  concurrent_ok
check "the answers still equal PostgreSQL's after the changes" equal "$(printf 't\nt')" "$serial $(same "$cq1"); $(same "$cq2")"
evict_ok() {
  local out list ct2q="SELECT id FROM ct2 ORDER BY b, id LIMIT 5" ct3q="SELECT id FROM ct3 ORDER BY b, id LIMIT 5"
  list="SELECT string_agg(relation::regclass || ' ' || columns::text, ';'
    ORDER BY relation::regclass::text, columns::text) FROM gknn_topk_cache()"
  set_cache_mb 2
  out=$(sql -c "$serial $(use "$ct2q")" -c "$list" -c "$(use "$ct3q")" -c "$list" -c "$(same "$ct3q")")
  echo "$out"
  # 2 MB hold ct's entry (about 1.1 MB; big's went at once) and ct2's (0.9
  # MB); ct3's makes the least recently used of them, ct's, go
  [[ "$(sed -n 1p <<<"$out")" =~ ^built ]] && [ "$(sed -n 2p <<<"$out")" = "ct {1,2,3};ct2 {1,2}" ] &&
    [[ "$(sed -n 3p <<<"$out")" =~ ^built ]] && [ "$(sed -n 4p <<<"$out")" = "ct2 {1,2};ct3 {1,2}" ] &&
    [ "$(sed -n 5p <<<"$out")" = t ]
}
check "the table cache under a small gknn.topk_cache_mb: the least recently used entries are evicted to fit a new one" evict_ok
check "gknn_service_status() counts the cache's entries, bytes, budget (2 MB) and evictions" equal "t" "
  SELECT cache_entries = 2 AND cache_bytes > 0 AND cache_bytes <= cache_budget AND cache_budget = 2 * 1048576
    AND cache_evictions > 0 FROM gknn_service_status()"
drop_ok() { sql -c "DROP TABLE ct2" && wait_for "(SELECT cache_entries = 1 FROM gknn_service_status())" 30; }
check "DROP TABLE: its entry leaves the service at commit" drop_ok
set_cache_mb 64
# The planner prices a cached table by its visibility map, not its heap
# pages: exact vector search over a cached table (5,700 pages) is GpuTopK
# under PostgreSQL's default settings, hitting the cache (priced as heap
# pages, the GPU session's setup cost made PostgreSQL's plan cheaper).
planner_cache_ok() {
  local out vq
  sql >/dev/null <<'SQL' || return 1
CREATE TABLE vt AS SELECT i AS id,
  (SELECT array_agg(((i * 31 + j * 17) % 1000) / 10.0)::real[] FROM generate_series(1, 128) j)::vector(128) AS e
  FROM generate_series(1, 80000) i;
VACUUM ANALYZE vt;
SELECT gknn_cache_table('vt', ARRAY['id', 'e']);
SQL
  vq="SELECT id FROM vt ORDER BY e <-> '$(sql -c "SELECT e FROM vt WHERE id = 7")', id LIMIT 10"
  out=$(sql -c "SET max_parallel_workers_per_gather = 4" -c "SET gknn.topk_min_rows = 0" -c "$(use "$vq")" \
    -c "SELECT relpages FROM pg_class WHERE relname = 'vt'" -c "SET max_parallel_workers_per_gather = 4; $(same "$vq")")
  echo "$out"
  [[ "$(sed -n 1p <<<"$out")" =~ ^hit\ 80000\  ]] && (($(sed -n 2p <<<"$out") > 5000)) && [ "$(sed -n 3p <<<"$out")" = t ]
}
check "the planner picks GpuTopK over a cached table (priced by its visibility map): exact vector search, a hit, PostgreSQL's answer" \
  planner_cache_ok
sql -c "DROP TABLE vt" >/dev/null

# TOASTed vectors (784 dimensions stored out of line, as Fashion-MNIST's):
# PostgreSQL prices its plan as if detoasting and a 784-d distance were one
# operator each (about 1,000 units here for what takes 100+ ms); a cache
# hit's session is priced at a tenth of gknn.topk_gpu_setup_cost (on a GPU
# service; at all of it, 5,000, PostgreSQL's plan won there).
planner_toast_ok() {
  local out vq
  sql >/dev/null <<'SQL' || return 1
CREATE TABLE vtoast (id int, e vector(784));
ALTER TABLE vtoast ALTER COLUMN e SET STORAGE EXTERNAL;
INSERT INTO vtoast SELECT i,
  (SELECT array_agg(((i * 31 + j * 17) % 1000) / 10.0)::real[] FROM generate_series(1, 784) j)::vector(784)
  FROM generate_series(1, 30000) i;
VACUUM ANALYZE vtoast;
SELECT gknn_cache_table('vtoast', ARRAY['id', 'e']);
SQL
  vq="SELECT id FROM vtoast ORDER BY e <-> (SELECT e FROM vtoast WHERE id = 7), id LIMIT 10"
  out=$(sql -c "$(use "$vq")" -c "SELECT pg_total_relation_size('vtoast') > 50 * pg_relation_size('vtoast')" \
    -c "$(same "$vq")")
  echo "$out"
  [[ "$(sed -n 1p <<<"$out")" =~ ^hit\ 30000\  ]] && [ "$(sed -n 2p <<<"$out")" = t ] && [ "$(sed -n 3p <<<"$out")" = t ]
}
set_cache_mb 256  # the vectors: 94 MB
check "the planner picks GpuTopK over a cached table of TOASTed 784-d vectors: a hit, PostgreSQL's answer" \
  planner_toast_ok
sql -c "DROP TABLE vtoast" >/dev/null
set_cache_mb 64

# SIGKILL while four sessions wait: the postmaster resets the cluster; each
# session ends with its answer or a clean error within seconds, none hangs.
kill9_ok() {
  local killed i pids=() rc=0
  wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 600 || return 1
  killed=$(service_pid)
  kill -STOP "$killed"
  for i in 1 2 3 4; do
    timeout 60 "$PSQL" -X -qAt -d "$DB" -c "$serial" -c "SELECT ids(q, true) FROM queries WHERE n = $i" \
      >"$tmp/k9.$i" 2>&1 &
    pids+=($!)
  done
  wait_for "(SELECT queued = 4 FROM gknn_service_status())" || { kill -CONT "$killed"; return 1; }
  kill -KILL "$killed"
  for i in 0 1 2 3; do
    wait "${pids[$i]}"
    local s=$?
    cat "$tmp/k9.$((i + 1))"
    ((s != 124)) || { echo "session $((i + 1)) hung"; rc=1; }
    grep -q '^{' "$tmp/k9.$((i + 1))" || grep -qi 'terminat\|crash\|connection' "$tmp/k9.$((i + 1))" || rc=1
  done
  ((rc == 0)) || return 1
  wait_service_replaced "$killed" &&
    equal "|t" "$serial SELECT string_agg(n::text, ',') FILTER (WHERE ids(q, true) IS DISTINCT FROM ids(q, false)),
      bool_and($ranked_ok) FROM queries, plan_of(q) p"
}
check "SIGKILL of the service while four GpuTopK queries wait: none hangs; the server recovers and ranks through the service again" \
  kill9_ok
check "after the SIGKILL the table cache started empty (ct's entries gone), then filled again, the same answers" \
  equal "$(printf '0\nbuilt\nhit\nt')" "$serial
  SELECT count(*) FROM gknn_topk_cache() WHERE relation = 'ct'::regclass
    OR built < (SELECT started FROM gknn_service_status());
  SELECT split_part(cache_use(\$\$$cq1\$\$), ' ', 1); SELECT split_part(cache_use(\$\$$cq1\$\$), ' ', 1); $(same "$cq1")"
"$PSQL" -X -qAt -d postgres -c "ALTER SYSTEM RESET gknn.topk_cache_mb" -c "SELECT pg_reload_conf()" >/dev/null

tap_end
