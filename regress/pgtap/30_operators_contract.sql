-- Operator contract: distances against SQL-level references computed in
-- double precision through vector::real[], the btree order against real[]'s
-- lexicographic order, a btree index against a plain scan, and parallel
-- avg()/sum() against serial runs and references.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(55);

-- EXPLAIN output of a statement, one string (plans are checked by pattern).
CREATE FUNCTION pg_temp.plan_of(stmt text, options text DEFAULT 'COSTS OFF') RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
  line text;
  acc text := '';
BEGIN
  FOR line IN EXECUTE format('EXPLAIN (%s) %s', options, stmt) LOOP
    acc := acc || line || E'\n';
  END LOOP;
  RETURN acc;
END
$f$;

-- 1. Distances ---------------------------------------------------------------------
-- 300 pairs: dims 1..50 once each (every tail length of the 8-lane sums),
-- then random dims; elements random() in [-1, 1); every 25th pair has b = a.
SELECT setseed(0.4242) AS seeded \gset
CREATE TEMP TABLE dims AS
SELECT i, CASE WHEN i <= 50 THEN i ELSE 1 + floor(random() * 50)::int END AS dim
FROM generate_series(1, 300) i;
CREATE TEMP TABLE elems AS
SELECT i, j, (random() * 2 - 1)::real AS x, (random() * 2 - 1)::real AS y
FROM dims, generate_series(1, dim) j ORDER BY i, j;
UPDATE elems SET y = x WHERE i % 25 = 0;
CREATE TEMP TABLE pairs AS
SELECT i, array_agg(x ORDER BY j)::vector AS a, array_agg(y ORDER BY j)::vector AS b
FROM elems GROUP BY i;

-- References in double precision, through the real[] cast and unnest.
CREATE TEMP TABLE refs AS
SELECT i,
       sqrt(sum((x::float8 - y::float8) ^ 2)) AS l2,
       sum(x::float8 * y::float8) AS ip,
       sum(abs(x::float8 * y::float8)) AS ip_scale,
       sum(x::float8 * y::float8) / nullif(sqrt(sum(x::float8 ^ 2)) * sqrt(sum(y::float8 ^ 2)), 0) AS cos_sim,
       sum(abs(x::float8 - y::float8)) AS l1,
       sqrt(sum(x::float8 ^ 2)) AS norm_a,
       array_agg(x + y ORDER BY o) AS add,  -- real + real: one float32 rounding, as vector +
       array_agg(x - y ORDER BY o) AS sub,
       array_agg(x * y ORDER BY o) AS mul
FROM pairs, unnest(a::real[], b::real[]) WITH ORDINALITY u(x, y, o)
GROUP BY i;

SELECT results_eq('SELECT count(*)::int, min(vector_dims(a)), max(vector_dims(a)), count(*) FILTER (WHERE a = b)::int FROM pairs',
                  $$VALUES (300, 1, 50, 12)$$,
                  '300 pairs with dims 1..50, 12 of them equal');
SELECT is((SELECT count(*)::int FROM refs r JOIN pairs p USING (i)), 300, 'a reference for every pair');

-- Relative tolerance 1e-5 (float32 sums vs a double reference). L2 and L1 sum
-- non-negative terms, so the scale is the result itself; the inner product's
-- scale is sum |x*y| (its value may cancel to ~0); cosine distance lies in
-- [0, 2], so its scale is 1.
SELECT is_empty($$SELECT i, a <-> b, r.l2 FROM pairs JOIN refs r USING (i)
                  WHERE NOT abs((a <-> b) - r.l2) <= 1e-5 * r.l2$$,
                '<-> matches sqrt(sum((x-y)^2)) within 1e-5 relative');
SELECT is_empty($$SELECT i, inner_product(a, b), r.ip FROM pairs JOIN refs r USING (i)
                  WHERE NOT abs(inner_product(a, b) - r.ip) <= 1e-5 * r.ip_scale$$,
                'inner_product matches sum(x*y) within 1e-5 of sum|x*y|');
SELECT is_empty($$SELECT i, a <=> b, 1 - r.cos_sim FROM pairs JOIN refs r USING (i)
                  WHERE NOT abs((a <=> b) - (1 - r.cos_sim)) <= 1e-5$$,
                '<=> matches 1 - x.y/(|x||y|) within 1e-5');
SELECT is_empty($$SELECT i, a <+> b, r.l1 FROM pairs JOIN refs r USING (i)
                  WHERE NOT abs((a <+> b) - r.l1) <= 1e-5 * r.l1$$,
                '<+> matches sum|x-y| within 1e-5 relative');
