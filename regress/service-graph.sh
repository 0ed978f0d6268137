#!/usr/bin/env bash
# gpu_graph searches through the gknn GPU service, against a running server
# (PGHOST/PGPORT/PGUSER) with gknn in shared_preload_libraries, as TAP. The
# service may run on a GPU (gknn.service = gpu) or on the CPU (gknn.service =
# cpu, CI):
#   answers: searches through the service equal the backend's own CPU
#     search (three metrics, ef_search 10/40/200, LIMIT 1/10/37, a filter
#     that makes the scan widen), inside one transaction each;
#   sharing: one resident image per index, of kind gpu_graph;
#   inserts: a new generation is shipped, the old one leaves, answers equal;
#   concurrency: 32 sessions at once (random LIMITs: one batch serves several),
#     every answer checked against the CPU path; requests were batched; 32
#     sessions over three indexes at once, every answer checked; sessions
#     terminated while they search: no wrong answer, nothing left queued,
#     the same service serves again (on a GPU: through the resident graph
#     kernel's ring, docs/resident-graph-search.md);
#   EXPLAIN ANALYZE: the scan's searches, batch and waits under its node;
#   forgetting: DROP INDEX and REINDEX take the image out at commit;
#   builds: CREATE INDEX and REINDEX build the graph in the service; on
#     the CPU (gknn.service = cpu) the pages equal the backend's own build's
#     byte for byte (l2, cosine); gknn.device = gpu with a CPU service is
#     55000; pg_cancel_backend and statement_timeout end a build waiting on
#     the service within a second (its progress shown meanwhile) and the
#     service stops it; the service terminated during a build: auto builds
#     on the backend's CPU, the same pages;
#   budget: an image larger than gknn.gpu_memory_limit: SQLSTATE 53200, and
#     a graph build larger than it too;
#   cancellation: with the service stopped (SIGSTOP), statement_timeout and
#     pg_cancel_backend end a waiting graph search promptly;
#   faults: a backend killed with SIGKILL while 16 sessions search: none
#     hangs, the server recovers; the service terminated while a graph
#     search waits (auto: the CPU answers); killed with SIGKILL while several
#     graph searches wait: each
#     ends (an answer or a clean error), none hangs, and the server serves
#     graph searches through the service again; killed with SIGKILL during
#     a graph build: a clean error, no hang, and builds go through the
#     service again.
# It signals the service process, so it runs as root or as the server's OS
# user; it crashes the server on purpose (last in its stage).
#
#   regress/service-graph.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
DB=gknn_service_graph
. "$(dirname "$0")/service-lib.sh"

fresh_gknn_db

# GKNN_SERVICE_CPU_RING=1: the whole suite with gknn.service_cpu_ring on (a
# CPU service then serves graph searches through the ring, as a GPU
# service's resident kernel does; run-all.sh's second pass), reset at exit.
cpu_ring_conf() {
  "$PSQL" -X -qAt -d postgres -c "ALTER SYSTEM $1" -c "SELECT pg_reload_conf()" >/dev/null
}
if [ "${GKNN_SERVICE_CPU_RING:-0}" = 1 ]; then
  cpu_ring_conf "SET gknn.service_cpu_ring = on"
  trap 'cpu_ring_conf "RESET gknn.service_cpu_ring"; rm -rf "$tmp"' EXIT  # and tap.sh's
  sleep 1  # the service reads the setting on its next pass
fi

check "the service is ready" wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 300
echo "# service on: $(status device), ring on the CPU: $(sql -c 'SHOW gknn.service_cpu_ring')"

# Three graph indexes (l2, cosine, inner product) over clustered rows with a
# few NULLs, and 12 queries.
sql <<'SQL' >/dev/null
CREATE TABLE ga (id int PRIMARY KEY, emb vector(16));
INSERT INTO ga SELECT i, CASE WHEN i % 500 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 20) * 2 + ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 16) j)::float8[]::vector END
  FROM generate_series(1, 3000) i;
