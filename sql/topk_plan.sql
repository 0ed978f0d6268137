-- GpuTopK: plan shapes, EXPLAIN, GUCs, errors with PostgreSQL's SQLSTATEs.
SET gknn.device = cpu;
SET gknn.topk_min_rows = 0;
CREATE TABLE tk (id int, a int4, b float8, c int8, s text, e vector(3));
INSERT INTO tk SELECT i, (i * 7) % 13 - 6,
  CASE WHEN i % 11 = 0 THEN 'NaN' WHEN i % 17 = 0 THEN NULL ELSE (i % 23) / 3.0 END,
  i * 1000, 'x' || i, ARRAY[i % 5, i % 3, 1]::vector
FROM generate_series(1, 2000) i;
ANALYZE tk;

-- the path, its keys and where the quals run
EXPLAIN (COSTS OFF, VERBOSE) SELECT id, b FROM tk WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
SELECT id, b FROM tk WHERE a > 0 ORDER BY b DESC, id LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY e <-> '[1,1,1]', id LIMIT 3 OFFSET 2;
SELECT id, e <-> '[1,1,1]' AS d FROM tk ORDER BY e <-> '[1,1,1]', id LIMIT 3 OFFSET 2;
SET enable_sort = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT id FROM tk WHERE b < 2 ORDER BY a NULLS FIRST, id DESC LIMIT 4;
-- with TIMING, where the time went: the scan (heap, deform) and the ranking
CREATE FUNCTION tk_times(q text) RETURNS TABLE (key text, ok bool) LANGUAGE plpgsql AS $$
DECLARE p jsonb;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO p;
  p := jsonb_path_query_first(p, 'strict $.**?(@."Custom Plan Provider" == "GpuTopK")');
  RETURN QUERY SELECT k, (p->>k)::float8 >= 0 FROM unnest(ARRAY['Scan Time', 'Rank Time']) k;
END $$;
SELECT * FROM tk_times('SELECT id FROM tk WHERE b < 2 ORDER BY a NULLS FIRST, id DESC LIMIT 4');
DROP FUNCTION tk_times(text);
-- a qual that does not compile is rechecked by PostgreSQL over candidates:
-- the best rows by the compiled quals, fetched in order until k pass
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE s LIKE 'x1%' ORDER BY b, id LIMIT 3;
SELECT id FROM tk WHERE s LIKE 'x1%' ORDER BY b, id LIMIT 3;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, VERBOSE)
  SELECT id FROM tk WHERE a > 0 AND s LIKE 'x1%' ORDER BY b DESC, id LIMIT 4 OFFSET 1;
SELECT id FROM tk WHERE a > 0 AND s LIKE 'x1%' ORDER BY b DESC, id LIMIT 4 OFFSET 1;
SET gknn.enable_topk = off;
SELECT id FROM tk WHERE a > 0 AND s LIKE 'x1%' ORDER BY b DESC, id LIMIT 4 OFFSET 1;
RESET gknn.enable_topk;
-- the planner thinks a third of the rows pass (a function's default
-- selectivity), 1 in 10 or 1 in 97 does: the candidates run out, a second
-- round takes 8 times as many (enough for 1 in 10), then a third filters
-- during the scan; the answers are PostgreSQL's
CREATE FUNCTION tk_every(i int, m int) RETURNS bool LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN i % m = 5; END';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT id FROM tk WHERE tk_every(id, 10) ORDER BY a, id LIMIT 5 OFFSET 2;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT id FROM tk WHERE tk_every(id, 97) ORDER BY a, id LIMIT 5 OFFSET 2;
CREATE TEMP TABLE tk_every_gpu AS
  SELECT m, ARRAY(SELECT id FROM tk WHERE tk_every(id, m) ORDER BY a, id LIMIT 5 OFFSET 2) AS ids
  FROM (VALUES (10), (97)) v(m);