SELECT is_empty($$SELECT i, vector_norm(a), r.norm_a FROM pairs JOIN refs r USING (i)
                  WHERE NOT abs(vector_norm(a) - r.norm_a) <= 1e-12 * r.norm_a$$,
                'vector_norm matches sqrt(sum(x^2)) (double accumulation) within 1e-12');
SELECT is_empty($$SELECT i FROM pairs WHERE a = b AND NOT ((a <-> b) = 0 AND (a <+> b) = 0 AND (a <=> b) = 0)$$,
                'distances of a vector to itself are exactly 0');

-- Operators are their functions, exactly.
SELECT is_empty($$SELECT i FROM pairs WHERE (a <-> b) IS DISTINCT FROM l2_distance(a, b)$$,
                '<-> is l2_distance, exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <#> b) IS DISTINCT FROM -inner_product(a, b)$$,
                '<#> is -inner_product, exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <=> b) IS DISTINCT FROM cosine_distance(a, b)$$,
                '<=> is cosine_distance, exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <+> b) IS DISTINCT FROM l1_distance(a, b)$$,
                '<+> is l1_distance, exactly');

-- Commutativity, exactly.
SELECT is_empty($$SELECT i FROM pairs WHERE (a <-> b) IS DISTINCT FROM (b <-> a)$$, '<-> commutes exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <#> b) IS DISTINCT FROM (b <#> a)$$, '<#> commutes exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <=> b) IS DISTINCT FROM (b <=> a)$$, '<=> commutes exactly');
SELECT is_empty($$SELECT i FROM pairs WHERE (a <+> b) IS DISTINCT FROM (b <+> a)$$, '<+> commutes exactly');

-- Element-wise arithmetic: one float32 rounding per element, as real arithmetic.
SELECT is_empty($$SELECT i FROM pairs JOIN refs r USING (i) WHERE (a + b)::real[] IS DISTINCT FROM r.add$$,
                'vector + vector is element-wise float32 addition');
SELECT is_empty($$SELECT i FROM pairs JOIN refs r USING (i) WHERE (a - b)::real[] IS DISTINCT FROM r.sub$$,
                'vector - vector is element-wise float32 subtraction');
SELECT is_empty($$SELECT i FROM pairs JOIN refs r USING (i) WHERE (a * b)::real[] IS DISTINCT FROM r.mul$$,
                'vector * vector is element-wise float32 multiplication');

-- pgvector's edge cases.
SELECT is('[0,0]'::vector <=> '[1,1]', 'NaN'::float8, 'cosine distance to a zero vector is NaN');
SELECT throws_ok($$SELECT '[1,2]'::vector <-> '[1,2,3]'$$, '22000', 'different vector dimensions 2 and 3',
                 '<-> rejects different dimensions');
SELECT throws_ok($$SELECT '[1,2]'::vector <#> '[1,2,3]'$$, '22000', 'different vector dimensions 2 and 3',
                 '<#> rejects different dimensions');
SELECT throws_ok($$SELECT '[1,2]'::vector <=> '[1,2,3]'$$, '22000', 'different vector dimensions 2 and 3',
                 '<=> rejects different dimensions');
SELECT throws_ok($$SELECT '[1,2]'::vector <+> '[1,2,3]'$$, '22000', 'different vector dimensions 2 and 3',
                 '<+> rejects different dimensions');

-- 2. Btree order -------------------------------------------------------------------
-- Vectors with ties, shared prefixes and signed zeros: every vector of dims
-- 1..3 over {-1, 0, 1} (three times), signed-zero variants, prefixes of random
-- vectors, and random vectors.
CREATE TEMP TABLE ordset (id serial, v vector);
INSERT INTO ordset (v)
SELECT ARRAY[e1]::real[]::vector FROM unnest('{-1,0,1}'::real[]) e1, generate_series(1, 3)
UNION ALL
SELECT ARRAY[e1, e2]::real[]::vector FROM unnest('{-1,0,1}'::real[]) e1, unnest('{-1,0,1}'::real[]) e2,
       generate_series(1, 3)
UNION ALL
SELECT ARRAY[e1, e2, e3]::real[]::vector FROM unnest('{-1,0,1}'::real[]) e1, unnest('{-1,0,1}'::real[]) e2,
       unnest('{-1,0,1}'::real[]) e3, generate_series(1, 3);
INSERT INTO ordset (v) VALUES ('[-0]'), ('[-0,1]'), ('[1,-0]'), ('[-0,-0,-0]'), ('[1,-0,1]');
INSERT INTO ordset (v) SELECT subvector(a, 1, 2) FROM pairs WHERE i BETWEEN 40 AND 70;
INSERT INTO ordset (v) SELECT subvector(a, 1, 3) FROM pairs WHERE i BETWEEN 40 AND 70;
INSERT INTO ordset (v) SELECT a FROM pairs WHERE i BETWEEN 40 AND 120;

SELECT is((SELECT count(*)::int FROM ordset o1 JOIN ordset o2 ON o1.v::real[] = o2.v::real[] AND o1.id < o2.id)
          > 100, true, 'the ordering set has many ties');
-- Reference order: real[]'s (element by element, then the shorter first;
-- -0 equals 0).
SELECT is_empty($$SELECT o1.v, o2.v, vector_cmp(o1.v, o2.v) FROM ordset o1, ordset o2
                  WHERE vector_cmp(o1.v, o2.v) IS DISTINCT FROM
                        CASE WHEN o1.v::real[] < o2.v::real[] THEN -1
                             WHEN o1.v::real[] > o2.v::real[] THEN 1 ELSE 0 END$$,
                'vector_cmp is -1/0/1 by the lexicographic (shorter-first) order of real[]');
