-- gpu_graph: the SQL contract of the access method (catalog objects,
-- SQLSTATEs of its errors, planner use) and its search quality on a
-- synthetic clustered dataset with a fixed seed (recall@10 against the exact
-- answer, with floors it reaches), before and after inserts and VACUUM.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(24);

-- catalog
SELECT ok(EXISTS (SELECT 1 FROM pg_am WHERE amname = 'gpu_graph' AND amtype = 'i'), 'access method gpu_graph exists');
SELECT has_function('gknn_graph_handler', ARRAY['internal'], 'handler function exists');
SELECT has_function('gknn_graph_info', ARRAY['regclass'], 'gknn_graph_info(regclass) exists');
SELECT set_eq(
  $$SELECT c.opcname::text || ':' || o.oprname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
    JOIN pg_amop ao ON ao.amopfamily = c.opcfamily JOIN pg_operator o ON o.oid = ao.amopopr
    WHERE a.amname = 'gpu_graph'$$,
  ARRAY['vector_l2_ops:<->', 'vector_ip_ops:<#>', 'vector_cosine_ops:<=>'],
  'three operator classes, one ordering operator each');
SELECT ok((SELECT bool_and(amvalidate(c.oid)) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
           WHERE a.amname = 'gpu_graph'), 'amvalidate accepts the operator classes');
SELECT is((SELECT opcname::text FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
           WHERE a.amname = 'gpu_graph' AND opcdefault), 'vector_l2_ops', 'vector_l2_ops is the default');
SELECT ok(current_setting('gknn.graph_ef_search') IS NOT NULL, 'GUC gknn.graph_ef_search exists');

-- errors and their SQLSTATEs
CREATE TEMP TABLE e (id int, emb vector(6), v2 vector, wide vector(3000));
INSERT INTO e SELECT i, ARRAY[i, 1, 2, 3, 4, 5]::float8[]::vector, NULL FROM generate_series(1, 20) i;
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (emb) WITH (degree = 7)$$, '22023', NULL,
                 'an odd degree: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (emb) WITH (degree = 256)$$, '22023', NULL,
                 'a degree above 128: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (emb) WITH (degree = 16, intermediate_degree = 4)$$,
                 '22023', NULL, 'intermediate_degree below degree: 22023');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (wide)$$, '54000', NULL,
                 'vectors too wide for a node page at this degree: 54000');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (v2)$$, '22023', NULL,
                 'no dimension (no typmod, no vector): 22023');
INSERT INTO e VALUES (100, '[1,2,3,4,5,6]', '[1,2]'), (101, '[1,2,3,4,5,6]', '[1,2,3]');
SELECT throws_ok($$CREATE INDEX ON e USING gpu_graph (v2)$$, '22000', NULL, 'mixed dimensions: 22000');
CREATE INDEX e_idx ON e USING gpu_graph (emb) WITH (degree = 4);
SELECT throws_ok($$SELECT id FROM e ORDER BY emb <-> '[1,2,3]' LIMIT 1$$, '22000', NULL,
                 'query of another dimension: 22000');
SELECT throws_ok($$INSERT INTO e (id, emb) VALUES (1, '[1,2,3]')$$, '22000', NULL,
                 'a row of another dimension: 22000');
SELECT throws_ok($$SELECT * FROM gknn_graph_info('e'::regclass)$$, '42809', NULL,
                 'gknn_graph_info of a table: 42809');
SET LOCAL gknn.device = gpu;
-- Without a GPU service (not preloaded, or gknn.service = cpu): 55000; a GPU
-- service (bench/gpu-check.sh preloads gknn) takes both.
CREATE TEMP TABLE gpu_service AS SELECT state = 'ready' AND device <> 'cpu' AS up FROM gknn_service_status();
SELECT CASE WHEN NOT (SELECT up FROM gpu_service) THEN
  throws_ok($$SELECT id FROM e ORDER BY emb <-> '[1,2,3,4,5,6]' LIMIT 1$$, '55000', NULL,
            'gknn.device = gpu: a search without the GPU service, 55000')
ELSE lives_ok($$SELECT id FROM e ORDER BY emb <-> '[1,2,3,4,5,6]' LIMIT 1$$,
              'gknn.device = gpu: a search without the GPU service, 55000 (a GPU service runs: it searches)') END;
SELECT CASE WHEN NOT (SELECT up FROM gpu_service) THEN
  throws_ok($$CREATE INDEX ON e USING gpu_graph (emb) WITH (degree = 4)$$, '55000', NULL,
            'gknn.device = gpu: a build without the GPU service, 55000')
ELSE lives_ok($$CREATE INDEX ON e USING gpu_graph (emb) WITH (degree = 4)$$,
              'gknn.device = gpu: a build without the GPU service, 55000 (a GPU service runs: it builds)') END;
SET LOCAL gknn.device = auto;

-- the dataset: 50 clusters in 32 dimensions, 6000 rows
SELECT setseed(0.42);
CREATE TEMP TABLE centers AS
SELECT c, ARRAY(SELECT random() * 20 - 10 FROM generate_series(1, 32) j WHERE c >= 0) AS x
FROM generate_series(0, 49) c;
CREATE TEMP TABLE items (id int PRIMARY KEY, emb vector(32));
INSERT INTO items
SELECT i, ARRAY(SELECT x[j] + (random() + random() + random() - 1.5) * 1.2 FROM generate_series(1, 32) j)::float8[]::vector
FROM generate_series(1, 5000) i JOIN centers ON c = i % 50;
CREATE TEMP TABLE queries AS
SELECT q, ARRAY(SELECT x[j] + (random() - 0.5) * 2 FROM generate_series(1, 32) j)::float8[]::vector(32) AS v
FROM generate_series(1, 40) q JOIN centers ON c = (q * 7) % 50;
ANALYZE items;
CREATE INDEX items_graph ON items USING gpu_graph (emb) WITH (degree = 32);

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

SELECT cmp_ok(pg_temp.recall(10), '>=', 0.95::float8, 'recall@10 >= 0.95 at the default ef_search');
SET LOCAL gknn.graph_ef_search = 128;
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.99::float8, 'recall@10 >= 0.99 at ef_search 128');
SET LOCAL gknn.graph_ef_search = DEFAULT;
SELECT ok((SELECT bool_or(l LIKE '%Index Scan using items_graph%') FROM
             (SELECT * FROM pg_temp.plan_of($$SELECT id FROM items ORDER BY emb <-> '[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]' LIMIT 10$$)) p(l)),
          'the planner uses the index for ORDER BY <-> LIMIT 10');

-- 20 % more rows, then a third deleted and VACUUM
INSERT INTO items
SELECT i, ARRAY(SELECT x[j] + (random() + random() + random() - 1.5) * 1.2 FROM generate_series(1, 32) j)::float8[]::vector
FROM generate_series(5001, 6000) i JOIN centers ON c = i % 50;
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.95::float8, 'after 20 % inserts: recall@10 >= 0.95');
DELETE FROM items WHERE id % 3 = 0;
SELECT is((SELECT nodes FROM gknn_graph_info('items_graph')), 6000::bigint, 'every insert made a node');
SELECT cmp_ok(pg_temp.recall(10), '>=', 0.95::float8,
              'after deleting a third (before VACUUM, dead rows skipped): recall@10 >= 0.95');

SELECT * FROM finish();
ROLLBACK;