SET gknn.enable_topk = off;
SELECT m, ids AS gknn, ids = ARRAY(SELECT id FROM tk WHERE tk_every(id, m) ORDER BY a, id LIMIT 5 OFFSET 2) AS same
FROM tk_every_gpu ORDER BY m;
RESET gknn.enable_topk;
-- filtered during the scan instead: where fetching the candidates would
-- cost more (LIMIT 1000 of 2000 rows), where they would exceed
-- gknn.max_k, and for a volatile qual (PostgreSQL runs it on every row)
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE tk_every(id, 97) ORDER BY a, id LIMIT 1000;
SET gknn.max_k = 50;
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE s LIKE 'x1%' ORDER BY b, id LIMIT 30;
RESET gknn.max_k;
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE a > 0 AND random() < 2 ORDER BY a, id LIMIT 3;
DROP FUNCTION tk_every(int, int);
-- sub-selects: an InitPlan's result and a correlated outer column are
-- values like $n (the scan recompiles on every rescan); the answers equal
-- PostgreSQL's own plan
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE a > (SELECT min(a) FROM tk) ORDER BY e <-> (SELECT e FROM tk WHERE id = 7), id LIMIT 3;
SELECT id FROM tk WHERE a > (SELECT min(a) FROM tk) ORDER BY e <-> (SELECT e FROM tk WHERE id = 7), id LIMIT 3;
CREATE TABLE tkq (qid int, q vector(3));
INSERT INTO tkq VALUES (1, '[0,0,1]'), (2, '[4,2,1]'), (3, NULL), (4, '[2,1,1]');
EXPLAIN (COSTS OFF) SELECT qid, ARRAY(SELECT id FROM tk ORDER BY e <-> q, id LIMIT 4) FROM tkq;
CREATE TABLE tk_gpu AS SELECT qid, ARRAY(SELECT id FROM tk WHERE a <> qid ORDER BY e <-> q, id LIMIT 4) AS ids FROM tkq;
SET gknn.enable_topk = off;
SELECT qid, g.ids AS gknn, ARRAY(SELECT id FROM tk WHERE a <> qid ORDER BY e <-> q, id LIMIT 4) = g.ids AS same
FROM tkq JOIN tk_gpu g USING (qid) ORDER BY qid;
RESET gknn.enable_topk;
-- a sub-select left per row (SubPlan) in the target list or a qual: not offered
EXPLAIN (COSTS OFF) SELECT id, (SELECT count(*) FROM tkq WHERE qid < tk.a) FROM tk ORDER BY b, id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE a IN (SELECT qid FROM tkq WHERE qid > tk.a - 3) ORDER BY b, id LIMIT 3;
DROP TABLE tkq, tk_gpu;
RESET enable_sort;

-- not offered: no LIMIT, FOR UPDATE, an ORDER BY that does not compile, grouping
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY b;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY b LIMIT 3 FOR UPDATE;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY s LIMIT 3;
EXPLAIN (COSTS OFF) SELECT a, count(*) FROM tk GROUP BY a ORDER BY a LIMIT 3;

-- GUCs
SET gknn.enable_topk = off;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY b, id LIMIT 3;
RESET gknn.enable_topk;
SET gknn.max_k = 2;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY b, id LIMIT 3;
RESET gknn.max_k;
SET gknn.topk_min_rows = 100000;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY b, id LIMIT 3;
SET gknn.topk_min_rows = 0;

-- LIMIT as a parameter of a generic plan, LIMIT 0, LIMIT above the row count
PREPARE q(int, vector) AS SELECT id FROM tk ORDER BY e <-> $2, id LIMIT $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q(2, '[0,0,1]');
EXECUTE q(2, '[0,0,1]');
EXECUTE q(0, '[0,0,1]');
SELECT count(*) FROM (SELECT id FROM tk WHERE a = 3 ORDER BY c DESC LIMIT 100000) x;
RESET plan_cache_mode;

-- numeric keys and quals compile where float8 is exact at every step:
-- int2/int4 columns, dyadic constants (0.5, 1.25; not 0.1), + - * abs
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY a + 0.5 * id DESC, id LIMIT 3;
SELECT id, a + 0.5 * id AS score FROM tk ORDER BY a + 0.5 * id DESC, id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE a * 1.25 > 2.5 ORDER BY -abs(a - 2.75), id LIMIT 3;
SELECT id, -abs(a - 2.75) FROM tk WHERE a * 1.25 > 2.5 ORDER BY -abs(a - 2.75), id LIMIT 3;
-- not exact, so not compiled: 0.1, division, int8, a product above 2^53
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY a + 0.1 * id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY a / 2.0 LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY c * 0.5 LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM tk ORDER BY a * 1.5 * id * id LIMIT 3;
-- a qual that does not compile (0.1) runs in PostgreSQL
EXPLAIN (COSTS OFF) SELECT id FROM tk WHERE a * 0.1 > 0.3 ORDER BY b, id LIMIT 3;
RESET enable_sort;

-- errors: PostgreSQL's SQLSTATEs and messages
\set VERBOSITY sqlstate
SELECT id FROM tk ORDER BY 100 / a LIMIT 3;
SELECT id FROM tk ORDER BY a * 2147483647 LIMIT 3;
SELECT id FROM tk ORDER BY c * 9223372036854775 LIMIT 3;
SELECT id FROM tk ORDER BY sqrt(a) LIMIT 3;
SELECT id FROM tk ORDER BY ln(a + 6) LIMIT 3;
SELECT id FROM tk ORDER BY b * 1e308 LIMIT 3;
SELECT id FROM tk ORDER BY e <-> '[1,2]' LIMIT 3;
SELECT id FROM tk ORDER BY b LIMIT -1;
SELECT id FROM tk ORDER BY b LIMIT 1 OFFSET -1;
\set VERBOSITY default
SELECT id FROM tk ORDER BY 100 / a LIMIT 3;
SELECT id FROM tk ORDER BY e <-> '[1,2]' LIMIT 3;
-- false AND (error) does not raise, as in PostgreSQL
SELECT id FROM tk WHERE a <> 0 AND 100 / a > 50 ORDER BY id LIMIT 3;
DROP TABLE tk;
