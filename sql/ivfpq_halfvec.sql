-- gpu_ivfpq on halfvec (halfvec_l2_ops, halfvec_ip_ops, halfvec_cosine_ops)
-- and on expressions: (emb::halfvec(n)) over a vector column, and vector
-- expressions. With gknn.ivfpq_exact = on the answers must be the
-- sequential scan's, row for row (ties by TID) and distance for distance
-- (the halfvec operator's value, bit for bit).
SET client_min_messages = notice;

SELECT opcname, opcdefault, opcintype::regtype, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'gpu_ivfpq' AND opcname LIKE 'halfvec%' ORDER BY opcname;

-- 2,100 rows of 24 dimensions: 700 distinct vectors, each three times (ties,
-- broken by TID), a few NULLs; h holds the same values as halfvec.
CREATE TABLE hv (id int PRIMARY KEY, emb vector(24), h halfvec(24));
INSERT INTO hv (id, emb)
SELECT i, CASE WHEN i % 301 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 700 % 11) * 2 - 10 + ((i % 700 * 7919 + j * 104729 + i % 700 * j * 31) % 2003) / 1001.0
        FROM generate_series(1, 24) j)::float8[]::vector END
FROM generate_series(1, 2100) i;
UPDATE hv SET h = emb::halfvec(24);
VACUUM ANALYZE hv;

-- The type an expression over hv has (vector or halfvec).
CREATE FUNCTION hv_type(expr text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE t text;
BEGIN
  EXECUTE format('SELECT pg_typeof(%s)::text FROM hv LIMIT 1', expr) INTO t;
  RETURN t;
END $$;

CREATE TABLE hv_q (qid int, q vector(24));
INSERT INTO hv_q
SELECT k, ARRAY(SELECT (k % 11) * 2 - 10 + ((k * 31 + j * 17) % 101) / 50.0 FROM generate_series(1, 24) j)::float8[]::vector
FROM generate_series(1, 4) k;

-- Operator class errors: none is halfvec's default (as in pgvector), and a
-- class indexes its own type.
CREATE INDEX ON hv USING gpu_ivfpq (h);
CREATE INDEX ON hv USING gpu_ivfpq (emb halfvec_l2_ops);
CREATE INDEX ON hv USING gpu_ivfpq (h vector_l2_ops);

-- A halfvec column, and an expression index on a vector column.
CREATE INDEX hv_h_l2 ON hv USING gpu_ivfpq (h halfvec_l2_ops) WITH (lists = 12, m = 6);
CREATE INDEX hv_expr_l2 ON hv USING gpu_ivfpq ((emb::halfvec(24)) halfvec_l2_ops) WITH (lists = 12, m = 8);
SELECT trained, dims, lists, m, nbits, metric, entries, nulls FROM gknn_ivfpq_info('hv_h_l2');
SELECT trained, dims, lists, m, nbits, metric, entries, nulls FROM gknn_ivfpq_info('hv_expr_l2');

SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM hv ORDER BY h <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM hv
ORDER BY emb::halfvec(24) <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]'::halfvec(24) LIMIT 5;
PREPARE hv_knn(halfvec, int) AS SELECT id FROM hv ORDER BY emb::halfvec(24) <-> $1::halfvec(24) LIMIT $2;
EXPLAIN (COSTS OFF) EXECUTE hv_knn('[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]', 3);
DEALLOCATE hv_knn;
RESET enable_seqscan;

-- seq(expr, op, q, k): "id:distance" of the k nearest rows by a sequential
-- scan, ties by TID; by_index: the same query through the index, in its
-- order. The query is given as text and cast to the expression's type (a
-- vector query would otherwise meet a halfvec expression as halfvec).
CREATE FUNCTION hv_seq(expr text, op text, q text, k int) RETURNS text
LANGUAGE plpgsql SET enable_indexscan = off SET enable_bitmapscan = off SET enable_seqscan = on AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT string_agg(id || '':'' || d, '' '' ORDER BY n) FROM (SELECT id, d, row_number() OVER () AS n '
                 'FROM (SELECT id, %1$s %2$s $1::%4$s AS d FROM hv ORDER BY %1$s %2$s $1::%4$s, ctid LIMIT %3$s) s) t',
                 expr, op, k, hv_type(expr)) INTO r USING q;
  RETURN r;
END $$;
CREATE FUNCTION hv_by_index(expr text, op text, q text, k int) RETURNS text
LANGUAGE plpgsql SET enable_seqscan = off SET enable_indexscan = on AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT string_agg(id || '':'' || d, '' '' ORDER BY n) FROM (SELECT id, d, row_number() OVER () AS n '
                 'FROM (SELECT id, %1$s %2$s $1::%4$s AS d FROM hv ORDER BY %1$s %2$s $1::%4$s LIMIT %3$s) s) t',
                 expr, op, k, hv_type(expr)) INTO r USING q;
  RETURN r;
END $$;

