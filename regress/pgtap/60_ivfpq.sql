-- gpu_ivfpq: the SQL contract of the access method (catalog objects,
-- SQLSTATEs of its errors, planner use) and its search quality on a
-- synthetic clustered dataset with a fixed seed (recall@10 against the exact
-- answer, with floors it reaches), plus agreement of the CPU with the device
-- gknn.device picks (the same index, page for page, and the same answers; on
-- a host with no GPU both are the CPU; where gknn is preloaded, the build
-- runs in the GPU service).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(36);

-- catalog
SELECT ok(EXISTS (SELECT 1 FROM pg_am WHERE amname = 'gpu_ivfpq' AND amtype = 'i'), 'access method gpu_ivfpq exists');
SELECT has_function('gknn_ivfpq_handler', ARRAY['internal'], 'handler function exists');
SELECT has_function('gknn_ivfpq_info', ARRAY['regclass'], 'gknn_ivfpq_info(regclass) exists');
SELECT set_eq(
  $$SELECT c.opcname::text || ':' || o.oprname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
    JOIN pg_amop ao ON ao.amopfamily = c.opcfamily JOIN pg_operator o ON o.oid = ao.amopopr
    WHERE a.amname = 'gpu_ivfpq'$$,
  ARRAY['vector_l2_ops:<->', 'vector_ip_ops:<#>', 'vector_cosine_ops:<=>',
        'halfvec_l2_ops:<->', 'halfvec_ip_ops:<#>', 'halfvec_cosine_ops:<=>', 'bit_hamming_ops:<~>'],
  'seven operator classes (vector, halfvec, bit), one ordering operator each');
SELECT ok((SELECT bool_and(amvalidate(c.oid)) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
           WHERE a.amname = 'gpu_ivfpq'), 'amvalidate accepts the operator classes');
SELECT is((SELECT opcname::text FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
           WHERE a.amname = 'gpu_ivfpq' AND opcdefault), 'vector_l2_ops', 'vector_l2_ops is the default');
SELECT ok((SELECT bool_and(current_setting(n) IS NOT NULL) FROM unnest(ARRAY['gknn.ivfpq_probes', 'gknn.ivfpq_refine']) n),
          'GUCs gknn.ivfpq_probes and gknn.ivfpq_refine exist');

-- errors and their SQLSTATEs
CREATE TEMP TABLE e (id int, emb vector(6), v2 vector);
INSERT INTO e SELECT i, ARRAY[i, 1, 2, 3, 4, 5]::float8[]::vector, NULL FROM generate_series(1, 20) i;
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (emb) WITH (m = 4)$$, '22023', NULL,
                 'm not dividing the dimension: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (emb) WITH (nbits = 9)$$, '22023', NULL,
                 'nbits above 8: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (emb) WITH (nbits = 3)$$, '22023', NULL,
                 'nbits below 4: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (emb) WITH (lists = 0)$$, '22023', NULL, 'lists 0: 22023');
SELECT lives_ok($$CREATE INDEX ON e USING gpu_ivfpq ((emb::halfvec(6)) halfvec_l2_ops) WITH (lists = 2, m = 3)$$,
                'an expression index');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (emb halfvec_l2_ops)$$, '42804', NULL,
                 'a halfvec operator class on a vector column: 42804');
INSERT INTO e VALUES (100, '[1,2,3,4,5,6]', '[1,2]'), (101, '[1,2,3,4,5,6]', '[1,2,3]');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_ivfpq (v2) WITH (lists = 1, m = 1)$$, '22000', NULL,
                 'mixed dimensions: 22000');
CREATE INDEX e_idx ON e USING gpu_ivfpq (emb) WITH (lists = 2, m = 3);
SELECT throws_ok($$SELECT id FROM e ORDER BY emb <-> '[1,2,3]' LIMIT 1$$, '22000', NULL,
                 'query of another dimension: 22000');
SELECT throws_ok($$SELECT * FROM gknn_ivfpq_info('e'::regclass)$$, '42809', NULL,
                 'gknn_ivfpq_info of a table: 42809');

-- the dataset: 50 Gaussian-ish clusters in 32 dimensions, 6000 rows
SELECT setseed(0.42);
CREATE TEMP TABLE centers AS
SELECT c, ARRAY(SELECT random() * 20 - 10 FROM generate_series(1, 32) j WHERE c >= 0) AS x
FROM generate_series(0, 49) c;
CREATE TEMP TABLE items (id int PRIMARY KEY, emb vector(32));
INSERT INTO items
SELECT i, ARRAY(SELECT x[j] + (random() + random() + random() - 1.5) * 1.2 FROM generate_series(1, 32) j)::float8[]::vector
FROM generate_series(1, 6000) i JOIN centers ON c = i % 50;
CREATE TEMP TABLE queries AS
SELECT q, ARRAY(SELECT x[j] + (random() - 0.5) * 2 FROM generate_series(1, 32) j)::float8[]::vector(32) AS v
FROM generate_series(1, 40) q JOIN centers ON c = (q * 7) % 50;
ANALYZE items;

