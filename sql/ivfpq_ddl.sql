-- gpu_ivfpq: the access method, its operator classes, options and their
-- errors, empty tables, NULL vectors, expression indexes, unlogged tables.
SET client_min_messages = notice;

SELECT amname, amtype FROM pg_am WHERE amname = 'gpu_ivfpq';
SELECT opcname, opcdefault, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'gpu_ivfpq' ORDER BY opcname;

-- 400 deterministic 8-d vectors in a few clusters, some NULLs
CREATE TABLE ivf_t (id int PRIMARY KEY, emb vector(8));
INSERT INTO ivf_t
SELECT i, CASE WHEN i % 50 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 7) * 3 + ((i * 7919 + j * 104729) % 1013) / 1013.0 FROM generate_series(1, 8) j)::float8[]::vector END
FROM generate_series(1, 400) i;

-- options
CREATE INDEX ivf_t_idx ON ivf_t USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 8, m = 4, nbits = 4);
SELECT trained, dims, lists, m, nbits, metric, entries, pending, nulls FROM gknn_ivfpq_info('ivf_t_idx');
DROP INDEX ivf_t_idx;
-- the defaults: lists 100 (clamped to the rows), m from the dimension, nbits 8
CREATE INDEX ivf_t_idx ON ivf_t USING gpu_ivfpq (emb) WITH (lists = 16);
SELECT trained, dims, lists, m, nbits, metric, entries, nulls FROM gknn_ivfpq_info('ivf_t_idx');
DROP INDEX ivf_t_idx;

-- option errors
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (m = 3);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (nbits = 9);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (nbits = 3);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (lists = 0);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (kmeans_iters = 0);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (probes = 3);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb) WITH (m = 16);
-- more lists than rows: a warning and a clamp
CREATE TABLE ivf_small (id int, emb vector(4));
INSERT INTO ivf_small SELECT i, ARRAY[i, i * 2, 3, -i]::float8[]::vector FROM generate_series(1, 5) i;
CREATE INDEX ivf_small_idx ON ivf_small USING gpu_ivfpq (emb) WITH (lists = 64, m = 2);
SELECT lists, entries FROM gknn_ivfpq_info('ivf_small_idx');
-- fewer rows sampled than lists
DROP INDEX ivf_small_idx;
INSERT INTO ivf_small SELECT i, ARRAY[i, 1, 1, 1]::float8[]::vector FROM generate_series(6, 40) i;
CREATE INDEX ivf_small_idx ON ivf_small USING gpu_ivfpq (emb) WITH (lists = 10, m = 2, training_sample = 4);
SELECT lists, entries FROM gknn_ivfpq_info('ivf_small_idx');

-- an expression (searched in ivfpq_halfvec.sql) / not a vector / several columns / unique
CREATE INDEX ivf_t_expr ON ivf_t USING gpu_ivfpq ((emb + emb)) WITH (lists = 4, m = 4);
SELECT trained, dims, entries, nulls FROM gknn_ivfpq_info('ivf_t_expr');
DROP INDEX ivf_t_expr;
CREATE INDEX ON ivf_t USING gpu_ivfpq (id);
CREATE INDEX ON ivf_t USING gpu_ivfpq (emb, emb);
CREATE UNIQUE INDEX ON ivf_t USING gpu_ivfpq (emb);

-- vectors of different dimensions in a column without a typmod
CREATE TABLE ivf_mixed (id int, emb vector);
INSERT INTO ivf_mixed VALUES (1, '[1,2,3,4]'), (2, '[1,2,3]');
CREATE INDEX ON ivf_mixed USING gpu_ivfpq (emb) WITH (lists = 1, m = 1);
DELETE FROM ivf_mixed WHERE id = 2;
CREATE INDEX ivf_mixed_idx ON ivf_mixed USING gpu_ivfpq (emb) WITH (lists = 1, m = 2);
INSERT INTO ivf_mixed VALUES (3, '[1,2,3]');
SELECT dims FROM gknn_ivfpq_info('ivf_mixed_idx');

-- an empty table: no quantizer; rows inserted later are found (exactly)
CREATE TABLE ivf_empty (id int, emb vector(3));
CREATE INDEX ivf_empty_idx ON ivf_empty USING gpu_ivfpq (emb) WITH (lists = 4, m = 3);
SELECT trained, dims, lists, entries, pending, nulls FROM gknn_ivfpq_info('ivf_empty_idx');
INSERT INTO ivf_empty VALUES (1, '[1,1,1]'), (2, '[5,5,5]'), (3, NULL), (4, '[2,2,2]');
SELECT trained, entries, pending, nulls FROM gknn_ivfpq_info('ivf_empty_idx');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_empty ORDER BY emb <-> '[2,2,1]' LIMIT 3;
SELECT id, emb <-> '[2,2,1]' AS d FROM ivf_empty ORDER BY emb <-> '[2,2,1]' LIMIT 3;
-- NULL vectors come last, as a sort puts them
SELECT id, emb <-> '[2,2,1]' AS d FROM ivf_empty ORDER BY emb <-> '[2,2,1]';
-- ORDER BY a NULL query: every distance is NULL, every row is returned
SELECT count(*) FROM (SELECT id FROM ivf_empty ORDER BY emb <-> NULL LIMIT 10) s;
-- the wrong dimension in the query
SELECT id FROM ivf_empty ORDER BY emb <-> '[1,2]' LIMIT 1;
INSERT INTO ivf_empty VALUES (9, '[1,2]');
-- REINDEX trains it
REINDEX INDEX ivf_empty_idx;
SELECT trained, lists, entries, pending, nulls FROM gknn_ivfpq_info('ivf_empty_idx');
SELECT id FROM ivf_empty ORDER BY emb <-> '[2,2,1]' LIMIT 3;
RESET enable_seqscan;

-- a table with only NULL vectors
CREATE TABLE ivf_nulls (id int, emb vector(2));
INSERT INTO ivf_nulls VALUES (1, NULL), (2, NULL);
CREATE INDEX ivf_nulls_idx ON ivf_nulls USING gpu_ivfpq (emb) WITH (lists = 2, m = 1);
SELECT trained, entries, pending, nulls FROM gknn_ivfpq_info('ivf_nulls_idx');

-- unlogged tables (an init fork with an empty index)
CREATE UNLOGGED TABLE ivf_unlogged (id int, emb vector(4));
INSERT INTO ivf_unlogged SELECT i, ARRAY[i % 5, i % 3, i % 7, 1]::float8[]::vector FROM generate_series(1, 100) i;
CREATE INDEX ivf_unlogged_idx ON ivf_unlogged USING gpu_ivfpq (emb) WITH (lists = 4, m = 2);
SELECT trained, entries FROM gknn_ivfpq_info('ivf_unlogged_idx');
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM ivf_unlogged ORDER BY emb <-> '[1,1,1,1]' LIMIT 20) s;
RESET enable_seqscan;

-- gknn_ivfpq_info on something else
SELECT * FROM gknn_ivfpq_info('ivf_t_pkey');

DROP TABLE ivf_t, ivf_small, ivf_mixed, ivf_empty, ivf_nulls, ivf_unlogged;
