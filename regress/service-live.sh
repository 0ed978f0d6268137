#!/usr/bin/env bash
# The gknn GPU service against a running server (PGHOST/PGPORT/PGUSER) that
# has gknn in shared_preload_libraries, as TAP. The service may run on a GPU
# (gknn.service = gpu, the GPU host) or on the CPU (gknn.service = cpu, CI):
#   answers: searches through the service equal the backend's own CPU search
#     (three indexes, three metrics, several probes and LIMITs);
#   sharing: one resident image per index, whatever the sessions;
#   concurrency: 64 sessions at once, every answer checked against the CPU
#     path inside the same transaction; requests were batched; the service
#     counted their queue wait and time in the service (queue_wait_ms,
#     search_ms);
#   EXPLAIN ANALYZE: the scan's search, its batch and waits under its node;
#   forgetting: images of a dropped (DROP INDEX, DROP TABLE, DROP DATABASE),
#     truncated or reindexed index leave the service at commit, not after a
#     rolled-back DROP;
#   eviction: under a small gknn.gpu_memory_limit images are evicted and
#     reloaded, answers unchanged; an image larger than the budget: 53200;
#   cancellation: with the service stopped (SIGSTOP), statement_timeout and
#     pg_cancel_backend end a waiting query promptly; a waiting backend that
#     is terminated leaves no request behind;
#   builds: CREATE INDEX and REINDEX train and encode in the service, with
#     the pages of the backend's CPU build; the training's progress shows in
#     pg_stat_progress_create_index while the backend waits, searches are
#     served during a training; pg_cancel_backend
#     and statement_timeout end a build in training and the service stops it;
#     the build's memory counts under gknn.gpu_memory_limit (evicts, or 53200);
#   faults: the service terminated while a query or a build waits
#     (gknn.device = auto: the CPU answers or builds; gpu: a clean error),
#     restarted by the postmaster; the service killed with SIGKILL (crash
#     recovery), back afterwards.
# The test signals the service process, so it runs as root or as the
# server's OS user. Last in run-all.sh's service stage (it crashes the
# server on purpose).
#
#   regress/service-live.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
DB=gknn_service_live
. "$(dirname "$0")/service-lib.sh"

fresh_gknn_db

check "the service is ready" wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 300
device=$(status device)
echo "# service on: $device"

# Three indexes (l2, cosine, inner product) over seeded rows, and 12 queries.
sql <<'SQL' >/dev/null
CREATE TABLE a (id int PRIMARY KEY, emb vector(8));
INSERT INTO a SELECT i, ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 - 0.5
                              FROM generate_series(1, 8) j)::float8[]::vector FROM generate_series(1, 3000) i;
CREATE INDEX a_l2 ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4);
CREATE TABLE b (id int PRIMARY KEY, emb vector(16));
INSERT INTO b SELECT i, ARRAY(SELECT ((i * 31 + j * 7) % 97) / 97.0 - 0.3
                              FROM generate_series(1, 16) j)::float8[]::vector FROM generate_series(1, 2000) i;
CREATE INDEX b_cos ON b USING gpu_ivfpq (emb vector_cosine_ops) WITH (lists = 8, m = 8);
CREATE TABLE c AS SELECT * FROM a;
CREATE INDEX c_ip ON c USING gpu_ivfpq (emb vector_ip_ops) WITH (lists = 12, m = 2);
CREATE TABLE qs (q int, dim int, v vector);
INSERT INTO qs SELECT q, d, ARRAY(SELECT ((q * 13 + j * 5) % 23) / 23.0 - 0.4 FROM generate_series(1, d) j)::float8[]::vector
  FROM generate_series(1, 12) q, (VALUES (8), (16)) d(d);
-- answer(table, op, query, probes, k, device): the ids the index scan returns.
CREATE FUNCTION answer(tab text, op text, qv vector, probes int, k int, dev text) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.ivfpq_probes', probes::text, true);
  PERFORM set_config('enable_seqscan', 'off', true);
  EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %I ORDER BY emb %s $1 LIMIT %s) s', tab, op, k)
    INTO r USING qv;
  RETURN r;
