-- gpu_ivfpq on bit strings: bit_hamming_ops, on a bit column and on
-- (binary_quantize(emb)::bit(n)) expressions. The index trains on the 0/1
-- values (L2, whose square is the Hamming distance), stores the bit strings,
-- and ranks by <~>'s value; with gknn.ivfpq_exact = on the answers are the
-- sequential scan's, ties (many: distances are small integers) by TID.
SET client_min_messages = notice;

SELECT opcname, opcdefault, opcintype::regtype, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'gpu_ivfpq' AND opcname LIKE 'bit%';

-- 1,200 rows of 64 dimensions, a few NULLs; b holds 16 of the bits.
CREATE TABLE bq (id int PRIMARY KEY, emb vector(64), b bit(16));
INSERT INTO bq (id, emb)
SELECT i, CASE WHEN i % 199 = 0 THEN NULL ELSE
  ARRAY(SELECT ((i % 40 * 7919 + j * 104729 + i * j * 31) % 2003) / 1001.0 - 1 + (i % 3) * 0.2
        FROM generate_series(1, 64) j)::float8[]::vector END
FROM generate_series(1, 1200) i;
UPDATE bq SET b = substring(binary_quantize(emb)::bit(64) FROM 1 FOR 16)::bit(16);
VACUUM ANALYZE bq;

CREATE TABLE bq_q (qid int, q vector(64));
INSERT INTO bq_q
SELECT k, ARRAY(SELECT ((k * 31 + j * 17) % 101) / 50.0 - 1 FROM generate_series(1, 64) j)::float8[]::vector
FROM generate_series(1, 4) k;

-- Operator class errors: not bit's default; bit only.
CREATE INDEX ON bq USING gpu_ivfpq (b);
CREATE INDEX ON bq USING gpu_ivfpq (emb bit_hamming_ops);

CREATE INDEX bq_expr ON bq USING gpu_ivfpq ((binary_quantize(emb)::bit(64)) bit_hamming_ops) WITH (lists = 8, m = 8);
CREATE INDEX bq_col ON bq USING gpu_ivfpq (b bit_hamming_ops) WITH (lists = 4, m = 4, nbits = 4);
SELECT trained, dims, lists, m, nbits, metric, entries, nulls FROM gknn_ivfpq_info('bq_expr');
SELECT trained, dims, lists, m, nbits, metric, entries, nulls FROM gknn_ivfpq_info('bq_col');

SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM bq
ORDER BY binary_quantize(emb)::bit(64) <~> binary_quantize('[1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1,1,-1]'::vector)::bit(64)
LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM bq ORDER BY b <~> B'1010101010101010' LIMIT 5;
RESET enable_seqscan;

-- "id:distance" of the k nearest by a sequential scan (ties by TID), and
-- through the index in its order; q is a vector, made bits by qexpr ($1).
CREATE FUNCTION bq_seq(expr text, qexpr text, q vector, k int) RETURNS text
LANGUAGE plpgsql SET enable_indexscan = off SET enable_bitmapscan = off SET enable_seqscan = on AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT string_agg(id || '':'' || d, '' '' ORDER BY n) FROM (SELECT id, d, row_number() OVER () AS n '
                 'FROM (SELECT id, %1$s <~> %2$s AS d FROM bq ORDER BY %1$s <~> %2$s, ctid LIMIT %3$s) s) t',
                 expr, qexpr, k) INTO r USING q;
  RETURN r;
END $$;
CREATE FUNCTION bq_by_index(expr text, qexpr text, q vector, k int) RETURNS text
LANGUAGE plpgsql SET enable_seqscan = off SET enable_indexscan = on AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT string_agg(id || '':'' || d, '' '' ORDER BY n) FROM (SELECT id, d, row_number() OVER () AS n '
                 'FROM (SELECT id, %1$s <~> %2$s AS d FROM bq ORDER BY %1$s <~> %2$s LIMIT %3$s) s) t',
                 expr, qexpr, k) INTO r USING q;
  RETURN r;
END $$;

