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
#     hangs, and the recovered server ranks through the service again.
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
# the backend's CPU for a K its kernels do not take (> 1024: query 6, and a
# recheck round of query 5 may be that wide), saying so.
ranked_ok="(p ~ 'Ranked On: $where' OR ('$on_cpu' = 'f'
    AND p ~ 'Ranked On: backend CPU \(a shape the GPU kernels do not take\)'
    AND substring(p FROM '\mK: ([0-9]+)')::bigint > 1024))"
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
  # 3 runs (plan_of, ids twice) of the queries the service ranks, each at
  # least one session and a batch; all but query 5 (whose LIKE PostgreSQL
  # may run during the scan, shipping only the rows that pass) ship all
  # 300,000 rows
  local n=$((3 * narrow))
  ((s1 - s0 >= n && b1 - b0 >= n && r1 - r0 >= (n - 3) * 300000))
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
      bool_and(plan_of(q) ~ 'Ranked On: $where') FROM queries"
}
check "SIGKILL of the service while four GpuTopK queries wait: none hangs; the server recovers and ranks through the service again" \
  kill9_ok

tap_end