END $$;
-- mismatches(device): (index, query, probes, k) whose answer differs from the CPU's.
CREATE FUNCTION mismatches(dev text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM (VALUES ('a', '<->', 8), ('b', '<=>', 16), ('c', '<#>', 8)) t(tab, op, dim)
    JOIN qs ON qs.dim = t.dim, (VALUES (1), (4), (16)) p(p), (VALUES (1), (10), (37)) k(k)
  WHERE answer(tab, op, v, p, k, dev) IS DISTINCT FROM answer(tab, op, v, p, k, 'cpu') $$;
-- exact_answer(table, op, query, k, device): the index scan with gknn.ivfpq_exact;
-- seq_answer: the sequential scan's, ties by TID as the index breaks them.
CREATE FUNCTION exact_answer(tab text, op text, qv vector, k int, dev text) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.ivfpq_exact', 'on', true);
  PERFORM set_config('enable_seqscan', 'off', true);
  EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %I ORDER BY emb %s $1 LIMIT %s) s', tab, op, k)
    INTO r USING qv;
  RETURN r;
END $$;
CREATE FUNCTION seq_answer(tab text, op text, qv vector, k int) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %I ORDER BY emb %s $1, ctid LIMIT %s) s', tab, op, k)
    INTO r USING qv;
  RETURN r;