-- Exact: every stored binary16 vector ranked; rows and distances are the
-- sequential scan's (the tie of three equal vectors included).
SET gknn.ivfpq_exact = on;
SELECT qid, hv_by_index('h', '<->', q::text, 10) = hv_seq('h', '<->', q::text, 10) AS h_l2,
       hv_by_index('emb::halfvec(24)', '<->', q::text, 10) = hv_seq('emb::halfvec(24)', '<->', q::text, 10) AS expr_l2
FROM hv_q ORDER BY qid;
SELECT hv_by_index('h', '<->', (SELECT h::text FROM hv WHERE id = 5), 7);
SELECT hv_seq('h', '<->', (SELECT h::text FROM hv WHERE id = 5), 7);
RESET gknn.ivfpq_exact;

-- PQ candidates re-ranked: every list probed and every row a candidate is
-- the exact answer; the defaults give k rows in exact-distance order.
SET gknn.ivfpq_probes = 12;
SET gknn.ivfpq_refine = 1000;
SELECT qid, hv_by_index('h', '<->', q::text, 10) = hv_seq('h', '<->', q::text, 10) AS h_l2,
       hv_by_index('emb::halfvec(24)', '<->', q::text, 10) = hv_seq('emb::halfvec(24)', '<->', q::text, 10) AS expr_l2
FROM hv_q ORDER BY qid;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;
SELECT qid, cardinality(d) AS k, d = (SELECT array_agg(x ORDER BY x) FROM unnest(d) x) AS ordered
FROM (SELECT qid, (SELECT array_agg(split_part(x, ':', 2)::float8 ORDER BY n)
                   FROM unnest(string_to_array(hv_by_index('h', '<->', q::text, 10), ' ')) WITH ORDINALITY u(x, n)) AS d
      FROM hv_q) s ORDER BY qid;

-- The other classes, on the column and on expressions.
CREATE INDEX hv_h_ip ON hv USING gpu_ivfpq (h halfvec_ip_ops) WITH (lists = 12, m = 6);
CREATE INDEX hv_expr_cos ON hv USING gpu_ivfpq ((emb::halfvec(24)) halfvec_cosine_ops) WITH (lists = 12, m = 4, nbits = 6);
SELECT metric FROM gknn_ivfpq_info('hv_h_ip');
SELECT metric FROM gknn_ivfpq_info('hv_expr_cos');
SET gknn.ivfpq_exact = on;
SELECT qid, hv_by_index('h', '<#>', q::text, 10) = hv_seq('h', '<#>', q::text, 10) AS h_ip,
       hv_by_index('emb::halfvec(24)', '<=>', q::text, 10) = hv_seq('emb::halfvec(24)', '<=>', q::text, 10) AS expr_cos
FROM hv_q ORDER BY qid;
RESET gknn.ivfpq_exact;

-- Expression indexes of vector: l2_normalize(emb) for inner product, and
-- the halfvec column cast back to vector.
CREATE INDEX hv_norm_ip ON hv USING gpu_ivfpq ((l2_normalize(emb)) vector_ip_ops) WITH (lists = 12, m = 8);
CREATE INDEX hv_hvec_l2 ON hv USING gpu_ivfpq ((h::vector(24)) vector_l2_ops) WITH (lists = 12, m = 8);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM hv
ORDER BY l2_normalize(emb) <#> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 5;
RESET enable_seqscan;
SET gknn.ivfpq_exact = on;
SELECT qid, hv_by_index('l2_normalize(emb)', '<#>', q::text, 10) = hv_seq('l2_normalize(emb)', '<#>', q::text, 10) AS norm_ip,
       hv_by_index('h::vector(24)', '<->', q::text, 10) = hv_seq('h::vector(24)', '<->', q::text, 10) AS hvec_l2
FROM hv_q ORDER BY qid;
RESET gknn.ivfpq_exact;

-- Inserts, deletes and VACUUM keep the exact answers equal to the scan's.
INSERT INTO hv (id, emb) SELECT id + 3000, emb + '[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]'
FROM hv WHERE id <= 300;
UPDATE hv SET h = emb::halfvec(24) WHERE id > 3000;
DELETE FROM hv WHERE id % 7 = 3;
VACUUM hv;
SELECT entries, nulls FROM gknn_ivfpq_info('hv_expr_l2');
SET gknn.ivfpq_exact = on;
SELECT qid, hv_by_index('h', '<->', q::text, 10) = hv_seq('h', '<->', q::text, 10) AS h_l2,
       hv_by_index('emb::halfvec(24)', '<->', q::text, 10) = hv_seq('emb::halfvec(24)', '<->', q::text, 10) AS expr_l2,
       hv_by_index('emb::halfvec(24)', '<=>', q::text, 10) = hv_seq('emb::halfvec(24)', '<=>', q::text, 10) AS expr_cos
FROM hv_q ORDER BY qid;
RESET gknn.ivfpq_exact;
-- every row, NULLs last, through the expression index
SET enable_seqscan = off;
SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE emb IS NULL) AS nulls
FROM (SELECT id, emb FROM hv ORDER BY emb::halfvec(24) <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]' LIMIT 5000) s;
SELECT count(*) AS last_rows, bool_and(emb IS NULL) AS nulls
FROM (SELECT emb FROM hv ORDER BY emb::halfvec(24) <-> '[1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]'
      OFFSET (SELECT count(emb) FROM hv)) s;
