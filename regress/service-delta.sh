#!/usr/bin/env bash
# gpu_ivfpq images kept fresh in the GPU service by deltas, against a running
# server (PGHOST/PGPORT/PGUSER) with gknn in shared_preload_libraries, as
# TAP. The service may run on a GPU or on the CPU (CI):
#   steps: inserts (new pages, duplicate vectors), DELETE + VACUUM, UPDATEs
#     and NULLs, TIDs reused; after each, the service's image (brought up to
#     date by a delta: `deltas` grows, `loads` does not, a few kB shipped
#     where the image is far larger) answers as the backend's own image read
#     whole in a new session (3 indexes, one without stored vectors; PQ,
#     re-ranked and exact modes); EXPLAIN ANALYZE says "Deltas Shipped";
#   fallbacks: more changes than the change log holds, REINDEX (a new
#     relfilenode), gknn.ivfpq_delta = off: the image is shipped whole;
#   concurrency: sessions inserting, deleting and vacuuming while others
#     check exact answers against the sequential scan in the same snapshot;
#     afterwards every answer equals a whole image's again.
#
#   regress/service-delta.sh   (GKNN_PSQL, GKNN_PGBENCH name the clients)
set -uo pipefail
DB=gknn_service_delta
. "$(dirname "$0")/service-lib.sh"
exec 3>&1  # measurements shown whether a check passes or not

fresh_gknn_db
check "the service is ready" wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 300

# Three indexes: l2 and cosine with stored vectors, and one of 2,048
# dimensions (its items cannot hold the vector: PQ estimates, re-ranked from
# the heap by the backend). Autovacuum off: each step's changes are its own.
sql <<'SQL' >/dev/null
CREATE TABLE a (id int PRIMARY KEY, emb vector(8)) WITH (autovacuum_enabled = off);
INSERT INTO a SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i * 7919 + j * 104729) % 1009) / 1009.0
                              FROM generate_series(1, 8) j)::float8[]::vector FROM generate_series(1, 4000) i;
CREATE INDEX a_l2 ON a USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 16, m = 4);
CREATE TABLE b (id int PRIMARY KEY, emb vector(16)) WITH (autovacuum_enabled = off);
INSERT INTO b SELECT i, ARRAY(SELECT ((i * 31 + j * 7) % 97) / 97.0 - 0.3
                              FROM generate_series(1, 16) j)::float8[]::vector FROM generate_series(1, 2000) i;
CREATE INDEX b_cos ON b USING gpu_ivfpq (emb vector_cosine_ops) WITH (lists = 8, m = 8);
CREATE TABLE w (id int PRIMARY KEY, emb vector(2048)) WITH (autovacuum_enabled = off);
INSERT INTO w SELECT i, ARRAY(SELECT ((i * 13 + j * 17) % 101) / 101.0 FROM generate_series(1, 2048) j)::float8[]::vector
  FROM generate_series(1, 300) i;
CREATE INDEX w_l2 ON w USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 4, m = 16, training_sample = 300);
CREATE TABLE qs (q int, dim int, v vector);
INSERT INTO qs SELECT q, d, ARRAY(SELECT (q % 4) * 3 * (d / 8 % 2) + ((q * 13 + j * 5) % 23) / 23.0 - 0.2
                                  FROM generate_series(1, d) j)::float8[]::vector
  FROM generate_series(1, 6) q, (VALUES (8), (16), (2048)) d(d);
-- answer(table, op, query, probes, refine, exact, k, device): the index scan's ids.
CREATE FUNCTION answer(tab text, op text, qv vector, probes int, refine int, exact bool, k int, dev text)
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('gknn.device', dev, true);
  PERFORM set_config('gknn.ivfpq_probes', probes::text, true);
  PERFORM set_config('gknn.ivfpq_refine', refine::text, true);
  PERFORM set_config('gknn.ivfpq_exact', exact::text, true);
  PERFORM set_config('enable_seqscan', 'off', true);
  EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %I ORDER BY emb %s $1 LIMIT %s) s', tab, op, k)
    INTO r USING qv;
  RETURN r;
