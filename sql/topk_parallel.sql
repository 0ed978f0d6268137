-- GpuTopK in parallel plans: Limit over Gather Merge over a partial GpuTopK
-- in every participant (each scans its share of the heap through a parallel
-- table scan and returns its own best LIMIT + OFFSET rows in order).
SET gknn.topk_min_rows = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = on;
SET enable_sort = off;  -- PostgreSQL's own Gather Merge over Sort loses
CREATE TABLE tp (id int, a int4, b float8, s text, e vector(3));
INSERT INTO tp SELECT i, (i * 7) % 13 - 6,
  CASE WHEN i % 11 = 0 THEN 'NaN' WHEN i % 17 = 0 THEN NULL ELSE (i % 23) / 3.0 END,
  'x' || i, ARRAY[i % 5, i % 3, 1]::vector
FROM generate_series(1, 20000) i;
ANALYZE tp;

-- the plan
EXPLAIN (COSTS OFF, VERBOSE) SELECT id, b FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
SELECT id, b FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
-- OFFSET: each participant returns LIMIT + OFFSET rows, the Limit skips
EXPLAIN (COSTS OFF) SELECT id FROM tp ORDER BY e <-> '[1,1,1]', id LIMIT 3 OFFSET 2;
SELECT id, e <-> '[1,1,1]' AS d FROM tp ORDER BY e <-> '[1,1,1]', id LIMIT 3 OFFSET 2;
-- a qual that does not compile runs in PostgreSQL in every participant
EXPLAIN (COSTS OFF) SELECT id FROM tp WHERE s LIKE 'x1%' ORDER BY b, id LIMIT 3;
SELECT id FROM tp WHERE s LIKE 'x1%' ORDER BY b, id LIMIT 3;
-- the same answers as PostgreSQL's plan
CREATE TEMP TABLE answers AS
  SELECT 1 AS q, array_agg(id) AS ids FROM (SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 50) x
  UNION ALL SELECT 2, array_agg(id) FROM (SELECT id FROM tp ORDER BY e <-> '[1,1,1]', id LIMIT 7 OFFSET 40) x
  UNION ALL SELECT 3, array_agg(id) FROM (SELECT id FROM tp WHERE s LIKE 'x1%' ORDER BY a DESC, b, id LIMIT 30) x;
SET gknn.enable_topk = off;
SELECT q, ids = (CASE q
    WHEN 1 THEN (SELECT array_agg(id) FROM (SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 50) x)
    WHEN 2 THEN (SELECT array_agg(id) FROM (SELECT id FROM tp ORDER BY e <-> '[1,1,1]', id LIMIT 7 OFFSET 40) x)
    WHEN 3 THEN (SELECT array_agg(id) FROM (SELECT id FROM tp WHERE s LIKE 'x1%' ORDER BY a DESC, b, id LIMIT 30) x)
  END) AS same FROM answers ORDER BY q;
RESET gknn.enable_topk;

-- EXPLAIN ANALYZE: the leader's lines and one per worker; every heap row is
-- scanned by exactly one participant, and every launched worker reports
CREATE FUNCTION topk_workers(q text) RETURNS TABLE (launched_all_report bool, rows_scanned_total bigint)
LANGUAGE plpgsql AS $f$
DECLARE
  plan json;
  gm json;
  node json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
  gm := plan -> 0 -> 'Plan' -> 'Plans' -> 0;
  node := gm -> 'Plans' -> 0;
  RETURN QUERY SELECT
    (gm ->> 'Workers Launched')::int = coalesce(json_array_length(node -> 'GpuTopK Workers'), 0),
    coalesce((node ->> 'Rows Scanned')::bigint, 0)
      + coalesce((SELECT sum((w ->> 'Rows Scanned')::bigint) FROM json_array_elements(node -> 'GpuTopK Workers') w), 0)::bigint;