END $$;
-- check_one(query, probes): raises when the service's answer is not the CPU's.
CREATE FUNCTION check_one(q int, probes int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v vector := (SELECT qs.v FROM qs WHERE qs.q = check_one.q AND dim = 8);
BEGIN
  IF answer('a', '<->', v, probes, 10, 'auto') IS DISTINCT FROM answer('a', '<->', v, probes, 10, 'cpu') THEN
    RAISE EXCEPTION 'service answer differs for query % probes %', q, probes;
  END IF;
END $$;
SQL

before=$(status searches)
check "answers through the service equal the CPU's (3 metrics, probes 1/4/16, LIMIT 1/10/37)" \
  equal 0 "SELECT mismatches('auto')"
check "gknn.ivfpq_exact: the index answers exactly (service and CPU; 3 metrics, LIMIT 1/10/37)" equal 0 "
  SELECT count(*) FROM (VALUES ('a', '<->', 8), ('b', '<=>', 16), ('c', '<#>', 8)) t(tab, op, dim)
    JOIN qs ON qs.dim = t.dim, (VALUES (1), (10), (37)) k(k), (VALUES ('auto'), ('cpu')) d(dev)
  WHERE exact_answer(tab, op, v, k, dev) IS DISTINCT FROM seq_answer(tab, op, v, k)"
check "the searches went through the service" equal t "SELECT searches >= $before + 324 FROM gknn_service_status()"
check "one resident image per index, each used" \
  equal "a_l2|1|t
b_cos|1|t
c_ip|1|t" "SELECT index_name, count(*), bool_and(hits > 0) FROM gknn_service_images()
            WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY 1 ORDER BY 1"
check "an explicit CPU search does not ask the service" equal t "
  CREATE TEMP TABLE s0 AS SELECT searches FROM gknn_service_status();
  DO \$\$ BEGIN PERFORM answer('a', '<->', v, 4, 10, 'cpu') FROM qs WHERE q = 1 AND dim = 8; END \$\$;
  SELECT (SELECT searches FROM gknn_service_status()) = (SELECT searches FROM s0)"

# --- halfvec: an expression index (emb::halfvec(n)) whose binary16 vectors are
# shipped to the service and kept resident as such ---------------------------
sql <<'SQL' >/dev/null
CREATE TABLE h (id int PRIMARY KEY, emb vector(16));
INSERT INTO h SELECT i, ARRAY(SELECT ((i * 31 + j * 7) % 97) / 9.7 - 3 + (i % 5) / 1001.0
                              FROM generate_series(1, 16) j)::float8[]::vector FROM generate_series(1, 2000) i;
CREATE INDEX h_l2 ON h USING gpu_ivfpq ((emb::halfvec(16)) halfvec_l2_ops) WITH (lists = 8, m = 4);
CREATE INDEX h_bits ON h USING gpu_ivfpq ((binary_quantize(emb)::bit(16)) bit_hamming_ops) WITH (lists = 8, m = 4);
-- b_answer(query, device) / b_seq: the same for the bit index, gknn.ivfpq_exact.
CREATE FUNCTION b_answer(qv vector, dev text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.ivfpq_exact', 'on', true);
  PERFORM set_config('enable_seqscan', 'off', true);
  SELECT string_agg(id || ':' || d, ' ') INTO r FROM (
    SELECT id, binary_quantize(emb)::bit(16) <~> binary_quantize(qv)::bit(16) AS d FROM h
    ORDER BY binary_quantize(emb)::bit(16) <~> binary_quantize(qv)::bit(16) LIMIT 20) s;
  RETURN r;
END $$;
CREATE FUNCTION b_seq(qv vector) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  SELECT string_agg(id || ':' || d, ' ') INTO r FROM (
    SELECT id, binary_quantize(emb)::bit(16) <~> binary_quantize(qv)::bit(16) AS d FROM h
    ORDER BY binary_quantize(emb)::bit(16) <~> binary_quantize(qv)::bit(16), ctid LIMIT 20) s;
  RETURN r;
END $$;
-- h_answer(query, exact, probes, device): the ids and distances the index scan returns.
CREATE FUNCTION h_answer(qv halfvec, exact bool, probes int, dev text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.ivfpq_exact', exact::text, true);
  PERFORM set_config('gknn.ivfpq_probes', probes::text, true);
  PERFORM set_config('enable_seqscan', 'off', true);
  SELECT string_agg(id || ':' || d, ' ') INTO r FROM (
    SELECT id, emb::halfvec(16) <-> qv AS d FROM h ORDER BY emb::halfvec(16) <-> qv::halfvec(16) LIMIT 10) s;
  RETURN r;
END $$;
CREATE FUNCTION h_seq(qv halfvec) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  SELECT string_agg(id || ':' || d, ' ') INTO r FROM (
    SELECT id, emb::halfvec(16) <-> qv AS d FROM h ORDER BY emb::halfvec(16) <-> qv, ctid LIMIT 10) s;
  RETURN r;
END $$;
SQL
before=$(status searches)
check "halfvec expression index: the service's answers equal the CPU's (probes 1/4, exact)" equal 0 "
  SELECT count(*) FROM qs, (VALUES (false, 1), (false, 4), (true, 1)) m(exact, p)
  WHERE qs.dim = 16 AND h_answer(v::halfvec, exact, p, 'auto') IS DISTINCT FROM h_answer(v::halfvec, exact, p, 'cpu')"
check "halfvec expression index: exact answers equal the sequential scan's (ids, distances)" equal 0 "
  SELECT count(*) FROM qs WHERE qs.dim = 16 AND h_answer(v::halfvec, true, 1, 'auto') IS DISTINCT FROM h_seq(v::halfvec)"
check "bit expression index (bit_hamming_ops): exact answers through the service equal the sequential scan's" \
  equal 0 "SELECT count(*) FROM qs WHERE qs.dim = 16 AND b_answer(v, 'auto') IS DISTINCT FROM b_seq(v)"
check "halfvec expression index: searched in the service, one image" equal "t|1" "
  SELECT (SELECT searches >= $before + 48 FROM gknn_service_status()), count(*) FROM gknn_service_images()
  WHERE index_name = 'h_l2' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"

# --- EXPLAIN ANALYZE of a scan through the service ----------------------------------
sql <<'SQL' >/dev/null
-- explain_scan(query): the JSON of the first Index Scan node of EXPLAIN ANALYZE.
CREATE FUNCTION explain_scan(q text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE r json;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO r;
  RETURN r -> 0 -> 'Plan' -> 'Plans' -> 0;
END $$;
SQL
where=$(status "CASE WHEN device = 'cpu' THEN 'service CPU' ELSE 'service GPU' END")
check "EXPLAIN ANALYZE (JSON): the scan's search went through the service, its batch and waits" equal "Index Scan|t|1|t|t|t|0" "
  SELECT n ->> 'Node Type', n ->> 'Searched On' LIKE '$where%', n ->> 'Service Searches',
         (n ->> 'Batch Size Min')::int >= 1 AND (n ->> 'Batch Size Max')::int >= (n ->> 'Batch Size Min')::int,
         (n ->> 'Queue Wait Time')::float8 >= 0, (n ->> 'Service Time')::float8 >= 0, n ->> 'Backend Searches'
  FROM explain_scan('SELECT id FROM a ORDER BY emb <-> ''[0,0,0,0,0,0,0,0]'' LIMIT 5') n"
explain_text_ok() {
  local out
  out=$(sql -c "SET enable_seqscan = off" -c "SET gknn.device = auto" \
    -c "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM a ORDER BY emb <-> '[0,0,0,0,0,0,0,0]' LIMIT 5") || return 1
  echo "$out"
  grep -A2 'Index Scan using a_l2' <<<"$out" | sed -n 2p | grep -q "^ *Searched On: $where" &&
    grep -A2 'Index Scan using a_l2' <<<"$out" | sed -n 3p |
    grep -Eq '^ *Service Searches: 1  Candidates: [0-9]+  Batch Size: [0-9]+.*  Queue Wait: [0-9.]+ ms  Service Time: [0-9.]+ ms'
}
check "EXPLAIN ANALYZE (TEXT): the same lines under the Index Scan node" explain_text_ok

# --- images of dropped, truncated, rebuilt indexes leave at commit ---------------------
image_count() {  # image_count WHERE: resident images matching
  sql -c "SELECT count(*) FROM gknn_service_images() WHERE $1"
}
a_oid=$(sql -c "SELECT 'a_l2'::regclass::oid")
check "a rolled-back DROP INDEX leaves the image resident" equal "1" "
  BEGIN; DROP INDEX a_l2; ROLLBACK;
  DO \$\$ BEGIN PERFORM pg_sleep(0.3); END \$\$;
  SELECT count(*) FROM gknn_service_images() WHERE index_oid = $a_oid"
evictions_before=$(status evictions)
sql -c "REINDEX INDEX a_l2" >/dev/null
check "REINDEX: the old image leaves the service at commit" wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE index_oid = $a_oid)"
sql <<'SQL' >/dev/null
CREATE TABLE d AS SELECT * FROM a;
CREATE INDEX d_l2 ON d USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 8, m = 4);
SQL
d_oid=$(sql -c "SELECT 'd_l2'::regclass::oid")
sql -c "SELECT answer('d', '<->', v, 4, 10, 'auto') FROM qs WHERE q = 1 AND dim = 8" >/dev/null
check "an image of d_l2 is resident" equal 1 "SELECT count(*) FROM gknn_service_images() WHERE index_oid = $d_oid"
sql -c "SET client_min_messages = warning" -c "TRUNCATE d" >/dev/null
check "TRUNCATE: the image leaves the service at commit" wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE index_oid = $d_oid)"
sql -c "INSERT INTO d SELECT * FROM a" -c "REINDEX INDEX d_l2" >/dev/null
check "after TRUNCATE and REINDEX the index is shipped again and answers equal the CPU's" equal t "
  SELECT bool_and(answer('d', '<->', v, 4, 10, 'auto') IS NOT DISTINCT FROM answer('d', '<->', v, 4, 10, 'cpu'))
         AND (SELECT count(*) = 1 FROM gknn_service_images() WHERE index_oid = $d_oid)
  FROM qs WHERE dim = 8"
sql -c "DROP TABLE d" >/dev/null
check "DROP TABLE: its index's image leaves the service at commit" wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE index_oid = $d_oid)"
check "those images were counted as evictions" equal t "SELECT evictions >= $evictions_before + 3 FROM gknn_service_status()"
drop_database_ok() {
  local db2=${DB}_2 oid
  "$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db2" \
    -c "CREATE DATABASE $db2" >/dev/null || return 1
  "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$db2" >/dev/null <<'SQL' || return 1
CREATE EXTENSION gknn;
CREATE TABLE e AS SELECT i AS id, ARRAY[i % 7, i % 11, i % 13, i % 17]::float8[]::vector(4) AS emb FROM generate_series(1, 500) i;
CREATE INDEX ON e USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 4, m = 2);
SET enable_seqscan = off;
SELECT id FROM e ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;
SQL
  oid=$("$PSQL" -X -qAt -d postgres -c "SELECT oid FROM pg_database WHERE datname = '$db2'")
  [ "$(image_count "database = $oid")" = 1 ] || { echo "no image of $db2 resident"; return 1; }
  "$PSQL" -X -q -d postgres -c "DROP DATABASE $db2" >/dev/null || return 1
  wait_for "NOT EXISTS (SELECT FROM gknn_service_images() WHERE database = $oid)"
}
check "DROP DATABASE: its images leave the service at commit" drop_database_ok