END $$;
-- mismatches(): answers through the service that differ from this session's
-- own CPU search (its image read whole: every check runs in a new session).
CREATE FUNCTION mismatches() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM (VALUES ('a', '<->', 8, true), ('b', '<=>', 16, true), ('w', '<->', 2048, false)) t(tab, op, dim, vec)
    JOIN qs ON qs.dim = t.dim,
    (VALUES (1, 1, false, 30), (3, 1, false, 30), (16, 2, false, 50), (2, 10, false, 10), (1, 1, true, 100000)) s(p, r, x, k)
  WHERE (vec OR NOT x)
    AND answer(tab, op, v, p, r, x, k, 'auto') IS DISTINCT FROM answer(tab, op, v, p, r, x, k, 'cpu') $$;
-- exact_vs_seq(): exact index answers that differ from the sequential scan's
-- (ties by TID), both in the caller's snapshot.
CREATE FUNCTION seq_answer(qv vector, k int) RETURNS int[] LANGUAGE sql
  SET enable_seqscan = on SET enable_indexscan = off SET enable_bitmapscan = off AS $$
  SELECT array_agg(id) FROM (SELECT id FROM a ORDER BY emb <-> qv, ctid LIMIT k) s $$;
-- check_exact(query, k): raises unless the two agree.
CREATE FUNCTION check_exact(q int, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v vector := (SELECT qs.v FROM qs WHERE qs.q = check_exact.q AND dim = 8);
BEGIN
  IF answer('a', '<->', v, 1, 1, true, k, 'auto') IS DISTINCT FROM seq_answer(v, k) THEN
    RAISE EXCEPTION 'exact answer of query % (k %) differs from the sequential scan', q, k;
  END IF;
END $$;
SQL

# loads, loaded_bytes, deltas, delta_bytes now.
counters() { status "loads || ' ' || loaded_bytes || ' ' || deltas || ' ' || delta_bytes"; }
read -r loads0 bytes0 deltas0 dbytes0 <<<"$(counters)"
check "answers through the service equal the CPU's (3 indexes, 5 settings, 6 queries)" equal 0 "SELECT mismatches()"
read -r loads1 bytes1 deltas1 dbytes1 <<<"$(counters)"
echo "# 3 images loaded whole: $((loads1 - loads0)) loads, $((bytes1 - bytes0)) bytes"

# step DESCRIPTION SQL: changes the tables, then the service's images answer
# as whole images do, brought there by deltas alone (no load), each of
# fewer bytes than a tenth of the images.
step() {
  local l b d db
  sql <<<"$2" >/dev/null || { echo "step failed: $2"; return 1; }
  read -r l b d db <<<"$(counters)"
  equal 0 "SELECT mismatches()" || return 1
  read -r loads deltas dbytes <<<"$(status "loads || ' ' || deltas || ' ' || delta_bytes")"
  echo "# $1: loads $l -> $loads, deltas $d -> $deltas, $((dbytes - db)) bytes shipped (the images: $((bytes1 - bytes0)))" >&3
  ((loads == l && deltas > d && (dbytes - db) * 10 < bytes1 - bytes0))
}
check "inserts (new pages, twenty vectors fifteen times each): deltas only" step inserts "
  INSERT INTO a SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i % 10) * 3 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
    FROM generate_series(10001, 10300) i;
  INSERT INTO b SELECT i, ARRAY(SELECT ((i % 5) * 11 + j * 7) % 97 / 97.0 - 0.3 FROM generate_series(1, 16) j)::float8[]::vector
    FROM generate_series(10001, 10100) i;
  INSERT INTO w SELECT i, ARRAY(SELECT ((i * 7 + j * 3) % 101) / 101.0 FROM generate_series(1, 2048) j)::float8[]::vector
    FROM generate_series(10001, 10020) i"
check "DELETE + VACUUM (pages rewritten): deltas only" step vacuum "
  DELETE FROM a WHERE id % 7 = 3; DELETE FROM b WHERE id % 5 = 0; DELETE FROM w WHERE id % 3 = 0;
  VACUUM a; VACUUM b; VACUUM w"
