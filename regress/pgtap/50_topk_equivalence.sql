-- GpuTopK against PostgreSQL's own plan: for generated queries over random
-- tables (ties, NULLs, negative values, NaN and +-Infinity, empty and
-- one-row tables, k above the row count), the rows and their order with
-- gknn.enable_topk on equal those with it off. Every ORDER BY ends with the
-- unique id, so the order is total and the comparison exact; each case also
-- asserts that the plan really was GpuTopK, so a case cannot pass vacuously.
-- Some quals do not compile (PostgreSQL runs them: during the scan, or as a
-- recheck of the over-fetched candidates).
-- The parallel cases run on a plain (non-temporary) copy of the table with
-- parallel plans forced, and assert Gather Merge over a partial GpuTopK.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT setseed(0.2024);
SET LOCAL gknn.topk_min_rows = 0;
SET LOCAL enable_sort = off;  -- GpuTopK wins on these small tables; the "off" run sorts regardless

CREATE TEMP TABLE r (id int PRIMARY KEY, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, bo bool,
                     d date, ts timestamp, v vector(4));
INSERT INTO r
SELECT g,
       CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 20 - 10)::int2 END,
       CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 200 - 100)::int4 END,
       CASE WHEN random() < 0.1 THEN NULL WHEN random() < 0.05 THEN 9223372036854775807
            ELSE (random() * 1e12 - 5e11)::int8 END,
       CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * 10 - 5)::numeric, 1)::float4 END,
       CASE WHEN random() < 0.08 THEN NULL
            WHEN random() < 0.05 THEN 'NaN' WHEN random() < 0.05 THEN 'Infinity'
            WHEN random() < 0.05 THEN '-Infinity' WHEN random() < 0.03 THEN '-0'
            ELSE round((random() * 100 - 50)::numeric, 0)::float8 END,
       CASE WHEN random() < 0.1 THEN NULL ELSE random() < 0.5 END,
       CASE WHEN random() < 0.1 THEN NULL ELSE date '2020-01-01' + (random() * 50)::int END,
       CASE WHEN random() < 0.1 THEN NULL ELSE timestamp '2020-01-01' + (random() * 1000)::int * interval '1 minute' END,
       CASE WHEN random() < 0.1 THEN NULL
            ELSE ARRAY[(random() * 4)::int, (random() * 4)::int, (random() * 4)::int, (random() * 4)::int]::vector END
FROM generate_series(1, 3000) g;
CREATE TEMP TABLE r1 AS SELECT * FROM r WHERE id = 7;
CREATE TEMP TABLE r0 AS SELECT * FROM r WHERE false;
ANALYZE r;
ANALYZE r1;
ANALYZE r0;

CREATE FUNCTION pg_temp.rows_of(q text, topk bool) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  out text;
BEGIN
  EXECUTE format('SET LOCAL gknn.enable_topk = %s', topk);
  EXECUTE format('SELECT coalesce(string_agg(x::text, %L), %L) FROM (%s) x', ';', '<none>', q) INTO out;
  RETURN out;
END
$f$;

CREATE FUNCTION pg_temp.uses_topk(q text) RETURNS bool LANGUAGE plpgsql AS $f$
DECLARE
  line text;
BEGIN
  SET LOCAL gknn.enable_topk = on;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line LIKE '%GpuTopK%' THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END
$f$;

CREATE FUNCTION topk_keep(x int) RETURNS bool LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
  AS 'BEGIN RETURN x % 9 = 1; END';

CREATE TEMP TABLE keys(k text);
INSERT INTO keys VALUES ('i2'), ('i4'), ('i8'), ('f4'), ('f8'), ('bo'), ('d'), ('ts'),
  ('i4 * 3 + i2'), ('f8 * 0.5 + i4'), ('abs(f8)'), ('i8 % 1000'), ('CASE WHEN bo THEN i4 ELSE -i4 END'),
  ('greatest(i2, i4, 7)'), ('least(f4, f8)'), ('coalesce(f8, i4, 0)'), ('floor(f4 / 2)'),
  ('v <-> ''[1,2,3,0]'''), ('v <#> ''[1,0,1,0]'''), ('v <+> ''[0,0,0,0]'''), ('f4::int'), ('i4::float4 / 3'),
  ('ts'), ('d::timestamp'), ('power(abs(i2), 2)'), ('sqrt(abs(f4))'),
  ('i4 + 0.5 * i2'), ('i4 * 0.25 - i2::numeric'), ('abs(i2 * 1.5) - 0.125');