# --- 64 sessions at once -------------------------------------------------------
cat >"$tmp/check.sql" <<'SQL'
\set q random(1, 12)
\set p random(1, 3)
SELECT check_one(:q, CASE :p WHEN 1 THEN 1 WHEN 2 THEN 4 ELSE 16 END);
SQL
before_batches=$(status batches)
before_searches=$(status searches)
before_batched=$(status "round(mean_batch * batches)")
before_wait=$(status queue_wait_ms)
before_held=$(status search_ms)
check "64 concurrent sessions: every answer equals the CPU's" pgbench_ok 64 8
check "the 960 searches were batched (fewer batches than searches)" equal t "
  SELECT searches - $before_searches >= 960 AND batches - $before_batches < searches - $before_searches
  FROM gknn_service_status()"
# Each search's time in the service includes its queue wait; both are
# counted together when its batch completes, so the sums keep that order.
check "their queue wait and time in the service were counted (search_ms grew at least as much)" equal t "
  SELECT queue_wait_ms > $before_wait AND search_ms - $before_held >= queue_wait_ms - $before_wait
    AND search_ms >= queue_wait_ms
  FROM gknn_service_status()"
echo "# batches: $(sql -c "SELECT batches - $before_batches, searches - $before_searches, round(mean_batch::numeric, 2) FROM gknn_service_status()")"
# Per search a batch answered (the counters' searches: bench/run_experiment.py's service_delta too).
echo "# per search, ms queued / in the service: $(sql -c "SELECT round(((queue_wait_ms - $before_wait) / nullif(round(mean_batch * batches) - $before_batched, 0))::numeric, 3) || ' / ' || round(((search_ms - $before_held) / nullif(round(mean_batch * batches) - $before_batched, 0))::numeric, 3) FROM gknn_service_status()")"