check "TIDs reused, UPDATEs, NULLs: deltas only" step reuse "
  INSERT INTO a SELECT i, ARRAY(SELECT ((i + 1) % 4) * 3 + ((i % 10) * 5 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
    FROM generate_series(20001, 20150) i;
  UPDATE a SET emb = emb + '[0.5,0,0,0,0,0,0,0.5]' WHERE id % 50 = 1;
  UPDATE b SET emb = emb + emb WHERE id % 40 = 1;
  INSERT INTO a SELECT i, NULL FROM generate_series(30001, 30003) i;
  INSERT INTO w SELECT i, ARRAY(SELECT ((i * 5 + j) % 101) / 101.0 FROM generate_series(1, 2048) j)::float8[]::vector
    FROM generate_series(20001, 20010) i"
check "rewrites and appends on the same pages: deltas only" step mixed "
  DELETE FROM a WHERE id % 50 = 1 OR id = 30002; VACUUM a;
  INSERT INTO a SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i % 10) * 3 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
    FROM generate_series(40001, 40040) i"

explain_ok() {
  local out
  out=$(sql -c "INSERT INTO a VALUES (70001, '[0,0,0,0,0,0,0,1]')" -c "SET enable_seqscan = off" \
    -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT id FROM a ORDER BY emb <-> '[0,0,0,0,0,0,0,0]' LIMIT 3")
  echo "$out"
  grep -q 'Deltas Shipped: 1' <<<"$out" && ! grep -q 'Images Shipped' <<<"$out"
}
check "EXPLAIN ANALYZE: the scan after an insert shipped a delta, not the image" explain_ok

# Fallbacks: the image is shipped whole, answers equal.
whole() {
  local l
  l=$(status loads)
  sql <<<"$1" >/dev/null || return 1
  equal 0 "SELECT mismatches()" || return 1
  echo "loads $l -> $(status loads)"
  (($(status loads) > l))
}
check "more changes than the change log holds: the image is shipped whole" whole "
  INSERT INTO a SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i * 29 + j * 13) % 83) / 83.0 FROM generate_series(1, 8) j)::float8[]::vector
    FROM generate_series(50001, 50500) i"
check "REINDEX (a new relfilenode): shipped whole" whole "REINDEX INDEX a_l2"
check "gknn.ivfpq_delta = off: shipped whole" whole "
  INSERT INTO a VALUES (60001, '[1,1,1,1,1,1,1,1]');
  SET gknn.ivfpq_delta = off; SELECT answer('a', '<->', v, 1, 1, false, 5, 'auto') FROM qs WHERE q = 1 AND dim = 8"

# --- concurrent inserts, deletes and VACUUM while exact answers are checked ---
cat >"$tmp/insert.sql" <<'SQL'
\set i random(100000, 100000000)
INSERT INTO a SELECT :i, ARRAY(SELECT (:i % 4) * 3 + ((:i * 7 + j * 3) % 41) / 41.0 FROM generate_series(1, 8) j)::float8[]::vector
  ON CONFLICT DO NOTHING;
SQL
cat >"$tmp/vacuum.sql" <<'SQL'
DELETE FROM a WHERE id IN (SELECT id FROM a WHERE id >= 100000 ORDER BY id LIMIT 20);
VACUUM a;
SQL
cat >"$tmp/check.sql" <<'SQL'
\set q random(1, 6)
\set k random(1, 40)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT check_exact(:q, :k);
COMMIT;
SQL
concurrent_ok() {
  local d0 l0
  d0=$(status deltas)
  l0=$(status loads)
  "$PGBENCH" -n -c 4 -j 4 -T 6 -f "$tmp/insert.sql" "$DB" >"$tmp/ins.log" 2>&1 &
  local ins=$!
  "$PGBENCH" -n -c 1 -j 1 -T 6 -f "$tmp/vacuum.sql" "$DB" >"$tmp/vac.log" 2>&1 &
  local vac=$!
  "$PGBENCH" -n -c 8 -j 4 -T 6 -f "$tmp/check.sql" "$DB" >"$tmp/chk.log" 2>&1
  local rc=$?
  wait "$ins"
  local rci=$?
  wait "$vac"
  local rcv=$?
  grep -h 'transactions actually processed\|aborted\|ERROR' "$tmp/ins.log" "$tmp/vac.log" "$tmp/chk.log"
  echo "# concurrent: $(grep -h 'actually processed' "$tmp/ins.log" "$tmp/vac.log" "$tmp/chk.log" |
    awk '{print $NF}' | paste -sd/) inserts/vacuums/checks" >&3
  echo "# concurrent: deltas $d0 -> $(status deltas), loads $l0 -> $(status loads)" >&3
  ((rc == 0 && rci == 0 && rcv == 0)) && ! grep -q -i 'aborted\|error' "$tmp/chk.log" "$tmp/ins.log" "$tmp/vac.log" &&
    (($(status deltas) > d0))
}
check "inserts, deletes and VACUUM in other sessions: exact answers equal the sequential scan's" concurrent_ok
check "afterwards every answer equals a whole image's" equal 0 "SELECT mismatches()"

tap_end