SET gknn.ivfpq_exact = on;
SELECT qid, bq_by_index('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) = bq_seq('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) AS expr,
       bq_by_index('b', 'substring(binary_quantize($1)::bit(64) FROM 1 FOR 16)::bit(16)', q, 25)
       = bq_seq('b', 'substring(binary_quantize($1)::bit(64) FROM 1 FOR 16)::bit(16)', q, 25) AS col16
FROM bq_q ORDER BY qid;
SELECT bq_by_index('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', (SELECT q FROM bq_q WHERE qid = 1), 8);
SELECT bq_seq('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', (SELECT q FROM bq_q WHERE qid = 1), 8);
-- the bit column
SET enable_seqscan = off;
SELECT string_agg(id || ':' || d, ' ') FROM (
  SELECT id, b <~> B'1010101010101010' AS d FROM bq ORDER BY b <~> B'1010101010101010' LIMIT 12) s;
RESET enable_seqscan;
SELECT string_agg(id || ':' || d, ' ') FROM (
  SELECT id, b <~> B'1010101010101010' AS d FROM bq ORDER BY b <~> B'1010101010101010', ctid LIMIT 12) s;
RESET gknn.ivfpq_exact;

-- Every list probed and every row re-ranked: the exact answer.
SET gknn.ivfpq_probes = 8;
SET gknn.ivfpq_refine = 1000;
SELECT qid, bq_by_index('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) = bq_seq('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) AS expr
FROM bq_q ORDER BY qid;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

-- Inserts, deletes, VACUUM.
INSERT INTO bq (id, emb) SELECT id + 2000, emb * '[-1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]'
FROM bq WHERE id <= 200;
DELETE FROM bq WHERE id % 5 = 1;
VACUUM bq;
SELECT entries, nulls FROM gknn_ivfpq_info('bq_expr');
SET gknn.ivfpq_exact = on;
SELECT qid, bq_by_index('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) = bq_seq('binary_quantize(emb)::bit(64)', 'binary_quantize($1)::bit(64)', q, 25) AS expr
FROM bq_q ORDER BY qid;
RESET gknn.ivfpq_exact;

-- Errors: a query of another length.
SET enable_seqscan = off;
SELECT id FROM bq ORDER BY b <~> B'101' LIMIT 1;
RESET enable_seqscan;

DROP FUNCTION bq_seq, bq_by_index;
DROP TABLE bq, bq_q;

-- binary_quantize(emb)::bit(1536) of 1,536-dimension vectors, as with pgvector.
CREATE TABLE bq_big (id int, emb vector(1536));
INSERT INTO bq_big
SELECT i, ARRAY(SELECT ((i * 7 + j * 13) % 29) - 14 FROM generate_series(1, 1536) j)::float8[]::vector
FROM generate_series(1, 80) i;
CREATE INDEX bq_big_idx ON bq_big USING gpu_ivfpq ((binary_quantize(emb)::bit(1536)) bit_hamming_ops)
  WITH (lists = 2, m = 16, nbits = 4);
SELECT dims, metric, entries FROM gknn_ivfpq_info('bq_big_idx');
SET gknn.ivfpq_exact = on;
SET enable_seqscan = off;
SELECT array_agg(id || ':' || d ORDER BY n) AS by_index FROM (
  SELECT id, d, row_number() OVER () AS n FROM (
    SELECT id, binary_quantize(emb)::bit(1536) <~> (SELECT binary_quantize(emb)::bit(1536) FROM bq_big WHERE id = 9) AS d
    FROM bq_big ORDER BY binary_quantize(emb)::bit(1536) <~> (SELECT binary_quantize(emb)::bit(1536) FROM bq_big WHERE id = 9)
    LIMIT 6) s) t;
RESET enable_seqscan;
SELECT array_agg(id || ':' || d ORDER BY d, id) AS by_sort FROM (
  SELECT id, binary_quantize(emb)::bit(1536) <~> (SELECT binary_quantize(emb)::bit(1536) FROM bq_big WHERE id = 9) AS d
  FROM bq_big ORDER BY 2, 1 LIMIT 6) s;
RESET gknn.ivfpq_exact;
DROP TABLE bq_big;