SELECT is_empty($$SELECT o1.v, o2.v FROM ordset o1, ordset o2, LATERAL (SELECT vector_cmp(o1.v, o2.v) AS c) c
                  WHERE (o1.v < o2.v) IS DISTINCT FROM (c < 0) OR (o1.v <= o2.v) IS DISTINCT FROM (c <= 0)
                     OR (o1.v = o2.v) IS DISTINCT FROM (c = 0) OR (o1.v <> o2.v) IS DISTINCT FROM (c <> 0)
                     OR (o1.v >= o2.v) IS DISTINCT FROM (c >= 0) OR (o1.v > o2.v) IS DISTINCT FROM (c > 0)$$,
                '< <= = <> >= > agree with vector_cmp on every pair');
SELECT is_empty('SELECT id FROM ordset WHERE NOT (v = v) OR v <> v OR NOT (v = v::text::vector)',
                '= is reflexive (also through a text round trip)');
SELECT ok('[-0,1]'::vector = '[0,1]' AND vector_cmp('[1,2]', '[1,2,-5]') = -1
          AND '[1,2]'::vector < '[1,2,-5]' AND '[2]'::vector > '[1,9,9]',
          '-0 equals 0; a prefix sorts first; the first difference decides');
SELECT results_eq('SELECT id FROM ordset ORDER BY v, id', 'SELECT id FROM ordset ORDER BY v::real[], id',
                  'ORDER BY v (the btree opclass) sorts like real[]');
SELECT results_eq('SELECT id FROM ordset ORDER BY v DESC, id', 'SELECT id FROM ordset ORDER BY v::real[] DESC, id',
                  'ORDER BY v DESC sorts like real[] DESC');
SELECT is_empty($$SELECT * FROM (SELECT lag(v) OVER (ORDER BY v) AS prev, v FROM ordset) s
                  WHERE prev IS NOT NULL AND (vector_cmp(prev, v) > 0 OR prev > v)$$,
                'consecutive rows of ORDER BY v never compare descending');

-- 3. Btree index --------------------------------------------------------------------
-- 5000 rows drawn from a pool of 150 distinct vectors (so lookups find many
-- rows); probes are every pool vector plus some that are absent.
CREATE TEMP TABLE pool AS SELECT row_number() OVER (ORDER BY id) AS pid, v
FROM (SELECT DISTINCT ON (v::real[]) id, v FROM ordset ORDER BY v::real[], id) d;
SELECT cmp_ok((SELECT count(*)::int FROM pool), '>=', 100, 'the lookup pool has at least 100 distinct vectors');
CREATE TEMP TABLE bt AS
SELECT g AS id, (SELECT v FROM pool WHERE pid = 1 + (g * 7919) % (SELECT count(*) FROM pool)) AS v
FROM generate_series(1, 5000) g;
INSERT INTO bt VALUES (5001, '[-0,-0,-0]'), (5002, '[0,0,0]');
CREATE TEMP TABLE probes AS
SELECT pid, v FROM pool
UNION ALL SELECT 1000 + i, a FROM pairs WHERE i BETWEEN 200 AND 210
UNION ALL VALUES (2000, '[0.5]'::vector), (2001, '[0,0,0,0]'), (2002, '[-0]');
CREATE TEMP TABLE ranges AS
SELECT p1.pid * 1000 + p2.pid AS rid, p1.v AS lo, p2.v AS hi
FROM pool p1, pool p2 WHERE p1.pid % 10 = 1 AND p2.pid % 10 = 3 AND p1.v < p2.v;