END
$f$;
SELECT * FROM topk_workers('SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5');
SELECT * FROM topk_workers('SELECT id FROM tp ORDER BY e <-> ''[1,1,1]'', id LIMIT 3 OFFSET 2');
-- text format: the leader's lines, then "Worker N:" lines (numbers and
-- where they ranked vary: the GPU service where gknn is preloaded, else the
-- backend's CPU; only the shape is shown, each distinct line once)
CREATE FUNCTION topk_explain_shape(q text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  line text;
  seen text[] := '{}';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    line := regexp_replace(line, '(Batches: [0-9]+).*$', '\1');
    line := regexp_replace(line, 'Ranked On: (service GPU [0-9]+|service CPU|backend CPU \([^)]*\))', 'Ranked On: R');
    line := regexp_replace(line, '[0-9]+', 'N', 'g');
    CONTINUE WHEN line ~ '^ *(Bytes To Device|GPU Time|Workers Launched|Service|Queue Wait)' OR line = ANY (seen);
    seen := seen || line;
    RETURN NEXT line;
  END LOOP;
END
$f$;
SELECT * FROM topk_explain_shape('SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5');
SET max_parallel_workers = 0;  -- no worker starts: the leader scans everything alone
SELECT * FROM topk_workers('SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5');
SELECT id, b FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
RESET max_parallel_workers;

-- gknn.device = cpu: every participant ranks on its own CPU (with gknn
-- preloaded too: nothing goes to the GPU service)
SET gknn.device = cpu;
CREATE FUNCTION topk_devices(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  plan json;
  node json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
  node := plan -> 0 -> 'Plan' -> 'Plans' -> 0 -> 'Plans' -> 0;
  RETURN (SELECT string_agg(DISTINCT d, ',') FROM (
    SELECT node ->> 'Ranked On' AS d
    UNION ALL SELECT w ->> 'Ranked On' FROM json_array_elements(node -> 'GpuTopK Workers') w) x);
END
$f$;
SELECT topk_devices('SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5');
SELECT id, b FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
DROP FUNCTION topk_devices(text);
RESET gknn.device;

-- LIMIT as a parameter of a generic plan; LIMIT 0
PREPARE q(int, int) AS SELECT id FROM tp ORDER BY a DESC, b, id LIMIT $1 OFFSET $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q(3, 1);
EXECUTE q(3, 1);
EXECUTE q(0, 0);
RESET plan_cache_mode;

-- rescans: the inner side of a nested loop (left join: the subquery must be
-- inner) runs again for every outer row (ReInitializeDSMCustomScan)
SET enable_material = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF)
SELECT v.x, s.id FROM (VALUES (1), (2), (3)) v(x)
  LEFT JOIN (SELECT id FROM tp WHERE a > 4 ORDER BY b DESC, id LIMIT 4) s ON s.id % 3 <> v.x % 3;
SELECT v.x, s.id FROM (VALUES (1), (2), (3)) v(x)
  LEFT JOIN (SELECT id FROM tp WHERE a > 4 ORDER BY b DESC, id LIMIT 4) s ON s.id % 3 <> v.x % 3;
-- three runs: every run scans the whole table once between its participants
-- (EXPLAIN ANALYZE's numbers are totals over the runs)
CREATE FUNCTION topk_rescanned_rows(q text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
  plan json;
  node json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
  node := plan -> 0 -> 'Plan' -> 'Plans' -> 1 -> 'Plans' -> 0 -> 'Plans' -> 0;
  RETURN coalesce((node ->> 'Rows Scanned')::bigint, 0)
    + coalesce((SELECT sum((w ->> 'Rows Scanned')::bigint) FROM json_array_elements(node -> 'GpuTopK Workers') w), 0);
END
$f$;
SELECT topk_rescanned_rows($$SELECT v.x, s.id FROM (VALUES (1), (2), (3)) v(x)
  LEFT JOIN (SELECT id FROM tp WHERE a > 4 ORDER BY b DESC, id LIMIT 4) s ON s.id % 3 <> v.x % 3$$);
DROP FUNCTION topk_rescanned_rows(text);
SET gknn.enable_topk = off;
SELECT v.x, s.id FROM (VALUES (1), (2), (3)) v(x)
  LEFT JOIN (SELECT id FROM tp WHERE a > 4 ORDER BY b DESC, id LIMIT 4) s ON s.id % 3 <> v.x % 3;
RESET gknn.enable_topk;
RESET enable_material;
RESET enable_hashjoin;
RESET enable_mergejoin;

-- not parallel: volatile target list, a temporary table
EXPLAIN (COSTS OFF) SELECT id, random() > 2 FROM tp ORDER BY b, id LIMIT 3;
CREATE TEMP TABLE tpt AS SELECT * FROM tp;
ANALYZE tpt;
EXPLAIN (COSTS OFF) SELECT id FROM tpt ORDER BY b, id LIMIT 3;

-- an error in any participant is raised with PostgreSQL's SQLSTATE
\set VERBOSITY sqlstate
SELECT id FROM tp ORDER BY 100 / a LIMIT 3;
SELECT id FROM tp ORDER BY a * 2147483647 LIMIT 3;
\set VERBOSITY default
-- without the leader, the error comes from a worker, as a clean SQL error
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT id FROM tp ORDER BY 100 / a LIMIT 3;
SELECT id FROM tp ORDER BY 100 / a LIMIT 3;
SELECT id FROM tp ORDER BY a * 2147483647 LIMIT 3;
SELECT * FROM topk_explain_shape('SELECT id FROM tp WHERE a > 0 ORDER BY b DESC, id LIMIT 5');
RESET parallel_leader_participation;
DROP TABLE tp;
DROP FUNCTION topk_workers(text);
DROP FUNCTION topk_explain_shape(text);