CREATE INDEX ga_l2 ON ga USING gpu_graph (emb vector_l2_ops) WITH (degree = 16);
CREATE TABLE gb (id int PRIMARY KEY, emb vector(16));
INSERT INTO gb SELECT i, ARRAY(SELECT ((i * 31 + j * 7) % 97) / 97.0 - 0.3 FROM generate_series(1, 16) j)::float8[]::vector
  FROM generate_series(1, 2000) i;
CREATE INDEX gb_cos ON gb USING gpu_graph (emb vector_cosine_ops) WITH (degree = 8);
CREATE TABLE gc AS SELECT * FROM ga;
CREATE INDEX gc_ip ON gc USING gpu_graph (emb vector_ip_ops) WITH (degree = 12);
CREATE TABLE qs (q int, v vector(16));
INSERT INTO qs SELECT q, ARRAY(SELECT (q % 20) * 2 + ((q * 13 + j * 5) % 23) / 23.0 FROM generate_series(1, 16) j)::float8[]::vector
  FROM generate_series(1, 12) q;
-- answer(table, op, query, ef, k, device, filter): ids and distances the index scan returns.
CREATE FUNCTION answer(tab text, op text, qv vector, ef int, k int, dev text, filter text DEFAULT 'true')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.graph_ef_search', ef::text, true);
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('gknn.enable_topk', 'off', true);
  EXECUTE format('SELECT string_agg(id || '':'' || d, '' '') FROM (SELECT id, emb %s $1 AS d FROM %I WHERE %s
                  ORDER BY emb %s $1 LIMIT %s) s', op, tab, filter, op, k)
    INTO r USING qv;
  RETURN r;