SELECT lives_ok('CREATE INDEX bt_v_idx ON bt USING btree (v)', 'CREATE INDEX USING btree on a vector column');
ANALYZE bt, probes, ranges;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT matches(pg_temp.plan_of($$SELECT id FROM bt WHERE v = '[1,0,-1]'$$),
               'Index (Only )?Scan using bt_v_idx on bt.*Index Cond: \(v = ',
               'an equality lookup uses the btree index');
SELECT matches(pg_temp.plan_of('SELECT p.pid, b.id FROM probes p CROSS JOIN LATERAL (SELECT id FROM bt WHERE v = p.v OFFSET 0) b'),
               'Index (Only )?Scan using bt_v_idx on bt.*Index Cond: \(v = p\.v\)',
               'the lateral equality lookups use the btree index');
SELECT matches(pg_temp.plan_of('SELECT r.rid, b.id FROM ranges r CROSS JOIN LATERAL (SELECT id FROM bt WHERE v >= r.lo AND v < r.hi OFFSET 0) b'),
               'Index (Only )?Scan using bt_v_idx on bt.*Index Cond: \(\(v >= r\.lo\) AND \(v < r\.hi\)\)',
               'the lateral range lookups use the btree index');
CREATE TEMP TABLE eq_by_index AS
SELECT p.pid, b.id FROM probes p CROSS JOIN LATERAL (SELECT id FROM bt WHERE v = p.v OFFSET 0) b;
CREATE TEMP TABLE range_by_index AS
SELECT r.rid, b.id FROM ranges r CROSS JOIN LATERAL (SELECT id FROM bt WHERE v >= r.lo AND v < r.hi OFFSET 0) b;
SET LOCAL enable_seqscan = on;
SET LOCAL enable_indexscan = off;
SET LOCAL enable_indexonlyscan = off;
SELECT doesnt_match(pg_temp.plan_of('SELECT p.pid, b.id FROM probes p, bt b WHERE b.v::real[] = p.v::real[]'),
                    'bt_v_idx', 'the reference lookups do not use the index');
SELECT results_eq('SELECT pid, id FROM eq_by_index ORDER BY pid, id',
                  'SELECT p.pid, b.id FROM probes p, bt b WHERE b.v::real[] = p.v::real[] ORDER BY pid, id',
                  'index equality lookups return the rows a seq scan finds with real[] equality');
SELECT results_eq('SELECT rid, id FROM range_by_index ORDER BY rid, id',
                  'SELECT r.rid, b.id FROM ranges r, bt b WHERE b.v::real[] >= r.lo::real[] AND b.v::real[] < r.hi::real[] ORDER BY rid, id',
                  'index range lookups return the rows a seq scan finds with real[] comparisons');
SELECT cmp_ok((SELECT count(*)::int FROM eq_by_index), '>', 5000, 'the equality lookups found rows');
SELECT cmp_ok((SELECT count(*)::int FROM range_by_index), '>', 1000, 'the range lookups found rows');
SELECT throws_ok('CREATE UNIQUE INDEX ON bt (v) WHERE id > 5000', '23505', NULL,
                 'a unique btree index treats [-0,-0,-0] and [0,0,0] as duplicates');
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_indexscan;
RESET enable_indexonlyscan;

-- 4. avg() and sum(), parallel -------------------------------------------------------
-- A plain (not temporary) table, so parallel workers can scan it; it is
-- created in this transaction and goes with the ROLLBACK. r: random values;
-- q: multiples of 1/4 in [-2, 2), whose float32 and float64 sums are exact in
-- any order, so parallel, serial and reference results must agree exactly.
CREATE TABLE gknn_tap_30_agg AS
SELECT g AS id,
       ARRAY[random(), random(), random(), random(), random(), random(), random(), random()]::real[]::vector(8) AS r,
       ARRAY[floor(random() * 16) / 4 - 2, floor(random() * 16) / 4 - 2, floor(random() * 16) / 4 - 2,
             floor(random() * 16) / 4 - 2, floor(random() * 16) / 4 - 2, floor(random() * 16) / 4 - 2,
             floor(random() * 16) / 4 - 2, floor(random() * 16) / 4 - 2]::real[]::vector(8) AS q
FROM generate_series(1, 100000) g;
ANALYZE gknn_tap_30_agg;

CREATE TEMP TABLE agg_ref AS
SELECT o, avg(x::float8) AS avg_r, sum(x::float8) AS sum_r, sum(abs(x::float8)) AS scale_r,
       (sum(y::float8) / count(*))::real AS avg_q, sum(y::float8)::real AS sum_q
