-- gpu_ivfpq and the planner: the index is chosen for ORDER BY column <op>
-- value LIMIT k by its cost alone (no enable_* setting), whatever the value
-- is (a constant, a $n of a generic plan, an InitPlan's (SELECT ...)), with a
-- filter and with OFFSET; never where it cannot give the order (no ORDER BY,
-- DESC, another column, an operator of another operator class), and not where
-- its work is larger than the sort's (no LIMIT, a LIMIT whose refine x k
-- candidates are the whole table). ivfpq_cost.cpp explains the model. On the
-- 9,000-row table pgvector's ivfflat and hnsw choose their index for the same
-- statements, and for LIMIT 1000 too; on the 100-row one they keep the sort
-- at LIMIT 10 (README).
SET client_min_messages = notice;

-- 9,000 rows of 16 dimensions in 13 clusters (below gknn.topk_min_rows, so
-- GpuTopK is not offered: the choice is between the index and a sort)
CREATE TABLE plan_t (id int PRIMARY KEY, cat int, emb vector(16));
INSERT INTO plan_t
SELECT i, i % 10,
  ARRAY(SELECT (i % 13) * 2 - 12 + ((i * 7919 + j * 104729 + i * j * 31) % 2003) / 1001.0
        FROM generate_series(1, 16) j)::float8[]::vector
FROM generate_series(1, 9000) i;
VACUUM ANALYZE plan_t;
CREATE INDEX plan_t_l2 ON plan_t USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 30, m = 8);

-- chosen: a constant, with a filter, with OFFSET, an InitPlan's value
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t WHERE cat = 3 ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10 OFFSET 20;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> (SELECT emb FROM plan_t WHERE id = 1) LIMIT 5;
-- chosen: $1 under a generic plan, with a constant LIMIT and with LIMIT $2
PREPARE knn(vector) AS SELECT id FROM plan_t ORDER BY emb <-> $1 LIMIT 10;
PREPARE knn_k(vector, int) AS SELECT id FROM plan_t WHERE cat < 5 ORDER BY emb <-> $1 LIMIT $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]');
EXPLAIN (COSTS OFF) EXECUTE knn_k('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 10);
-- and the generic plan runs: every list probed and every row re-ranked, it
-- finds the rows a sort finds
SET gknn.ivfpq_probes = 30;
SET gknn.ivfpq_refine = 900;
CREATE TEMP TABLE by_generic AS EXECUTE knn_k('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 10);
SET enable_indexscan = off;
SELECT (SELECT array_agg(id ORDER BY id) FROM by_generic)
     = (SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM plan_t WHERE cat < 5
        ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10) s) AS same_rows;
RESET enable_indexscan;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;
RESET plan_cache_mode;
DEALLOCATE knn;
DEALLOCATE knn_k;

-- not chosen: no ORDER BY, DESC, another column, an operator the index's
-- operator class does not have
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_t WHERE emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' < 5;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' DESC LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY cat LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <=> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
-- not chosen where the index does more work than a sort: every row (no
-- LIMIT), or a LIMIT whose refine x k candidates are the whole table
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]';
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 1000;
-- ... which a smaller refine makes a fraction of it again
SET gknn.ivfpq_refine = 2;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 1000;
RESET gknn.ivfpq_refine;

-- the inner-product and cosine operator classes, each with its operator
CREATE INDEX plan_t_ip ON plan_t USING gpu_ivfpq (emb vector_ip_ops) WITH (lists = 30, m = 8);
CREATE INDEX plan_t_cos ON plan_t USING gpu_ivfpq (emb vector_cosine_ops) WITH (lists = 30, m = 8);
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <=> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t WHERE cat = 3 ORDER BY emb <#> (SELECT emb FROM plan_t WHERE id = 1) LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <=> (SELECT emb FROM plan_t WHERE id = 1) LIMIT 10 OFFSET 5;
PREPARE knn_ip(vector) AS SELECT id FROM plan_t ORDER BY emb <#> $1 LIMIT 10;
PREPARE knn_cos(vector) AS SELECT id FROM plan_t ORDER BY emb <=> $1 LIMIT 10;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE knn_ip('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]');
EXPLAIN (COSTS OFF) EXECUTE knn_cos('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]');
RESET plan_cache_mode;
DEALLOCATE knn_ip;
DEALLOCATE knn_cos;
EXPLAIN (COSTS OFF) SELECT id FROM plan_t ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' DESC LIMIT 10;

-- 100 rows. With the default probes and refine the first round reads every
-- row and builds 10 look-up tables: a sort of 100 rows costs less (pgvector
-- keeps the sequential scan here too). With 1 probe and refine 1 the round
-- reads 10 rows of one list: the index is chosen, for every kind of value.
CREATE TABLE plan_s (id int PRIMARY KEY, cat int, emb vector(16));
INSERT INTO plan_s SELECT * FROM plan_t WHERE id <= 100;
VACUUM ANALYZE plan_s;
CREATE INDEX plan_s_l2 ON plan_s USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 10, m = 8);
CREATE INDEX plan_s_cos ON plan_s USING gpu_ivfpq (emb vector_cosine_ops) WITH (lists = 10, m = 8);
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
SET gknn.ivfpq_probes = 1;
SET gknn.ivfpq_refine = 1;
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 3 OFFSET 1;
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <=> (SELECT emb FROM plan_s WHERE id = 1) LIMIT 10;
PREPARE knn_s(vector) AS SELECT id FROM plan_s ORDER BY emb <=> $1 LIMIT 10;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE knn_s('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]');
RESET plan_cache_mode;
DEALLOCATE knn_s;
-- a filter that keeps 10 of the 100 rows: the scan would go through most of
-- its rounds to find 4 of them; sorting those 10 costs less
EXPLAIN (COSTS OFF) SELECT id FROM plan_s WHERE cat = 3 ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 3 OFFSET 1;
-- still never for what the index cannot order
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM plan_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' DESC LIMIT 10;
EXPLAIN (COSTS OFF) SELECT count(*) FROM plan_s WHERE emb <=> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' < 0.5;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

-- ordered scans' costs are finite, and the first round's grows with the
-- work it is asked for (probes, refine)
CREATE FUNCTION plan_cost(q text) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE j json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j;
  j := j -> 0 -> 'Plan';
  WHILE j ->> 'Node Type' <> 'Index Scan' LOOP j := j -> 'Plans' -> 0; END LOOP;
  RETURN ARRAY[(j ->> 'Startup Cost')::float8, (j ->> 'Total Cost')::float8];
END $$;
CREATE TEMP TABLE costs (probes int, refine int, c float8[]);
SET enable_seqscan = off;
SET gknn.ivfpq_probes = 1;
SET gknn.ivfpq_refine = 1;
INSERT INTO costs SELECT 1, 1, plan_cost($q$SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10$q$);
SET gknn.ivfpq_probes = 10;
INSERT INTO costs SELECT 10, 1, plan_cost($q$SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10$q$);
SET gknn.ivfpq_refine = 10;
INSERT INTO costs SELECT 10, 10, plan_cost($q$SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10$q$);
SET gknn.ivfpq_probes = 30;
INSERT INTO costs SELECT 30, 10, plan_cost($q$SELECT id FROM plan_t ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10$q$);
SELECT probes, refine, c[1] > 0 AND c[1] < c[2] AS startup_below_total, c[2] < 1e9 AS finite,
       c[1] > lag(c[1]) OVER (ORDER BY probes, refine) AS startup_grew
FROM costs ORDER BY probes, refine;
RESET enable_seqscan;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

DROP FUNCTION plan_cost;
DROP TABLE plan_t, plan_s;