SET LOCAL gknn.device = cpu;
CREATE INDEX items_cpu ON items USING gpu_ivfpq (emb) WITH (lists = 50, m = 8, nbits = 8);
SELECT is((SELECT entries FROM gknn_ivfpq_info('items_cpu')), 6000::bigint, 'every row is in the index');

CREATE FUNCTION pg_temp.ids_by_index(q vector, k int) RETURNS int[] LANGUAGE sql
SET enable_seqscan = off SET enable_indexscan = on
AS $$ SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY emb <-> q LIMIT k) s $$;
CREATE FUNCTION pg_temp.ids_exact(q vector, k int) RETURNS int[] LANGUAGE sql
SET enable_indexscan = off SET enable_seqscan = on
AS $$ SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY emb <-> q, id LIMIT k) s $$;
CREATE FUNCTION pg_temp.recall(k int) RETURNS float8 LANGUAGE sql AS $$
  SELECT avg((SELECT count(*) FROM unnest(pg_temp.ids_by_index(v, k)) a
              WHERE a = ANY (pg_temp.ids_exact(v, k))) / k::float8) FROM queries $$;

CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP RETURN NEXT l; END LOOP;
END $$;
SET LOCAL gknn.ivfpq_probes = 1;
SET LOCAL gknn.ivfpq_refine = 1;
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.45::float8, 'recall@10 >= 0.45 with 1 probe, no refinement');
SET LOCAL gknn.ivfpq_probes = 5;
SET LOCAL gknn.ivfpq_refine = 4;
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.9::float8, 'recall@10 >= 0.9 with 5 probes, refine 4');
SET LOCAL gknn.ivfpq_probes = 10;
SET LOCAL gknn.ivfpq_refine = 10;
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.98::float8, 'recall@10 >= 0.98 with 10 probes, refine 10');
SELECT cmp_ok(pg_temp.recall(50), '>=', 0.95::float8, 'recall@50 >= 0.95 with 10 probes, refine 10');
SET LOCAL gknn.ivfpq_probes = 50;
SET LOCAL gknn.ivfpq_refine = 600;
SELECT is(pg_temp.recall(10), 1::float8, 'recall@10 = 1 with every list probed and every row re-ranked');

-- the planner picks the index for ORDER BY <-> LIMIT on this table by itself
-- (with the default probes and refine: probing everything costs more)
SET LOCAL gknn.ivfpq_probes = DEFAULT;
SET LOCAL gknn.ivfpq_refine = DEFAULT;
SELECT ok((SELECT bool_or(l LIKE '%Index Scan using items_cpu%') FROM
             (SELECT * FROM pg_temp.plan_of($$SELECT id FROM items ORDER BY emb <-> '[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]' LIMIT 10$$)) p(l)),
          'the planner uses the index for ORDER BY <-> LIMIT 10');

-- the device gknn.device picks builds the same index and finds the same rows
SET LOCAL gknn.ivfpq_probes = 4;
SET LOCAL gknn.ivfpq_refine = 2;
CREATE TEMP TABLE cpu_answers AS SELECT q, pg_temp.ids_by_index(v, 10) AS ids FROM queries;
RESET gknn.device;
CREATE TEMP TABLE build_before AS SELECT requests FROM gknn_service_status();
CREATE INDEX items_dev ON items USING gpu_ivfpq (emb) WITH (lists = 50, m = 8, nbits = 8);
SELECT CASE WHEN (SELECT state FROM gknn_service_status()) = 'ready' THEN
  ok((SELECT s.requests > b.requests FROM gknn_service_status() s, build_before b),
     'with the service ready, the build trained and encoded through it')
ELSE pass('with the service ready, the build trained and encoded through it (skipped: no service)') END;
CREATE EXTENSION IF NOT EXISTS pageinspect;
CREATE FUNCTION pg_temp.index_pages(idx regclass) RETURNS text LANGUAGE sql AS $$
  SELECT md5(string_agg(substr(get_raw_page(idx::text, b::int), 11), ''::bytea ORDER BY b))
  FROM generate_series(0, pg_relation_size(idx) / 8192 - 1) b $$;
SELECT is(pg_temp.index_pages('items_dev'), pg_temp.index_pages('items_cpu'),
          'the same pages as the CPU-built index, byte for byte past each page''s LSN and checksum');
SELECT is((SELECT row(trained, dims, lists, m, nbits, entries)::text FROM gknn_ivfpq_info('items_dev')),
          (SELECT row(trained, dims, lists, m, nbits, entries)::text FROM gknn_ivfpq_info('items_cpu')),
          'an index built on gknn.device has the CPU-built index''s shape');
SELECT is(pg_size_pretty(pg_relation_size('items_dev')), pg_size_pretty(pg_relation_size('items_cpu')),
          'and the same size');