FROM gknn_tap_30_agg, unnest(r::real[], q::real[]) WITH ORDINALITY u(x, y, o)
GROUP BY o;

SET LOCAL max_parallel_workers_per_gather = 0;
SELECT doesnt_match(pg_temp.plan_of('SELECT avg(r), sum(r), avg(q), sum(q) FROM gknn_tap_30_agg'),
                    'Gather', 'serial plan: no Gather');
CREATE TEMP TABLE agg_serial AS
SELECT avg(r)::real[] AS avg_r, sum(r)::real[] AS sum_r, avg(q)::real[] AS avg_q, sum(q)::real[] AS sum_q
FROM gknn_tap_30_agg;

SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SELECT matches(pg_temp.plan_of('SELECT avg(r), sum(r), avg(q), sum(q) FROM gknn_tap_30_agg'),
               'Finalize Aggregate.*Gather.*Partial Aggregate.*Parallel Seq Scan on gknn_tap_30_agg',
               'parallel plan: Finalize Aggregate over Gather over Partial Aggregate');
-- Run it (EXPLAIN ANALYZE of the CREATE TABLE AS executes it) and report how
-- many workers ran; with none launched the leader computes alone.
SELECT diag(substring(pg_temp.plan_of(
  $$CREATE TEMP TABLE agg_parallel AS
    SELECT avg(r)::real[] AS avg_r, sum(r)::real[] AS sum_r, avg(q)::real[] AS avg_q, sum(q)::real[] AS sum_q
    FROM gknn_tap_30_agg$$, 'ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF') FROM 'Workers Launched: [0-9]+'));
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

SELECT is((SELECT avg_q FROM agg_parallel), (SELECT array_agg(avg_q ORDER BY o) FROM agg_ref),
          'parallel avg of exactly summable values equals the reference exactly');
SELECT is((SELECT sum_q FROM agg_parallel), (SELECT array_agg(sum_q ORDER BY o) FROM agg_ref),
          'parallel sum of exactly summable values equals the reference exactly');
SELECT results_eq('SELECT avg_q, sum_q FROM agg_parallel', 'SELECT avg_q, sum_q FROM agg_serial',
                  'parallel and serial avg/sum of exactly summable values are equal');
-- avg accumulates in float8: 1e-6 relative covers the float32 result.
SELECT is_empty($$SELECT o, p.avg_r[o], s.avg_r[o], r.avg_r FROM agg_ref r, agg_parallel p, agg_serial s
                  WHERE NOT (abs(p.avg_r[o] - r.avg_r) <= 1e-6 * abs(r.avg_r)
                         AND abs(s.avg_r[o] - r.avg_r) <= 1e-6 * abs(r.avg_r))$$,
                'parallel and serial avg of random values match the float8 reference within 1e-6');
-- sum accumulates in float32 (as pgvector): 1e-4 of sum |x| over 100000 rows.
SELECT is_empty($$SELECT o, p.sum_r[o], s.sum_r[o], r.sum_r FROM agg_ref r, agg_parallel p, agg_serial s
                  WHERE NOT (abs(p.sum_r[o] - r.sum_r) <= 1e-4 * r.scale_r
                         AND abs(s.sum_r[o] - r.sum_r) <= 1e-4 * r.scale_r)$$,
                'parallel and serial sum of random values match the float8 reference within 1e-4');
SELECT is((SELECT array_length(avg_r, 1) + array_length(sum_r, 1) FROM agg_parallel), 16,
          'parallel avg and sum have 8 dimensions');

-- The combine step directly (what a Finalize Aggregate runs).
SELECT is(vector_combine(vector_accum(vector_accum('{0}', '[1,2]'), '[3,4]'), vector_accum('{0}', '[5,9]')),
          '{3,9,15}'::float8[], 'vector_combine adds counts and sums');
SELECT is(vector_avg(vector_combine('{0}', vector_accum('{0}', '[5,9]')))::text || ' ' ||
          vector_avg(vector_combine(vector_accum('{0}', '[5,9]'), '{0}'))::text,
          '[5,9] [5,9]', 'an empty partial state combines as the identity');
SELECT throws_ok($$SELECT vector_combine(vector_accum('{0}', '[1,2]'), vector_accum('{0}', '[1,2,3]'))$$,
                 '22000', 'expected 2 dimensions, not 3', 'vector_combine rejects states of different dimensions');
SELECT results_eq($$SELECT avg(v), sum(v) FROM (SELECT '[1,2]'::vector WHERE false) t(v)$$,
                  $$VALUES (NULL::vector, NULL::vector)$$, 'avg and sum of no rows are NULL');

SELECT * FROM finish();
ROLLBACK;
