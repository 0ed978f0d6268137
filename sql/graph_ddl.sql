-- gpu_graph: the access method, its operator classes, options and their
-- errors, empty tables, NULL vectors, dimensions, unlogged tables, REINDEX.
SET client_min_messages = notice;

SELECT amname, amtype FROM pg_am WHERE amname = 'gpu_graph';
SELECT opcname, opcdefault, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'gpu_graph' ORDER BY opcname;
SHOW gknn.graph_ef_search;

-- 300 deterministic 8-d vectors in a few clusters, some NULLs
CREATE TABLE g_t (id int PRIMARY KEY, emb vector(8));
INSERT INTO g_t
SELECT i, CASE WHEN i % 50 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 7) * 3 + ((i * 7919 + j * 104729) % 1013) / 1013.0 FROM generate_series(1, 8) j)::float8[]::vector END
FROM generate_series(1, 300) i;

-- options: the default degree, then others
CREATE INDEX g_t_idx ON g_t USING gpu_graph (emb vector_l2_ops);
SELECT dims, degree, metric, nodes, live, dead, nulls, dead_edges, no_in_edges FROM gknn_graph_info('g_t_idx');
SELECT edges > 0 AS has_edges, edges <= live * degree AS within_degree FROM gknn_graph_info('g_t_idx');
DROP INDEX g_t_idx;
CREATE INDEX g_t_idx ON g_t USING gpu_graph (emb) WITH (degree = 8, intermediate_degree = 12);
SELECT dims, degree, nodes, live, nulls FROM gknn_graph_info('g_t_idx');
SELECT reloptions FROM pg_class WHERE relname = 'g_t_idx';
DROP INDEX g_t_idx;
CREATE INDEX g_t_idx ON g_t USING gpu_graph (emb) WITH (degree = 2);
SELECT degree, live FROM gknn_graph_info('g_t_idx');
DROP INDEX g_t_idx;

-- option errors
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (degree = 31);
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (degree = 0);
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (degree = 130);
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (degree = 16, intermediate_degree = 8);
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (intermediate_degree = 300);
CREATE INDEX ON g_t USING gpu_graph (emb) WITH (lists = 3);
CREATE INDEX g_t_idx ON g_t USING gpu_graph (emb) WITH (degree = 4);
ALTER INDEX g_t_idx SET (degree = 5);
DROP INDEX g_t_idx;

-- not a vector / several columns / unique / another operator class's type
CREATE INDEX ON g_t USING gpu_graph (id);
CREATE INDEX ON g_t USING gpu_graph (emb, emb);
CREATE UNIQUE INDEX ON g_t USING gpu_graph (emb);
CREATE INDEX ON g_t USING gpu_graph ((emb::halfvec(8)));

-- dimensions: a node (vector and list) must fit a page
CREATE TABLE g_wide (id int, emb vector(2020));
CREATE INDEX ON g_wide USING gpu_graph (emb);
CREATE INDEX g_wide_idx ON g_wide USING gpu_graph (emb) WITH (degree = 8);
SELECT dims, degree, nodes FROM gknn_graph_info('g_wide_idx');
DROP TABLE g_wide;
-- vectors of different dimensions in a column without a typmod
CREATE TABLE g_mixed (id int, emb vector);
INSERT INTO g_mixed VALUES (1, '[1,2,3,4]'), (2, '[1,2,3]');
CREATE INDEX ON g_mixed USING gpu_graph (emb);
DELETE FROM g_mixed WHERE id = 2;
CREATE INDEX g_mixed_idx ON g_mixed USING gpu_graph (emb);
SELECT dims, nodes FROM gknn_graph_info('g_mixed_idx');
INSERT INTO g_mixed VALUES (3, '[1,2,3]');
-- no typmod and no vector: no dimension to build with
CREATE TABLE g_nodim (id int, emb vector);
CREATE INDEX ON g_nodim USING gpu_graph (emb);
INSERT INTO g_nodim VALUES (1, NULL);
CREATE INDEX ON g_nodim USING gpu_graph (emb);

-- an empty table: rows inserted later are found
CREATE TABLE g_empty (id int, emb vector(3));
CREATE INDEX g_empty_idx ON g_empty USING gpu_graph (emb) WITH (degree = 4);
SELECT dims, degree, nodes, live FROM gknn_graph_info('g_empty_idx');
INSERT INTO g_empty VALUES (1, '[1,1,1]'), (2, '[5,5,5]'), (3, NULL), (4, '[2,2,2]');
SELECT nodes, live, nulls FROM gknn_graph_info('g_empty_idx');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM g_empty ORDER BY emb <-> '[2,2,1]' LIMIT 3;
SELECT id, emb <-> '[2,2,1]' AS d FROM g_empty ORDER BY emb <-> '[2,2,1]' LIMIT 3;
-- NULL vectors come last, as a sort puts them
SELECT id, emb <-> '[2,2,1]' AS d FROM g_empty ORDER BY emb <-> '[2,2,1]';
-- ORDER BY a NULL query: every distance is NULL, every row is returned
SELECT count(*) FROM (SELECT id FROM g_empty ORDER BY emb <-> NULL LIMIT 10) s;
-- the wrong dimension
SELECT id FROM g_empty ORDER BY emb <-> '[1,2]' LIMIT 1;
INSERT INTO g_empty VALUES (9, '[1,2]');
RESET enable_seqscan;

-- gknn_graph_info of what is not a gpu_graph index
SELECT * FROM gknn_graph_info('g_t');
CREATE INDEX g_t_ivf ON g_t USING gpu_ivfpq (emb) WITH (lists = 2, m = 4);
SELECT * FROM gknn_graph_info('g_t_ivf');
DROP INDEX g_t_ivf;

-- unlogged tables: the init fork holds an index of no nodes
CREATE UNLOGGED TABLE g_unlogged (id int, emb vector(3));
INSERT INTO g_unlogged SELECT i, ARRAY[i, i % 5, 1]::float8[]::vector FROM generate_series(1, 50) i;
CREATE INDEX g_unlogged_idx ON g_unlogged USING gpu_graph (emb) WITH (degree = 4);
SELECT nodes, live FROM gknn_graph_info('g_unlogged_idx');
SET enable_seqscan = off;
SELECT id FROM g_unlogged ORDER BY emb <-> '[10,0,1]' LIMIT 3;
RESET enable_seqscan;

-- REINDEX builds it again (same answers), TRUNCATE empties it
REINDEX INDEX g_empty_idx;
SELECT nodes, live, nulls FROM gknn_graph_info('g_empty_idx');
TRUNCATE g_empty;
SELECT nodes, live, nulls FROM gknn_graph_info('g_empty_idx');
INSERT INTO g_empty VALUES (5, '[0,0,1]');
SELECT id FROM g_empty ORDER BY emb <-> '[0,0,0]' LIMIT 1;

DROP TABLE g_t, g_mixed, g_nodim, g_empty, g_unlogged;