CREATE TEMP TABLE quals(w text);
INSERT INTO quals VALUES ('true'), ('i4 > 0'), ('f8 < 10 OR bo'), ('i2 BETWEEN -3 AND 4 AND f8 IS NOT NULL'),
  ('i4 IN (1, 2, 3, -5, NULL) OR i2 NOT IN (0, 1)'), ('NOT bo IS TRUE'), ('d < date ''2020-01-20'''),
  ('f8 = ''NaN'' OR f8 = ''Infinity'''), ('i8 % 3 = 0'), ('v IS NULL'), ('i4 * 0.5 > i2 + 0.75'),
  -- quals that do not compile: rechecked over candidates or filtered during
  -- the scan, alone and beside compiled ones; topk_keep's true selectivity
  -- (1 in 9) is far below the planner's default guess, so rechecks run out
  -- of candidates and fetch more
  ('i4::text LIKE ''1%'''), ('f8 > 0 AND i2::text <> ''3'''), ('topk_keep(i4)'), ('bo AND topk_keep(i2)');
CREATE TEMP TABLE cases AS
SELECT row_number() OVER () AS n,
       format('SELECT id, %s AS key FROM %s WHERE %s ORDER BY %s %s %s, id %s LIMIT %s',
              k, t, w, k, dir, nulls, CASE WHEN random() < 0.5 THEN 'DESC' ELSE '' END,
              lim || CASE WHEN random() < 0.2 THEN ' OFFSET 3' ELSE '' END) AS q
FROM (SELECT k, w, t,
             (ARRAY['', 'DESC'])[1 + (random() * 1.999)::int / 1] AS dir,
             (ARRAY['', 'NULLS FIRST', 'NULLS LAST'])[1 + floor(random() * 3)::int] AS nulls,
             (ARRAY[1, 5, 10, 50, 5000])[1 + floor(random() * 5)::int] AS lim
      FROM keys, quals, (VALUES ('r'), ('r'), ('r1'), ('r0')) tt(t)
      WHERE random() < 0.17) s;

-- Parallel: every participant keeps its own best LIMIT + OFFSET rows, Gather
-- Merge merges them by the ORDER BY, Limit applies OFFSET. The plan checked
-- is the one rows_of runs (the query inside its aggregate).
CREATE TABLE topk_par_r AS SELECT * FROM r;
ANALYZE topk_par_r;
CREATE FUNCTION pg_temp.uses_parallel_topk(q text) RETURNS bool LANGUAGE plpgsql AS $f$
DECLARE
  line text;
  gather bool := false;
BEGIN
  SET LOCAL gknn.enable_topk = on;
  FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT coalesce(string_agg(x::text, %L), %L) FROM (%s) x',
                             ';', '<none>', q) LOOP
    IF line LIKE '%Gather Merge%' THEN gather := true; END IF;
    IF gather AND line LIKE '%Parallel Custom Scan (GpuTopK)%' THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END
$f$;
CREATE TEMP TABLE pcases AS
SELECT row_number() OVER () AS n,
       format('SELECT id, %s AS key FROM topk_par_r WHERE %s ORDER BY %s %s %s, id %s LIMIT %s',
              k, w, k, dir, nulls, CASE WHEN random() < 0.5 THEN 'DESC' ELSE '' END,
              lim || CASE WHEN random() < 0.3 THEN ' OFFSET 3' ELSE '' END) AS q
FROM (SELECT k, w,
             (ARRAY['', 'DESC'])[1 + (random() * 1.999)::int / 1] AS dir,
             (ARRAY['', 'NULLS FIRST', 'NULLS LAST'])[1 + floor(random() * 3)::int] AS nulls,
             (ARRAY[1, 5, 10, 50, 5000])[1 + floor(random() * 5)::int] AS lim
      FROM keys, quals
      WHERE random() < 0.15) s;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;

SELECT plan(2 * (SELECT count(*)::int FROM cases) + 2 * (SELECT count(*)::int FROM pcases));
SELECT ok(pg_temp.uses_topk(q), 'plan is GpuTopK: ' || q) FROM cases ORDER BY n;
SELECT is(pg_temp.rows_of(q, true), pg_temp.rows_of(q, false), q) FROM cases ORDER BY n;
-- With topk_keep immutable, where rows are ranked on a GPU the serial plan
-- that rechecks only the candidates costs less than running topk_keep (a
-- plpgsql function: 100 operators a row) on every row in parallel, and the
-- planner rightly takes it. The parallel cases are about the parallel
-- plan's answers: marked volatile, topk_keep cannot be rechecked (it runs
-- during the scan, as in the parallel plan) and the parallel plan wins.
ALTER FUNCTION topk_keep(int) VOLATILE;
SELECT ok(pg_temp.uses_parallel_topk(q), 'plan is Gather Merge over GpuTopK: ' || q) FROM pcases ORDER BY n;
SELECT is(pg_temp.rows_of(q, true), pg_temp.rows_of(q, false), 'parallel: ' || q) FROM pcases ORDER BY n;
SELECT * FROM finish();
ROLLBACK;