# --- eviction under a small budget ----------------------------------------------
# Room for one image of a (141 kB with its vectors) or c (134 kB), not for both.
set_limit 200kB
check "the budget is applied" wait_for "(SELECT memory_budget = 204800 FROM gknn_service_status())"
ev=$(status evictions)
check "answers unchanged while images are evicted and reloaded" equal "0|t" "
  SELECT (SELECT count(*) FROM qs, generate_series(1, 3) r
          WHERE qs.dim = 8 AND answer(CASE WHEN r % 2 = 1 THEN 'a' ELSE 'c' END, CASE WHEN r % 2 = 1 THEN '<->' ELSE '<#>' END, v, 4, 10, 'auto')
                IS DISTINCT FROM answer(CASE WHEN r % 2 = 1 THEN 'a' ELSE 'c' END, CASE WHEN r % 2 = 1 THEN '<->' ELSE '<#>' END, v, 4, 10, 'cpu')),
         (SELECT evictions > $ev AND memory_used <= memory_budget FROM gknn_service_status())"
# A smaller budget evicts what no longer fits; then nothing fits.
set_limit 10kB
check "a smaller budget evicts down to it" wait_for "(SELECT memory_budget = 10240 AND memory_used <= 10240 FROM gknn_service_status())"
check "an image larger than the budget: SQLSTATE 53200" sqlstate_is 53200 \
  "PERFORM answer('a', '<->', v, 4, 10, 'auto') FROM qs WHERE q = 1 AND dim = 8"
reset_limit

# --- index builds through the service -----------------------------------------------
# CREATE INDEX / REINDEX ship the training sample, the service trains and
# encodes; the backend waits on its latch. The pages must be the backend's
# own CPU build's, byte for byte past each page's LSN and checksum.
create_index_pages
sql <<'SQL' >/dev/null
SET gknn.device = cpu;
CREATE INDEX a_cpu ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4);
CREATE TABLE pages_cpu AS SELECT index_pages('a_cpu') AS md5;
DROP INDEX a_cpu;
-- 200 rows for the budget's checks; 40000 x 32 for a training that lasts
-- (lists 512, 1000 iterations: seconds on an H100, minutes on a CPU; the
-- tests below cancel it)
SELECT setseed(0.5);
CREATE TABLE sm AS SELECT * FROM a WHERE id <= 200;
CREATE TABLE big AS SELECT i AS id, ARRAY(SELECT random() FROM generate_series(1, 32) j WHERE i > 0)::float4[]::vector(32) AS emb
  FROM generate_series(1, 40000) i;
