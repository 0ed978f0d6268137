-- The ORDER BY distance of a gpu_graph or gpu_ivfpq scan is not computed
-- again for each returned row where nothing reads it (the scan at the top
-- of the plan, under Limit nodes only): EXPLAIN VERBOSE shows a NULL in its
-- place. Wherever the value is output or read (WITH TIES, a merge of
-- partitions, a sort above), it stays. Rows and output equal either way.
SET client_min_messages = notice;
SET gknn.enable_topk = off;

CREATE TABLE op (id int PRIMARY KEY, emb vector(4));
INSERT INTO op SELECT i, ARRAY[i % 7, i % 11, i % 13, (i * 37) % 17]::float8[]::vector
FROM generate_series(1, 600) i;
CREATE INDEX op_g ON op USING gpu_graph (emb) WITH (degree = 8);
ANALYZE op;

-- the junk column becomes a NULL: plain, $n, OFFSET, nested Limits
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5;
PREPARE opq(vector, int) AS SELECT id FROM op ORDER BY emb <-> $1 LIMIT $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE opq('[3,3,3,3]', 5);
RESET plan_cache_mode;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 8) s LIMIT 4 OFFSET 1;

-- the same rows as the operator's order (ties by id where the index may
-- order them otherwise: compared as sets of the first 5 by distance)
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s;
SET enable_indexscan = off;
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s;
RESET enable_indexscan;

-- a subquery's junk column is not read above it either: a join with the
-- subquery (Subquery Scan), ARRAY(subquery) and IN (subquery) (SubPlans),
-- a CTE; the same rows with and without the index
EXPLAIN (VERBOSE, COSTS OFF)
SELECT s.id, o.emb FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s JOIN op o ON o.id = s.id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT ARRAY(SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT count(*) FROM op WHERE id IN (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5);
EXPLAIN (VERBOSE, COSTS OFF)
WITH c AS MATERIALIZED (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) SELECT * FROM c;
CREATE TEMP TABLE op_sub AS
SELECT (SELECT array_agg(s.id ORDER BY s.id) FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s
        JOIN op o ON o.id = s.id) AS joined,
       (SELECT array_agg(x ORDER BY x) FROM unnest(ARRAY(SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5)) x)
         AS arr,
       (SELECT array_agg(id ORDER BY id) FROM op
        WHERE id IN (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5)) AS within,
       (WITH c AS MATERIALIZED (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5)
        SELECT array_agg(id ORDER BY id) FROM c) AS cte;
SET enable_indexscan = off;
SELECT joined = want AND arr = want AND within = want AND cte = want AS same
FROM op_sub, (SELECT array_agg(id ORDER BY id) AS want
              FROM (SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s) w;
RESET enable_indexscan;
-- a subquery that outputs the distance: computed, and the outer ORDER BY reads it
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id, d FROM (SELECT id, emb <-> '[3,3,3,3]' AS d FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s
ORDER BY d DESC, id;

-- an output distance is computed (and equals the operator's)
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, emb <-> '[3,3,3,3]' AS d FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 3;
SELECT d = (SELECT emb <-> '[3,3,3,3]' FROM op o WHERE o.id = s.id) AS same
FROM (SELECT id, emb <-> '[3,3,3,3]' AS d FROM op ORDER BY emb <-> '[3,3,3,3]' LIMIT 3) s;

-- WITH TIES reads the ORDER BY value: kept
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM op ORDER BY emb <-> '[3,3,3,3]' FETCH FIRST 2 ROWS WITH TIES;
SELECT count(*) FROM (SELECT id FROM op ORDER BY emb <-> '[0,0,0,0]' FETCH FIRST 1 ROWS WITH TIES) s;

-- a merge of partitions reads it: kept
CREATE TABLE opp (id int, emb vector(4)) PARTITION BY RANGE (id);
CREATE TABLE opp1 PARTITION OF opp FOR VALUES FROM (1) TO (301);
CREATE TABLE opp2 PARTITION OF opp FOR VALUES FROM (301) TO (601);
INSERT INTO opp SELECT * FROM op;
CREATE INDEX ON opp1 USING gpu_graph (emb) WITH (degree = 8);
CREATE INDEX ON opp2 USING gpu_graph (emb) WITH (degree = 8);
ANALYZE opp;
SET enable_seqscan = off;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM opp ORDER BY emb <-> '[3,3,3,3]' LIMIT 5;
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM opp ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s;
RESET enable_seqscan;

-- gpu_ivfpq the same
CREATE TABLE opi (id int PRIMARY KEY, emb vector(4));
INSERT INTO opi SELECT * FROM op;
CREATE INDEX opi_i ON opi USING gpu_ivfpq (emb) WITH (lists = 4, m = 2);
ANALYZE opi;
SET gknn.ivfpq_probes = 4;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM opi ORDER BY emb <-> '[3,3,3,3]' LIMIT 5;
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM opi ORDER BY emb <-> '[3,3,3,3]' LIMIT 5) s;

DROP TABLE op, opp, opi;