RESET enable_seqscan;

-- Errors: a query of another dimension.
SET enable_seqscan = off;
SELECT id FROM hv ORDER BY h <-> '[1,2,3]' LIMIT 1;
RESET enable_seqscan;

DROP FUNCTION hv_seq, hv_by_index, hv_type;
DROP TABLE hv, hv_q;

-- 3,072 dimensions: binary16 list items fit a page, so the index stores its
-- vectors (gknn.ivfpq_exact works); vector's do not fit (it refuses).
CREATE TABLE hv_big (id int, emb vector(3072));
INSERT INTO hv_big
SELECT i, ARRAY(SELECT ((i * 7 + j * 13) % 29) / 4.0 - 3 FROM generate_series(1, 3072) j)::float8[]::vector
FROM generate_series(1, 60) i;
CREATE INDEX hv_big_h ON hv_big USING gpu_ivfpq ((emb::halfvec(3072)) halfvec_l2_ops) WITH (lists = 2, m = 16, nbits = 4);
SELECT dims, entries FROM gknn_ivfpq_info('hv_big_h');
SET gknn.ivfpq_exact = on;
SET enable_seqscan = off;
SELECT array_agg(id ORDER BY n) AS by_index FROM (
  SELECT id, row_number() OVER () AS n FROM (
    SELECT id FROM hv_big ORDER BY emb::halfvec(3072) <-> (SELECT emb::halfvec(3072) FROM hv_big WHERE id = 9) LIMIT 6) s) t;
RESET enable_seqscan;
SELECT array_agg(id ORDER BY d, id) AS by_sort FROM (
  SELECT id, emb::halfvec(3072) <-> (SELECT emb::halfvec(3072) FROM hv_big WHERE id = 9) AS d FROM hv_big
  ORDER BY 2, 1 LIMIT 6) s;
CREATE INDEX hv_big_v ON hv_big USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 2, m = 16, nbits = 4);
SET enable_seqscan = off;
SELECT id FROM hv_big ORDER BY emb <-> (SELECT emb FROM hv_big WHERE id = 9) LIMIT 1;
RESET enable_seqscan;
RESET gknn.ivfpq_exact;
DROP TABLE hv_big;

-- 4,200 binary16 dimensions do not fit a list item: PQ codes only, and the
-- scan re-ranks its candidates by the expression computed on the heap rows.
CREATE TABLE hv_huge (id int, emb vector(4200));
INSERT INTO hv_huge
SELECT i, ARRAY(SELECT ((i * 5 + j * 11) % 23) / 8.0 - 1 FROM generate_series(1, 4200) j)::float8[]::vector
FROM generate_series(1, 40) i;
CREATE INDEX hv_huge_h ON hv_huge USING gpu_ivfpq ((emb::halfvec(4200)) halfvec_l2_ops) WITH (lists = 2, m = 8, nbits = 4);
SET gknn.ivfpq_probes = 2;
SET gknn.ivfpq_refine = 100;
SET enable_seqscan = off;
SELECT array_agg(id ORDER BY n) AS by_index FROM (
  SELECT id, row_number() OVER () AS n FROM (
    SELECT id FROM hv_huge ORDER BY emb::halfvec(4200) <-> (SELECT emb::halfvec(4200) FROM hv_huge WHERE id = 3) LIMIT 5) s) t;
RESET enable_seqscan;
SELECT array_agg(id ORDER BY d, id) AS by_sort FROM (
  SELECT id, emb::halfvec(4200) <-> (SELECT emb::halfvec(4200) FROM hv_huge WHERE id = 3) AS d FROM hv_huge
  ORDER BY 2, 1 LIMIT 5) s;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;
DROP TABLE hv_huge;

-- An expression index built on an empty table: rows inserted later wait
-- untrained, ranked by the expression computed on each heap row.
CREATE TABLE hv_empty (id int, emb vector(4));
CREATE INDEX hv_empty_idx ON hv_empty USING gpu_ivfpq ((emb::halfvec(4)) halfvec_cosine_ops) WITH (lists = 2, m = 2);
INSERT INTO hv_empty SELECT i, ARRAY[i, 10 - i, 1, (i % 3) - 1]::float8[]::vector FROM generate_series(1, 9) i;
SELECT trained, pending FROM gknn_ivfpq_info('hv_empty_idx');
SET enable_seqscan = off;
SELECT id, round((emb::halfvec(4) <=> '[1,2,3,4]')::numeric, 6) AS d
FROM hv_empty ORDER BY emb::halfvec(4) <=> '[1,2,3,4]'::halfvec(4) LIMIT 4;
RESET enable_seqscan;
SELECT id, round((emb::halfvec(4) <=> '[1,2,3,4]')::numeric, 6) AS d
FROM hv_empty ORDER BY emb::halfvec(4) <=> '[1,2,3,4]'::halfvec(4), id LIMIT 4;
DROP TABLE hv_empty;