DROP INDEX items_cpu;
SELECT set_eq($$SELECT q, pg_temp.ids_by_index(v, 10) FROM queries$$, $$SELECT q, ids FROM cpu_answers$$,
              'searches on gknn.device''s index find what the CPU-built index found');
SET LOCAL gknn.device = cpu;
SELECT set_eq($$SELECT q, pg_temp.ids_by_index(v, 10) FROM queries$$, $$SELECT q, ids FROM cpu_answers$$,
              'the CPU searching the same index finds the same');

-- halfvec: an expression index (emb::halfvec(32)) ranks as the halfvec
-- operator does; built on gknn.device or the CPU, the same index.
CREATE INDEX items_half_cpu ON items USING gpu_ivfpq ((emb::halfvec(32)) halfvec_l2_ops) WITH (lists = 50, m = 8);
CREATE FUNCTION pg_temp.half_by_index(q vector, k int) RETURNS int[] LANGUAGE sql
SET enable_seqscan = off SET enable_indexscan = on
AS $$ SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY emb::halfvec(32) <-> q::halfvec(32) LIMIT k) s $$;
CREATE FUNCTION pg_temp.half_exact(q vector, k int) RETURNS int[] LANGUAGE sql
SET enable_indexscan = off SET enable_seqscan = on
AS $$ SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY emb::halfvec(32) <-> q::halfvec(32), ctid LIMIT k) s $$;
SET LOCAL gknn.ivfpq_exact = on;
SELECT is((SELECT count(*) FROM queries WHERE pg_temp.half_by_index(v, 10) IS DISTINCT FROM pg_temp.half_exact(v, 10)),
          0::bigint, 'halfvec expression index, gknn.ivfpq_exact: the sequential scan''s rows in its order');
SET LOCAL gknn.ivfpq_exact = off;
SET LOCAL gknn.ivfpq_probes = 10;
SET LOCAL gknn.ivfpq_refine = 10;
SELECT cmp_ok((SELECT avg((SELECT count(*) FROM unnest(pg_temp.half_by_index(v, 10)) a
                           WHERE a = ANY (pg_temp.half_exact(v, 10))) / 10.0) FROM queries)::float8,
              '>=', 0.98::float8, 'halfvec expression index: recall@10 >= 0.98 with 10 probes, refine 10');
CREATE TEMP TABLE half_answers AS SELECT q, pg_temp.half_by_index(v, 10) AS ids FROM queries;
RESET gknn.device;
CREATE INDEX items_half_dev ON items USING gpu_ivfpq ((emb::halfvec(32)) halfvec_l2_ops) WITH (lists = 50, m = 8);
SELECT is((SELECT row(trained, dims, lists, m, nbits, entries, pg_relation_size('items_half_dev'))::text
           FROM gknn_ivfpq_info('items_half_dev')),
          (SELECT row(trained, dims, lists, m, nbits, entries, pg_relation_size('items_half_cpu'))::text
           FROM gknn_ivfpq_info('items_half_cpu')),
          'a halfvec index built on gknn.device has the CPU-built index''s shape and size');
DROP INDEX items_half_cpu;
SET LOCAL gknn.device = cpu;
SELECT set_eq($$SELECT q, pg_temp.half_by_index(v, 10) FROM queries$$, $$SELECT q, ids FROM half_answers$$,
              'and the CPU searching it finds what the CPU-built index found');
DROP INDEX items_half_dev;

-- The GPU service: where it does not run (gknn not preloaded), gknn.device =
-- gpu cannot search an index (55000, saying why); where it runs, a search
-- with gknn.device = auto goes through it (regress/service-live.sh checks
-- the service itself).
SET LOCAL enable_seqscan = off;
SET LOCAL gknn.device = gpu;
SELECT CASE WHEN (SELECT state FROM gknn_service_status()) = 'not running' THEN
  throws_ok($$SELECT id FROM items ORDER BY emb <-> (SELECT v FROM queries WHERE q = 1) LIMIT 3$$, '55000',
            'gknn.device is "gpu" but the gknn GPU service is not running',
            'no GPU service: gknn.device = gpu fails with 55000')
ELSE pass('no GPU service: gknn.device = gpu fails with 55000 (skipped: the service runs)') END;
SET LOCAL gknn.device = auto;
CREATE TEMP TABLE service_before AS SELECT searches FROM gknn_service_status();
SELECT ok(pg_temp.ids_by_index(v, 10) IS NOT NULL, 'a search with gknn.device = auto answers') FROM queries WHERE q = 1;
SELECT CASE WHEN (SELECT state FROM gknn_service_status()) = 'ready' THEN
  ok((SELECT s.searches > b.searches FROM gknn_service_status() s, service_before b),
     'with the service ready, gknn.device = auto searches through it')
ELSE pass('with the service ready, gknn.device = auto searches through it (skipped: no service)') END;

SELECT * FROM finish();
ROLLBACK;
