-- gpu_graph ordered scans: plans (constants, $n, small tables), answers
-- against the exact ones, filters and LIMITs beyond what a round returns,
-- the three operator classes, EXPLAIN ANALYZE.
SET client_min_messages = notice;

-- 2,000 rows: 20 clusters in 16 dimensions (deterministic), a few NULLs
CREATE TABLE gs (id int PRIMARY KEY, cat int, emb vector(16));
INSERT INTO gs
SELECT i, i % 10, CASE WHEN i % 400 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 20) * 2 + ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 16) j)::float8[]::vector END
FROM generate_series(1, 2000) i;
CREATE INDEX gs_idx ON gs USING gpu_graph (emb) WITH (degree = 16);
ANALYZE gs;
SELECT nodes, live, nulls, dead_edges FROM gknn_graph_info('gs_idx');

-- the planner picks the index for ORDER BY <-> constant / $n LIMIT k
SET gknn.enable_topk = off;
EXPLAIN (COSTS OFF) SELECT id FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 5;
PREPARE q(vector, int) AS SELECT id FROM gs ORDER BY emb <-> $1 LIMIT $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q('[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]', 5);
RESET plan_cache_mode;
-- no LIMIT: the whole table sorted is cheaper
EXPLAIN (COSTS OFF) SELECT id FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]';

-- answers: the index's ten equal the exact ten for queries at cluster centres
CREATE TABLE gq AS SELECT c AS qid,
  ARRAY(SELECT c * 2 + 0.5 FROM generate_series(1, 16))::float8[]::vector AS q FROM generate_series(0, 19, 3) c;
CREATE FUNCTION g_index_ids(qv vector, k int) RETURNS int[] LANGUAGE sql AS
  $$SELECT array_agg(id) FROM (SELECT id FROM gs ORDER BY emb <-> qv LIMIT k) s$$;
CREATE FUNCTION g_exact_ids(qv vector, k int) RETURNS int[] LANGUAGE sql AS
  $$SELECT array_agg(id) FROM (SELECT id FROM gs ORDER BY emb <-> qv, id LIMIT k) s$$;
SET enable_indexscan = off;
CREATE TABLE gtruth AS SELECT qid, g_exact_ids(q, 10) AS ids FROM gq;
RESET enable_indexscan;
SET gknn.graph_ef_search = 64;
SELECT qid, cardinality(g_index_ids(q, 10)) AS n,
       (SELECT count(*) FROM unnest(g_index_ids(q, 10)) x WHERE x = ANY (t.ids)) AS hits
FROM gq JOIN gtruth t USING (qid) ORDER BY qid;
-- distances come out in order, and equal the operator's
SELECT bool_and(ok) FROM (
  SELECT d >= lag(d) OVER (ORDER BY rn) OR lag(d) OVER (ORDER BY rn) IS NULL AS ok FROM (
    SELECT row_number() OVER () AS rn, d FROM (
      SELECT emb <-> '[3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3]' AS d FROM gs
      ORDER BY emb <-> '[3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3]' LIMIT 50) a) b) c;
RESET gknn.graph_ef_search;

-- filters: the scan widens until LIMIT rows pass (one row in ten passes)
SET enable_seqscan = off;
SELECT count(*), count(DISTINCT id), bool_and(cat = 3) FROM (
  SELECT id, cat FROM gs WHERE cat = 3 ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 150) s;
-- a filter that one row passes, far from the query: still found
SELECT id FROM gs WHERE id = 1999 ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 1;
-- every row, NULLs last, each once
SELECT count(*), count(DISTINCT id), count(emb) FROM (
  SELECT id, emb FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 5000) s;
SELECT id FROM (SELECT id, row_number() OVER () AS rn FROM (
  SELECT id FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 5000) a) b WHERE rn > 1995;
-- OFFSET
SELECT count(*) FROM (SELECT id FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 10 OFFSET 1990) s;
RESET enable_seqscan;

-- EXPLAIN ANALYZE says where it searched (gknn.device = cpu: the same lines
-- with or without the GPU service; regress/service-graph.sh checks the
-- service's)
SET gknn.device = cpu;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT id FROM gs ORDER BY emb <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 5;
RESET gknn.device;

-- a small table: the index is still chosen (as pgvector's hnsw is)
CREATE TABLE gsmall (id int, emb vector(3));
INSERT INTO gsmall SELECT i, ARRAY[i, i * 2, 1]::float8[]::vector FROM generate_series(1, 30) i;
CREATE INDEX ON gsmall USING gpu_graph (emb) WITH (degree = 4);
ANALYZE gsmall;
EXPLAIN (COSTS OFF) SELECT id FROM gsmall ORDER BY emb <-> '[3,6,1]' LIMIT 3;
SELECT id FROM gsmall ORDER BY emb <-> '[3,6,1]' LIMIT 3;

-- inner product and cosine
CREATE TABLE gip (id int, emb vector(3));
INSERT INTO gip SELECT i, ARRAY[cos(i * 0.1), sin(i * 0.1), (i % 7) * 0.1]::float8[]::vector FROM generate_series(1, 200) i;
INSERT INTO gip VALUES (0, '[0,0,0]');
CREATE INDEX gip_ip ON gip USING gpu_graph (emb vector_ip_ops) WITH (degree = 8);
CREATE INDEX gip_cos ON gip USING gpu_graph (emb vector_cosine_ops) WITH (degree = 8);
SELECT metric FROM gknn_graph_info('gip_ip') UNION ALL SELECT metric FROM gknn_graph_info('gip_cos');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM gip ORDER BY emb <#> '[1,0,0]' LIMIT 3;
SELECT id, round((emb <#> '[1,0,0]')::numeric, 4) FROM gip ORDER BY emb <#> '[1,0,0]' LIMIT 3;
SELECT array_agg(id) FROM (SELECT id FROM gip ORDER BY emb <#> '[1,0,0]' LIMIT 10) s;
SET enable_indexscan = off;
SET enable_seqscan = on;
SELECT array_agg(id) AS exact FROM (SELECT id FROM gip ORDER BY emb <#> '[1,0,0]', id LIMIT 10) s;
RESET enable_indexscan;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM gip ORDER BY emb <=> '[1,0,0]' LIMIT 3;
SELECT id, round((emb <=> '[1,0,0]')::numeric, 4) FROM gip ORDER BY emb <=> '[1,0,0]' LIMIT 3;
SELECT array_agg(id) FROM (SELECT id FROM gip ORDER BY emb <=> '[1,0,0]' LIMIT 10) s;
SET enable_indexscan = off;
SET enable_seqscan = on;
SELECT array_agg(id) AS exact FROM (SELECT id FROM gip ORDER BY emb <=> '[1,0,0]', id LIMIT 10) s;
RESET enable_indexscan;
SET enable_seqscan = off;
-- the zero vector's cosine distance is NaN: last
SELECT id, emb <=> '[1,0,0]' FROM (SELECT id, emb FROM gip ORDER BY emb <=> '[1,0,0]' LIMIT 1000) s
ORDER BY 2 DESC LIMIT 1;
RESET enable_seqscan;

DROP TABLE gs, gq, gtruth, gsmall, gip;
DROP FUNCTION g_index_ids, g_exact_ids;