SQL
build_same() {  # build_same INDEX [SETTINGS...]: build a's index through the service, compare with the CPU's
  local before
  before=$(status requests)
  sql -c "DROP INDEX IF EXISTS $1" -c "CREATE INDEX $1 ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4)" &&
    equal t "SELECT index_pages('$1') = (SELECT md5 FROM pages_cpu)" &&
    equal t "SELECT requests >= $before + 6 FROM gknn_service_status()"
}
check "CREATE INDEX trains and encodes through the service: the pages of the backend's CPU build" build_same a_svc
check "REINDEX through the service: the same pages" equal t "REINDEX INDEX a_svc; SELECT index_pages('a_svc') = (SELECT md5 FROM pages_cpu)"
sql -c "DROP INDEX a_svc"  # a's searches below use a_l2
two_builds_ok() {
  sql -c "CREATE INDEX a_two1 ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4)" &
  local b1=$!
  sql -c "CREATE INDEX a_two2 ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4)" &
  local b2=$!
  wait "$b1" && wait "$b2" &&
    equal "t|t" "SELECT index_pages('a_two1') = md5, index_pages('a_two2') = md5 FROM pages_cpu" &&
    sql -c "DROP INDEX a_two1, a_two2"
}
check "two builds through the service at once: each the CPU build's pages" two_builds_ok

build_big="CREATE INDEX big_idx ON big USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 512, m = 8, training_sample = 40000, kmeans_iters = 1000)"
training="(SELECT count(*) = 1 FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid)
           WHERE p.phase LIKE 'building index: training%' AND p.tuples_done > 0 AND a.wait_event_type = 'Extension')"
cancel_build_ok() {
  local t0 t1 pid
  sql -c "$build_big" >"$tmp/build.out" 2>&1 &
  local bg=$!
  # The training's progress shows while the backend waits on its latch.
  wait_for "$training" 200 || { wait "$bg"; return 1; }
  # Searches are served meanwhile (the training has an executor of its own).
  equal 0 "SELECT count(*) FROM qs WHERE dim = 8 AND q <= 3
           AND answer('a', '<->', v, 4, 10, 'auto') IS DISTINCT FROM answer('a', '<->', v, 4, 10, 'cpu')" &&
    equal t "SELECT $training" || { wait "$bg"; return 1; }
  pid=$(sql -c "SELECT pid FROM pg_stat_progress_create_index")
  t0=$(ms_now)
  sql -c "SELECT pg_cancel_backend($pid)" >/dev/null
  wait "$bg"
  t1=$(ms_now)
  cat "$tmp/build.out"
  echo "cancelled after $((t1 - t0)) ms"
  grep -q 'canceling statement due to user request' "$tmp/build.out" && ((t1 - t0 < 1000)) &&
    # The service stopped training at once (it would run for seconds more).
    wait_for "(SELECT queued = 0 AND running = 0 FROM gknn_service_status())" 20
}
check "pg_cancel_backend during the service's training: progress shown while waiting, searches served meanwhile; the build ends, the service stops training" \
  cancel_build_ok
timeout_build_ok() {
  local out
  out=$(sql -c "SET statement_timeout = 1500" -c "$build_big" 2>&1)
  echo "$out"
  grep -q 'statement timeout' <<<"$out" && wait_for "(SELECT queued = 0 AND running = 0 FROM gknn_service_status())" 20
}
check "statement_timeout during the service's training ends the build; the service stops training" timeout_build_ok
check "the service serves after the withdrawn builds" equal 0 "SELECT mismatches('auto')"

# The build's working memory counts under gknn.gpu_memory_limit: for sm
# (200 x 8, lists 2, m 2, nbits 4) the service estimates about 21 kB for the
# training and 56 kB for the encoding (service_build.cpp).
budget_build_ok() {
  local bytes ev
  sql -c "SELECT answer('a', '<->', v, 4, 10, 'auto') FROM qs WHERE q = 1 AND dim = 8" >/dev/null
  bytes=$(sql -c "SELECT bytes FROM gknn_service_images() WHERE index_name = 'a_l2'")
  # Room for a's image and the training, not for the image and the encoding.
  set_limit "$(((bytes + 30 * 1024) / 1024))kB"
  wait_for "(SELECT memory_budget = ($bytes + 30 * 1024) / 1024 * 1024 FROM gknn_service_status())" || return 1
  ev=$(status evictions)
  sql -c "CREATE INDEX sm_svc ON sm USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 2, m = 2, nbits = 4)" &&
    equal "t|0" "SELECT evictions > $ev, (SELECT count(*) FROM gknn_service_images() WHERE index_name = 'a_l2')
                 FROM gknn_service_status()"
}
check "a build's memory counts under gknn.gpu_memory_limit: a resident image is evicted to make room" budget_build_ok
set_limit 30kB
check "a build that does not fit the budget: SQLSTATE 53200" sqlstate_is 53200 \
  "CREATE INDEX sm_no ON sm USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 2, m = 2, nbits = 4)"