END $$;
-- mismatches(device): (index, query, ef, k) whose answer differs from the CPU's.
CREATE FUNCTION mismatches(dev text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM (VALUES ('ga', '<->'), ('gb', '<=>'), ('gc', '<#>')) t(tab, op), qs,
    (VALUES (10), (40), (200)) e(ef), (VALUES (1), (10), (37)) k(k)
  WHERE answer(tab, op, v, ef, k, dev) IS DISTINCT FROM answer(tab, op, v, ef, k, 'cpu') $$;
-- check_one(query, k): raises when the service's answer is not the CPU's.
CREATE FUNCTION check_one(q int, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v vector := (SELECT qs.v FROM qs WHERE qs.q = check_one.q);
BEGIN
  IF answer('ga', '<->', v, 40, k, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, k, 'cpu') THEN
    RAISE EXCEPTION 'service answer differs for query % k %', q, k;
  END IF;
END $$;
-- check_any(query, k, index): the same for index 1 (ga, l2), 2 (gb, cosine) or 3 (gc, inner product).
CREATE FUNCTION check_any(q int, k int, i int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v vector := (SELECT qs.v FROM qs WHERE qs.q = check_any.q);
  tab text := (ARRAY['ga', 'gb', 'gc'])[i];
  op text := (ARRAY['<->', '<=>', '<#>'])[i];
BEGIN
  IF answer(tab, op, v, 40, k, 'auto') IS DISTINCT FROM answer(tab, op, v, 40, k, 'cpu') THEN
    RAISE EXCEPTION 'service answer differs for % query % k %', tab, q, k;
  END IF;
END $$;
SQL
this_db="database = (SELECT oid FROM pg_database WHERE datname = current_database())"

before=$(status searches)
check "graph answers through the service equal the CPU's (3 metrics, ef 10/40/200, LIMIT 1/10/37)" \
  equal 0 "SELECT mismatches('auto')"
check "a filter that makes the scan widen: the same rows through the service" equal 0 "
  SELECT count(*) FROM qs WHERE answer('ga', '<->', v, 10, 30, 'auto', 'id % 9 = 0')
                                IS DISTINCT FROM answer('ga', '<->', v, 10, 30, 'cpu', 'id % 9 = 0')"
check "the searches went through the service" equal t "SELECT searches >= $before + 324 FROM gknn_service_status()"
check "one resident image per index, of kind gpu_graph, each used" equal "ga_l2|gpu_graph|1|t
gb_cos|gpu_graph|1|t
gc_ip|gpu_graph|1|t" "SELECT index_name, kind, count(*), bool_and(hits > 0) FROM gknn_service_images()
                      WHERE $this_db GROUP BY 1, 2 ORDER BY 1"
check "the image holds the index's live rows (3000 less 6 NULLs)" equal 2994 "
  SELECT entries FROM gknn_service_images() WHERE index_name = 'ga_l2' AND $this_db"

# --- inserts: a new generation ------------------------------------------------
gen_before=$(sql -c "SELECT generation FROM gknn_service_images() WHERE index_name = 'ga_l2' AND $this_db")
sql -c "INSERT INTO ga SELECT i, ARRAY(SELECT (i % 20) * 2 + ((i * 31 + j) % 101) / 101.0 FROM generate_series(1, 16) j)::float8[]::vector
        FROM generate_series(3001, 3300) i" >/dev/null
check "after inserts the new generation is shipped, answers equal the CPU's" equal 0 "
  SELECT count(*) FROM qs, (VALUES (1), (10), (37)) k(k)
  WHERE answer('ga', '<->', v, 40, k, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, k, 'cpu')"
check "one image of ga_l2, newer, with the inserted rows" equal "1|t|3294" "
  SELECT count(*), bool_and(generation > $gen_before), max(entries) FROM gknn_service_images()
  WHERE index_name = 'ga_l2' AND $this_db"

# --- EXPLAIN ANALYZE ------------------------------------------------------------
where=$(status "CASE WHEN device = 'cpu' THEN 'service CPU' ELSE 'service GPU' END")
explain_ok() {
  local out
  out=$(sql -c "SET enable_seqscan = off" -c "SET gknn.enable_topk = off" \
    -c "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM ga ORDER BY emb <-> (SELECT v FROM qs WHERE q = 1) LIMIT 5") || return 1
  echo "$out"
  grep -A2 'Index Scan using ga_l2' <<<"$out" | grep -Eq "^ *Searched On: $where( [0-9]+)?\$" &&
    grep -A2 'Index Scan using ga_l2' <<<"$out" |
    grep -Eq '^ *Service Searches: 1  Candidates: 5  Batch Size: [0-9]+.*  Queue Wait: [0-9.]+ ms  Service Time: [0-9.]+ ms'
}
check "EXPLAIN ANALYZE: the graph scan searched in the service, its batch and waits" explain_ok

# --- 32 sessions at once ------------------------------------------------------
cat >"$tmp/check.sql" <<'SQL'
\set q random(1, 12)
\set k random(1, 30)
SELECT check_one(:q, :k);
SQL
before_batches=$(status batches)
before_searches=$(status searches)
before_ring=$(status ring_searches)
check "32 concurrent sessions (random LIMIT): every graph answer equals the CPU's" pgbench_ok 32 4
check "the 480 graph searches went through the service in fewer batches (batched, or on a GPU through the resident kernel's ring)" equal t "
  SELECT searches - $before_searches >= 480 AND batches - $before_batches < searches - $before_searches
  FROM gknn_service_status()"
echo "# batches: $(sql -c "SELECT batches - $before_batches, searches - $before_searches FROM gknn_service_status()")"
# On a GPU the resident kernel's ring answers most of them (counted with
# their time), and with gknn.service_cpu_ring the CPU's; else a CPU service
# has no ring.
if [ "$(status "device = 'cpu'")" = f ] || [ "$(sql -c 'SHOW gknn.service_cpu_ring')" = on ]; then
  check "the resident kernel's ring answered searches, their time counted" equal t "
    SELECT ring_searches > $before_ring AND ring_ms > 0 FROM gknn_service_status()"
else
  check "a CPU service answers no search through a ring" equal t "SELECT ring_searches = 0 AND ring_ms = 0 FROM gknn_service_status()"
fi
# Sessions spread over three indexes at once: each index's searches are
# answered from its own image (on a GPU service with the resident graph
# kernel, it serves one image at a time: started, stopped and started again
# for another while the others' searches wait or take the request path).
cat >"$tmp/check.sql" <<'SQL'
\set q random(1, 12)
\set k random(1, 30)
\set i random(1, 3)
SELECT check_any(:q, :k, :i);
SQL
check "32 concurrent sessions over three graph indexes: every answer equals the CPU's" pgbench_ok 32 4

# Sessions terminated while they search (pg_terminate_backend under load; on
# a GPU service their searches may sit in the resident kernel's ring, whose
# slot the dying backend gives up to the service): no other session gets a
# wrong answer, nothing stays queued, the service is not restarted, and once
# idle (the kernel stopped: every slot must come back for that) it serves 16
# sessions again with every answer equal to the CPU's.
cat >"$tmp/check1.sql" <<'SQL'
\set q random(1, 12)
\set k random(1, 30)
SELECT check_one(:q, :k);
SQL
terminate_ok() {
  local before killed=0 i
  before=$(service_pid)
  timeout 60 "$PGBENCH" -n -c 16 -j 4 -T 4 -f "$tmp/check1.sql" "$DB" >"$tmp/pgbench-t.log" 2>&1 &
  local bg=$!
  sleep 1
  for i in $(seq 1 10); do
    killed=$((killed + $(sql -c "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM
      (SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$DB' AND state = 'active'
       LIMIT 1) a")))
    sleep 0.2
  done
  wait "$bg"
  (($? != 124)) || { echo "# pgbench hung"; return 1; }
  echo "# terminated $killed sessions"
  grep 'differs' "$tmp/pgbench-t.log" && return 1
  ((killed > 0)) &&
    wait_for "(SELECT queued = 0 FROM gknn_service_status())" &&
    sleep 1 &&
    equal t "SELECT state = 'ready' AND pid = $before FROM gknn_service_status()" &&
    pgbench_ok 16 4 "$tmp/check1.sql"
}
check "sessions terminated while they search: no wrong answer, nothing left queued, the same service serves 16 sessions again" \
  terminate_ok

# --- images leave at commit -------------------------------------------------------
gb_oid=$(sql -c "SELECT 'gb_cos'::regclass::oid")
sql -c "REINDEX INDEX gb_cos" >/dev/null
check "REINDEX: the graph's old image leaves the service at commit" \
  wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE index_oid = $gb_oid)"
check "after REINDEX the graph is shipped again, answers equal the CPU's" equal 0 "
  SELECT count(*) FROM qs WHERE answer('gb', '<=>', v, 40, 10, 'auto') IS DISTINCT FROM answer('gb', '<=>', v, 40, 10, 'cpu')"
gc_oid=$(sql -c "SELECT 'gc_ip'::regclass::oid")
sql -c "DROP INDEX gc_ip" >/dev/null
check "DROP INDEX: the graph's image leaves the service at commit" \
  wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE index_oid = $gc_oid)"

# --- builds through the service -----------------------------------------------------
# CREATE INDEX / REINDEX ship the rows' vectors; the service builds the graph
# (build_cpu on the CPU, build_gpu on a GPU) and the backend writes the pages.
# On the CPU the pages must be the backend's own build's, byte for byte past
# each page's LSN and checksum (both build_cpu with the same seed; a GPU's
# kNN graph may differ, so on a GPU only the searches are compared).
create_index_pages
sql <<'SQL' >/dev/null
SET gknn.device = cpu;
CREATE INDEX ga_cpu ON ga USING gpu_graph (emb vector_l2_ops) WITH (degree = 16);
CREATE INDEX gb_cpu ON gb USING gpu_graph (emb vector_cosine_ops) WITH (degree = 8);
CREATE TABLE pages_cpu AS SELECT 'ga_svc' AS idx, index_pages('ga_cpu') AS md5
  UNION ALL SELECT 'gb_svc', index_pages('gb_cpu');
DROP INDEX ga_cpu, gb_cpu;
-- 20000 x 64: a build that lasts (several seconds on two CPU cores; 20000 x 16
-- could end within the 1.5 s the cancel tests allowed) for the cancel tests.
SELECT setseed(0.25);
CREATE TABLE gbig AS SELECT i AS id, ARRAY(SELECT random() FROM generate_series(1, 64) j WHERE i > 0)::float4[]::vector(64) AS emb
  FROM generate_series(1, 20000) i;
SQL
on_cpu=$(status "device = 'cpu'")
build_same() {  # build_same INDEX TABLE OPCLASS DEGREE: built through the service, the CPU build's pages
  local before
  before=$(status requests)
  sql -c "CREATE INDEX $1 ON $2 USING gpu_graph (emb $3) WITH (degree = $4)" &&
    equal t "SELECT requests >= $before + 3 FROM gknn_service_status()" || return 1
  [ "$on_cpu" = t ] || return 0
  equal t "SELECT index_pages('$1') = (SELECT md5 FROM pages_cpu WHERE idx = '$1')"
}
check "CREATE INDEX builds the graph in the service: the pages of the backend's CPU build (l2)" \
  build_same ga_svc ga vector_l2_ops 16
check "CREATE INDEX builds the graph in the service: the pages of the backend's CPU build (cosine)" \
  build_same gb_svc gb vector_cosine_ops 8
reindex_ok() {
  local before
  before=$(status requests)
  sql -c "REINDEX INDEX ga_svc" && equal t "SELECT requests >= $before + 3 FROM gknn_service_status()" &&
    { [ "$on_cpu" = f ] || equal t "SELECT index_pages('ga_svc') = (SELECT md5 FROM pages_cpu WHERE idx = 'ga_svc')"; }
}
check "REINDEX through the service: the same pages" reindex_ok
check "an index built by the service answers as the CPU does" equal 0 "
  SELECT count(*) FROM qs WHERE answer('ga', '<->', v, 40, 10, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, 10, 'cpu')"
sql -c "DROP INDEX ga_svc, gb_svc"
if [ "$on_cpu" = t ]; then
  check "gknn.device = gpu with the service on the CPU: 55000" sqlstate_is 55000 \
    "SET LOCAL gknn.device = gpu; CREATE INDEX gb_gpu ON gb USING gpu_graph (emb vector_cosine_ops) WITH (degree = 8)"
else
  check "gknn.device = gpu: the build runs in the service" equal t "
    SET gknn.device = gpu; CREATE INDEX gb_gpu ON gb USING gpu_graph (emb vector_cosine_ops) WITH (degree = 8);
    SELECT count(*) = 0 FROM qs WHERE answer('gb', '<=>', v, 40, 10, 'gpu') IS DISTINCT FROM answer('gb', '<=>', v, 40, 10, 'cpu')"
  sql -c "DROP INDEX gb_gpu"
fi

build_big="CREATE INDEX gbig_idx ON gbig USING gpu_graph (emb vector_l2_ops) WITH (degree = 16)"
building="(SELECT count(*) = 1 FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid)
           WHERE p.phase = 'building index: building kNN graph' AND a.wait_event_type = 'Extension')"
idle="(SELECT queued = 0 AND running = 0 FROM gknn_service_status())"
cancel_build_ok() {
  local t0 t1 pid
  sql -c "$build_big" >"$tmp/build.out" 2>&1 &
  local bg=$!
  # The service's progress shows while the backend waits on its latch.
  wait_for "$building" 200 || { wait "$bg"; return 1; }
  pid=$(sql -c "SELECT pid FROM pg_stat_progress_create_index")
  t0=$(ms_now)
  sql -c "SELECT pg_cancel_backend($pid)" >/dev/null
  wait "$bg"
  t1=$(ms_now)
  cat "$tmp/build.out"
  echo "cancelled after $((t1 - t0)) ms"
  # The service stops at the core's next progress report (up to 16384
  # nodes of the kNN graph later).
  grep -q 'canceling statement due to user request' "$tmp/build.out" && ((t1 - t0 < 1000)) && wait_for "$idle" 300
}
timeout_build_ok() {
  local t0 t1 out
  t0=$(ms_now)
  out=$(sql -c "SET statement_timeout = 1000" -c "$build_big" 2>&1)
  t1=$(ms_now)
  echo "$out; $((t1 - t0)) ms"
  grep -q 'statement timeout' <<<"$out" && ((t1 - t0 < 2000)) && wait_for "$idle" 300
}
# A GPU service builds gbig in well under a second: too short to interrupt.
# These tests interrupt a build of the service's CPU (gknn.service = cpu).
if [ "$on_cpu" = t ]; then
  check "pg_cancel_backend during the service's graph build: progress shown while waiting; the build ends at once, the service stops" \
    cancel_build_ok
  check "statement_timeout during the service's graph build ends it within a second; the service stops" timeout_build_ok
else
  echo "# not run on a GPU service (its build of gbig is too short to interrupt): pg_cancel_backend and statement_timeout during a graph build"
fi
build_fallback_ok() {
  local restarts
  restarts=$(status restarts)
  terminate_while_queued "$tmp/fb.out" -c "SET gknn.device = auto" \
    -c "CREATE INDEX ga_fb ON ga USING gpu_graph (emb vector_l2_ops) WITH (degree = 16)" || return 1
  ((client_rc == 0)) || { cat "$tmp/fb.out"; return 1; }
  equal t "SELECT index_pages('ga_fb') = (SELECT md5 FROM pages_cpu WHERE idx = 'ga_svc')" && sql -c "DROP INDEX ga_fb" &&
    restarted_since "$restarts"
}
check "service terminated while a graph build waits: gknn.device = auto builds on the backend's CPU, the same pages; restarted" \
  build_fallback_ok

# --- budget ------------------------------------------------------------------------
set_limit 10kB
check "the budget is applied" wait_for "(SELECT memory_budget = 10240 AND memory_used <= 10240 FROM gknn_service_status())"
check "a graph image larger than the budget: SQLSTATE 53200" sqlstate_is 53200 \
  "PERFORM answer('ga', '<->', v, 40, 10, 'auto') FROM qs WHERE q = 1"
check "a graph build larger than the budget: SQLSTATE 53200" sqlstate_is 53200 \
  "CREATE INDEX ga_no ON ga USING gpu_graph (emb vector_l2_ops) WITH (degree = 16)"
reset_limit
check "the budget is back" wait_for "(SELECT memory_budget > 10240 FROM gknn_service_status())"

# --- cancellation with the service stopped --------------------------------------------
query_g="SELECT answer('ga', '<->', v, 40, 10, 'auto') FROM qs WHERE q = 2"
spid=$(service_pid)
kill -STOP "$spid"
check "statement_timeout ends a graph search waiting for the stopped service" timeout_ok "$query_g"
check "pg_cancel_backend ends a graph search waiting for the stopped service" cancel_ok "$query_g" "SELECT answer(''ga''"
kill -CONT "$spid"
check "the service serves graph searches again" equal 0 "
  SELECT count(*) FROM qs WHERE answer('ga', '<->', v, 40, 10, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, 10, 'cpu')"

# --- the service stops while graph searches wait ------------------------------------
expected=$(sql -c "SELECT answer('ga', '<->', v, 40, 10, 'cpu') FROM qs WHERE q = 3")
check "service terminated while a graph search waits: gknn.device = auto answers on the CPU; restarted" fallback_ok \
  "SELECT answer('ga', '<->', v, 40, 10, 'auto') FROM qs WHERE q = 3" "$expected"

# SIGKILL of a backend while 16 sessions search (on a GPU service, perhaps
# with its search in the resident kernel's ring): the postmaster resets the
# cluster; every session ends (no hang); a new service serves graph searches,
# answers equal to the CPU's.
kill9_backend_ok() {
  local svc victim s
  svc=$(service_pid)
  timeout 60 "$PGBENCH" -n -c 16 -j 4 -T 4 -f "$tmp/check1.sql" "$DB" >"$tmp/pgbench-k.log" 2>&1 &
  local bg=$!
  sleep 1
  victim=$(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$DB' LIMIT 1")
  [ -n "$victim" ] && kill -KILL "$victim"
  wait "$bg"
  s=$?
  tail -3 "$tmp/pgbench-k.log"
  [ -n "$victim" ] && ((s != 124)) || return 1
  wait_service_replaced "$svc" &&
    equal 0 "SELECT count(*) FROM qs WHERE answer('ga', '<->', v, 40, 10, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, 10, 'cpu')"
}
check "SIGKILL of a backend while 16 sessions search: none hangs; the server recovers and serves them again" kill9_backend_ok

# SIGKILL while four sessions wait: the postmaster resets the cluster; each
# session ends with its answer or a clean error within seconds, none hangs.
kill9_ok() {
  local killed i pids=() rc=0
  killed=$(service_pid)
  kill -STOP "$killed"
  for i in 1 2 3 4; do
    timeout 60 "$PSQL" -X -qAt -d "$DB" -c "SELECT answer('ga', '<->', v, 40, 10, 'auto') FROM qs WHERE q = $i" \
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
    # An answer, or the connection closed by the reset.
    grep -q '^[0-9]*:' "$tmp/k9.$((i + 1))" || grep -qi 'terminat\|crash\|connection' "$tmp/k9.$((i + 1))" || rc=1
  done
  ((rc == 0)) || return 1
  wait_service_replaced "$killed"
  equal 0 "SELECT count(*) FROM qs WHERE answer('ga', '<->', v, 40, 10, 'auto') IS DISTINCT FROM answer('ga', '<->', v, 40, 10, 'cpu')" &&
    equal t "SELECT searches > 0 FROM gknn_service_status()"
}
check "SIGKILL of the service while four graph searches wait: none hangs; the server recovers and serves them again" kill9_ok

# SIGKILL while a graph build waits on the service: the postmaster resets the
# cluster; the build's session ends with a clean error, never hangs.
kill9_build_ok() {
  local killed s
  killed=$(service_pid)
  timeout 60 "$PSQL" -X -qAt -d "$DB" -c "$build_big" >"$tmp/k9b" 2>&1 &
  local bg=$!
  wait_for "$building" 200 || { wait "$bg"; return 1; }
  kill -KILL "$killed"
  wait "$bg"
  s=$?
  cat "$tmp/k9b"
  ((s != 124 && s != 0)) && grep -qi 'terminat\|crash\|connection' "$tmp/k9b" || return 1
  wait_service_replaced "$killed"
  sql -c "CREATE INDEX ga_after ON ga USING gpu_graph (emb vector_l2_ops) WITH (degree = 16)" &&
    { [ "$on_cpu" = f ] || equal t "SELECT index_pages('ga_after') = (SELECT md5 FROM pages_cpu WHERE idx = 'ga_svc')"; }
}
if [ "$on_cpu" = t ]; then  # as the cancel tests: a GPU build of gbig is too short to catch
  check "SIGKILL of the service during a graph build: a clean error, no hang; the server recovers and builds through the service again" \
    kill9_build_ok
else
  echo "# not run on a GPU service (its build of gbig is too short to catch): SIGKILL during a graph build"
fi

tap_end
