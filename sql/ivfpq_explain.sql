-- EXPLAIN ANALYZE of gpu_ivfpq index scans: under each Index Scan node,
-- where its searches ran, how many, how many candidates they returned (and,
-- through the GPU service, the batches and waits: regress/service-live.sh).
-- gknn.device = cpu makes the scans search on this backend's CPU, so the
-- lines are the same with and without gknn preloaded. TIMING OFF hides the
-- times; where timing is on, digits are masked.
SET gknn.device = cpu;
SET enable_seqscan = off;

CREATE TABLE ivf_x (id int PRIMARY KEY, emb vector(4));
INSERT INTO ivf_x
SELECT i, ARRAY[i % 17, (i * 7) % 23, (i * 13) % 29, (i * 31) % 37]::float8[]::vector
FROM generate_series(1, 1000) i;
CREATE INDEX ivf_x_l2 ON ivf_x USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 4, m = 2);
ANALYZE ivf_x;

-- Plain EXPLAIN runs nothing and shows nothing.
EXPLAIN (COSTS OFF) SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;
-- One search of refine x LIMIT candidates (gknn.ivfpq_refine = 10; the
-- LIMIT reaches the scan through the executor hooks of ivfpq_limit.cpp).
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;
-- No numbers are left over for a later plain EXPLAIN.
EXPLAIN (COSTS OFF) SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;

-- In JSON and YAML the numbers are properties of the Index Scan node.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON)
SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT YAML)
SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 3;

-- A scan rescanned for each outer row: its searches summed over the loops.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT q.i, s.id FROM generate_series(1, 3) q(i)
CROSS JOIN LATERAL (SELECT id FROM ivf_x ORDER BY emb <-> ARRAY[q.i, 0, 0, 0]::float8[]::vector LIMIT 2) s;

-- Two scans of one index: each node shows its own numbers (the first
-- searched once, the second once per outer row), in either order.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
(SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 2)
UNION ALL
(SELECT s.id FROM generate_series(1, 3) q(i)
 CROSS JOIN LATERAL (SELECT id FROM ivf_x ORDER BY emb <-> ARRAY[q.i, 0, 0, 0]::float8[]::vector LIMIT 2) s);
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
(SELECT s.id FROM generate_series(1, 3) q(i)
 CROSS JOIN LATERAL (SELECT id FROM ivf_x ORDER BY emb <-> ARRAY[q.i, 0, 0, 0]::float8[]::vector LIMIT 2) s)
UNION ALL
(SELECT id FROM ivf_x ORDER BY emb <-> '[1,2,3,4]' LIMIT 2);

-- A scan that never ran shows nothing.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT q.i, s.id FROM generate_series(1, 0) q(i)
CROSS JOIN LATERAL (SELECT id FROM ivf_x ORDER BY emb <-> ARRAY[q.i, 0, 0, 0]::float8[]::vector LIMIT 2) s;

-- With timing on, digits masked (as PostgreSQL's own tests filter EXPLAIN).
CREATE FUNCTION ivf_x_explain(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE ln text;
BEGIN
  FOR ln IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT regexp_replace(ln, '\d+(\.\d+)?', 'N', 'g');
  END LOOP;
END $$;
SELECT ivf_x_explain('SELECT id FROM ivf_x ORDER BY emb <-> ''[1,2,3,4]'' LIMIT 3');

-- An EXPLAIN ANALYZE run inside another: each shows its own scans.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT s.id, (SELECT count(*) FROM ivf_x_explain('SELECT id FROM ivf_x ORDER BY emb <-> ''[1,2,3,4]'' LIMIT 1'))
FROM (SELECT id FROM ivf_x ORDER BY emb <-> '[4,3,2,1]' LIMIT 2) s;
SELECT * FROM ivf_x_explain('SELECT id FROM ivf_x ORDER BY emb <-> ''[1,2,3,4]'' LIMIT 1')
WHERE ivf_x_explain LIKE '%Search%';

-- EXPLAIN EXECUTE shows no numbers: PostgreSQL 15 calls no hook for it
-- (nothing rather than numbers that could be another scan's).
PREPARE ivf_x_q(vector) AS SELECT id FROM ivf_x ORDER BY emb <-> $1 LIMIT 3;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE ivf_x_q('[1,2,3,4]');
DEALLOCATE ivf_x_q;

DROP FUNCTION ivf_x_explain(text);
DROP TABLE ivf_x;
RESET enable_seqscan;
RESET gknn.device;