reset_limit

# --- cancellation with the service stopped ----------------------------------------
query_a="SELECT answer('a', '<->', v, 4, 10, 'auto') FROM qs WHERE q = 2 AND dim = 8"
spid=$(service_pid)
kill -STOP "$spid"
check "statement_timeout ends a query waiting for the stopped service" timeout_ok "$query_a"
check "pg_cancel_backend ends a query waiting for the stopped service" cancel_ok "$query_a" "SELECT answer(''a''"
terminate_ok() {
  sql -c "$query_a" >/dev/null 2>&1 &
  local bg=$!
  wait_for "(SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT answer(''a''%' AND wait_event_type = 'Extension')" || return 1
  sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT answer(''a''%'" >/dev/null
  wait "$bg"
  kill -CONT "$spid"
  # The service answers the abandoned request into the void and frees the slot.
  wait_for "(SELECT queued = 0 AND running = 0 FROM gknn_service_status())"
}
check "a terminated waiting backend leaves no request behind" terminate_ok
kill -CONT "$spid" 2>/dev/null
check "the service serves again" equal 0 "SELECT mismatches('auto')"

# --- the service stops while a query waits -----------------------------------------
expected=$(sql -c "SELECT answer('a', '<->', v, 4, 10, 'cpu') FROM qs WHERE q = 3 AND dim = 8")
check "service terminated while a query waits: gknn.device = auto answers on the CPU; restarted" fallback_ok \
  "SELECT answer('a', '<->', v, 4, 10, 'auto') FROM qs WHERE q = 3 AND dim = 8" "$expected"
build_fallback_ok() {
  local restarts
  restarts=$(status restarts)
  terminate_while_queued "$tmp/fb.out" -c "SET gknn.device = auto" -c "DROP INDEX IF EXISTS a_fb" \
    -c "CREATE INDEX a_fb ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4)" || return 1
  ((client_rc == 0)) || { cat "$tmp/fb.out"; return 1; }
  equal t "SELECT index_pages('a_fb') = (SELECT md5 FROM pages_cpu)" && sql -c "DROP INDEX a_fb" &&
    restarted_since "$restarts"
}
check "service terminated while a build waits: gknn.device = auto builds on the backend's CPU, the same pages; restarted" \
  build_fallback_ok
if [ "$(status "device <> 'cpu'")" = t ]; then
  gpu_stop_ok() {
    # the image shipped first (the service was restarted before): the
    # request that waits is the search itself
    sql -c "SET gknn.device = gpu" -c "SELECT answer('a', '<->', v, 4, 10, 'gpu') FROM qs WHERE q = 3 AND dim = 8" \
      >/dev/null || return 1
    terminate_while_queued "$tmp/gpu.out" -c "SET gknn.device = gpu" \
      -c "SELECT answer('a', '<->', v, 4, 10, 'gpu') FROM qs WHERE q = 3 AND dim = 8" || return 1
    cat "$tmp/gpu.out"
    grep -q 'the gknn GPU service stopped while a query waited' "$tmp/gpu.out" &&
      wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 100
  }
  check "service terminated while a query waits: gknn.device = gpu gets a clean error" gpu_stop_ok
  gpu_build_stop_ok() {
    terminate_while_queued "$tmp/gpu.out" -c "SET gknn.device = gpu" \
      -c "CREATE INDEX a_gpu ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4)" || return 1
    cat "$tmp/gpu.out"
    grep -q 'the gknn GPU service stopped while an index was built' "$tmp/gpu.out" &&
      wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 100
  }
  check "service terminated while a build waits: gknn.device = gpu gets a clean error" gpu_build_stop_ok
fi
check "after a restart the image is shipped again and answers are unchanged" equal 0 "SELECT mismatches('auto')"

# --- SIGKILL: crash recovery, then the service is back ---------------------------------
killed=$(service_pid)
kill -KILL "$killed"
back_ok() {
  wait_service_replaced "$killed"
  equal 0 "SELECT mismatches('auto')"
}
check "after SIGKILL of the service the server recovers and the service serves again" back_ok

tap_end
