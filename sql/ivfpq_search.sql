-- gpu_ivfpq searches: plans, the three operator classes, exact results when
-- every list is probed and every row re-ranked, prepared statements, filters
-- that reject most candidates. Comparisons are of distances in order (ties
-- may order rows differently, distances cannot differ).
SET client_min_messages = notice;

CREATE TABLE ivf_s (id int PRIMARY KEY, cat int, emb vector(16));
INSERT INTO ivf_s
SELECT i, i % 10,
  ARRAY(SELECT (i % 13) * 2 - 12 + ((i * 7919 + j * 104729 + i * j * 31) % 2003) / 1001.0
        FROM generate_series(1, 16) j)::float8[]::vector
FROM generate_series(1, 3000) i;
ANALYZE ivf_s;
CREATE INDEX ivf_s_l2 ON ivf_s USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 20, m = 8);

CREATE TABLE ivf_q (qid int, q vector(16));
INSERT INTO ivf_q
SELECT k, ARRAY(SELECT (k % 13) * 2 - 12 + ((k * 31 + j * 17) % 101) / 50.0 FROM generate_series(1, 16) j)::float8[]::vector
FROM generate_series(1, 5) k;

-- The index serves ORDER BY <op> LIMIT and nothing else. (enable_seqscan =
-- off leaves the index as the other way to order, and still no index path
-- for other queries; ivfpq_plan.sql tests the choice the planner makes by
-- cost alone.)
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s WHERE cat = 3 ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ivf_s WHERE emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' < 5;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s ORDER BY id LIMIT 10;
RESET enable_seqscan;

-- exact(q, op, k, filter): the k smallest distances by a sequential scan
CREATE FUNCTION ivf_exact(q vector, op text, k int, filter text DEFAULT 'true') RETURNS float8[]
LANGUAGE plpgsql SET enable_indexscan = off SET enable_seqscan = on AS $$
DECLARE r float8[];
BEGIN
  EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT emb %s $1 AS d FROM ivf_s WHERE %s ORDER BY 1 LIMIT %s) s',
                 op, filter, k) INTO r USING q;
  RETURN r;
END $$;
-- by_index(q, op, k, filter): the distances the index scan returns, in its order
CREATE FUNCTION ivf_by_index(q vector, op text, k int, filter text DEFAULT 'true') RETURNS float8[]
LANGUAGE plpgsql SET enable_seqscan = off SET enable_indexscan = on AS $$
DECLARE r float8[];
BEGIN
  EXECUTE format('SELECT array_agg(d ORDER BY n) FROM (SELECT emb %s $1 AS d, row_number() OVER () AS n FROM '
                 '(SELECT emb FROM ivf_s WHERE %s ORDER BY emb %s $1 LIMIT %s) s) t', op, filter, op, k) INTO r USING q;
  RETURN r;
END $$;

-- Every list probed and every row re-ranked: the exact answer.
SET gknn.ivfpq_probes = 20;
SET gknn.ivfpq_refine = 300;
SELECT qid, ivf_by_index(q, '<->', 10) = ivf_exact(q, '<->', 10) AS exact FROM ivf_q ORDER BY qid;

-- The defaults: an approximate answer, still in exact-distance order and k rows.
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;
SELECT qid, cardinality(r) AS k, r = (SELECT array_agg(x ORDER BY x) FROM unnest(r) x) AS ordered
FROM (SELECT qid, ivf_by_index(q, '<->', 10) AS r FROM ivf_q) s ORDER BY qid;

-- Filters that reject most candidates still give k rows (here 0.1% pass: 3 of 3000).
SET gknn.ivfpq_probes = 1;
SET gknn.ivfpq_refine = 1;
SELECT qid, cardinality(ivf_by_index(q, '<->', 10, 'cat = 4')) AS k FROM ivf_q ORDER BY qid;
SELECT qid, cardinality(ivf_by_index(q, '<->', 5, 'id % 1000 = 7')) AS k FROM ivf_q ORDER BY qid;
-- (all of them: rows found by later rounds may come after farther ones found
-- earlier, so the sets are compared)
SELECT qid, (SELECT array_agg(x ORDER BY x) FROM unnest(ivf_by_index(q, '<->', 3, 'id % 1000 = 7')) x)
            = ivf_exact(q, '<->', 3, 'id % 1000 = 7') AS same_rows
FROM ivf_q ORDER BY qid;
-- more rows than exist: all of them
SELECT count(*) FROM (SELECT id FROM ivf_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 5000) s;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

-- Prepared statements: $1 the vector, $2 the limit (custom and generic plans).
SET enable_seqscan = off;
PREPARE knn(vector, bigint) AS SELECT id FROM ivf_s ORDER BY emb <-> $1 LIMIT $2;
EXPLAIN (COSTS OFF) EXECUTE knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 7);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 7);
SET gknn.ivfpq_probes = 20;
SET gknn.ivfpq_refine = 1000;
EXECUTE knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 7);
SELECT id FROM ivf_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', id LIMIT 7;  -- by a sort
EXECUTE knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 2);
RESET plan_cache_mode;
RESET enable_seqscan;
DEALLOCATE knn;

-- The other operator classes, exact when everything is probed and re-ranked.
CREATE INDEX ivf_s_ip ON ivf_s USING gpu_ivfpq (emb vector_ip_ops) WITH (lists = 20, m = 8);
CREATE INDEX ivf_s_cos ON ivf_s USING gpu_ivfpq (emb vector_cosine_ops) WITH (lists = 20, m = 4, nbits = 6);
SELECT metric, lists, m, nbits FROM gknn_ivfpq_info('ivf_s_ip');
SELECT metric, lists, m, nbits FROM gknn_ivfpq_info('ivf_s_cos');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s ORDER BY emb <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ivf_s ORDER BY emb <=> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 10;
RESET enable_seqscan;
SELECT qid, ivf_by_index(q, '<#>', 10) = ivf_exact(q, '<#>', 10) AS ip_exact,
       ivf_by_index(q, '<=>', 10) = ivf_exact(q, '<=>', 10) AS cos_exact
FROM ivf_q ORDER BY qid;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

-- With default probes and refine the cosine and IP indexes still return
-- k rows in exact-distance order.
SELECT qid, cardinality(r) AS k, r = (SELECT array_agg(x ORDER BY x) FROM unnest(r) x) AS ordered
FROM (SELECT qid, ivf_by_index(q, '<=>', 10) AS r FROM ivf_q) s ORDER BY qid;

-- LIMIT with OFFSET, and a cursor reading past the LIMIT the index was told
SET gknn.ivfpq_probes = 20;
SET gknn.ivfpq_refine = 300;
SET enable_seqscan = off;
SELECT array_agg(d ORDER BY n) = (ivf_exact('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', '<->', 15))[11:15]
FROM (SELECT emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' AS d, row_number() OVER () AS n
      FROM (SELECT emb FROM ivf_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 5 OFFSET 10) s) t;
RESET gknn.ivfpq_refine;
DO $$
DECLARE
  c CURSOR FOR SELECT id FROM ivf_s ORDER BY emb <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]';
  r record;
  n int := 0;
  ids int[] := '{}';
BEGIN
  FOR r IN c LOOP
    n := n + 1;
    ids := ids || r.id;
  END LOOP;
  RAISE NOTICE 'cursor read % rows, % distinct', n, (SELECT count(DISTINCT x) FROM unnest(ids) x);
END $$;
RESET enable_seqscan;
RESET gknn.ivfpq_probes;

DROP FUNCTION ivf_exact, ivf_by_index;
DROP TABLE ivf_s, ivf_q;
