-- The sparsevec type: text input and output, typmods, every input error with
-- its SQLSTATE, distances, norms, comparisons, the btree opclass and casts.
-- Expected values follow pgvector 0.8's documented behaviour.

-- try(query): the query's single value, or "SQLSTATE: message (detail)".
CREATE FUNCTION pg_temp.try(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
  state text;
  msg text;
  detail text;
BEGIN
  EXECUTE query INTO result;
  RETURN result;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RETURN state || ': ' || msg || coalesce(' (' || nullif(detail, '') || ')', '');
END $$;

-- Text: 1-based indices, any order and white space in, sorted out; zeros are
-- not stored; values print as the shortest text that reads back the same.
SELECT '{1:1.5,3:3.5}/5'::sparsevec;
SELECT '{1:-2,3:-4}/5'::sparsevec;
SELECT ' { 1 : 1.5 ,  3  :  3.5  } / 5 '::sparsevec;
SELECT E'{\t1:1,\n2:2}\r/\f2'::sparsevec;
SELECT '{+2:2.,1:1e0}/+3'::sparsevec;
SELECT '{3:3,1:1,2:2}/3'::sparsevec;
SELECT '{1:0,2:1,3:0,4:-0}/4'::sparsevec;
SELECT '{1:0,1:1}/2'::sparsevec AS zero_is_not_a_duplicate;
SELECT '{1:0.1,2:1e-7,3:3.4028235e38,4:-1.5e-38,5:1.17549435e-38}/5'::sparsevec;
SELECT '{1:1.0000001,2:123456789}/2'::sparsevec;
SELECT '{}/1'::sparsevec, '{ }/5'::sparsevec, '{}/1000000000'::sparsevec;
SELECT '{1:0.1,1000000000:2}/1000000000'::sparsevec::text::sparsevec = '{1:0.1,1000000000:2}/1000000000' AS round_trips;
-- 16000 non-zero elements is the most, in a dimension far above vector's
SELECT length(('{' || string_agg(i || ':1', ',') || '}/100000')::sparsevec::text)
FROM generate_series(1, 16000) i;

-- Input errors: syntax (22P02), range (22003), values and dimensions (22000),
-- limits (54000)
SELECT q AS input, pg_temp.try(format('SELECT %L::sparsevec::text', q)) AS result
FROM (VALUES (''), ('{'), ('{ '), ('{:'), ('{,'), ('{}'), ('{}/'), ('{}/1a'), ('{}/1 2'), ('{:}/1'),
             ('{,}/1'), ('{1,}/1'), ('{:1}/1'), ('{1:}/1'), ('{1a:1}/1'), ('{1:1a}/1'), ('{1:1,}/1'),
             ('{1:1 2:2}/2'), ('[1,2]'), ('{1:1}'), ('{1:1}5'), ('{1.5:1}/2'), ('{1:hello,2:1}/2'),
             ('{1:4e38}/1'), ('{1:-4e38}/1'), ('{1:1e-46}/1'), ('{1:-1e-46}/1'),
             ('{1:NaN}/1'), ('{1:Infinity}/1'), ('{1:-inf}/1'),
             ('{}/0'), ('{}/-1'), ('{}/-2147483649'), ('{}/-9223372036854775809'),
             ('{}/1000000001'), ('{}/2147483648'), ('{}/9223372036854775808'),
             ('{0:1}/1'), ('{2:1}/1'), ('{-1:1}/5'), ('{2147483647:1}/1'), ('{2147483648:1}/1'),
             ('{-2147483648:1}/1'), ('{-2147483649:1}/1'), ('{9223372036854775808:1}/1'),
             ('{1:1,1:1}/2'), ('{1:1,2:1,1:1}/2'), ('{3:1,1:1,1:2}/2')) t(q);
-- too many elements: counted before anything else (zeros too)
SELECT pg_temp.try(format('SELECT %L::sparsevec::text', '{' || string_agg(i || ':1', ',') || '}/100000'))
FROM generate_series(1, 16001) i;
SELECT pg_temp.try(format('SELECT %L::sparsevec::text', '{' || string_agg(i || ':0', ',') || '}/100000'))
FROM generate_series(1, 16001) i;
-- psql shows the position of a bad literal, as for any type
SELECT '{1:1,2:2}/1'::sparsevec;

-- Typmods: sparsevec(n) checks the dimension on input, assignment and cast
SELECT '{}/3'::sparsevec(3), '{1:1}/1000000000'::sparsevec(1000000000);
SELECT q AS input, pg_temp.try(q) AS result
FROM (VALUES ($$SELECT '{}/3'::sparsevec(2)::text$$), ($$SELECT '{}/3'::sparsevec(3, 2)::text$$),
             ($$SELECT '{}/3'::sparsevec('a')::text$$), ($$SELECT '{}/3'::sparsevec(0)::text$$),
             ($$SELECT '{}/3'::sparsevec(1000000001)::text$$),
             ($$SELECT '{}/3'::sparsevec::sparsevec(4)::text$$)) t(q);
CREATE TABLE sv_t (id int, v sparsevec(3));
INSERT INTO sv_t VALUES (1, '{1:1,3:3}/3'), (2, NULL);
INSERT INTO sv_t VALUES (3, '{1:1}/2');
INSERT INTO sv_t VALUES (3, '{1:1}/4'::sparsevec);
INSERT INTO sv_t SELECT 4, v FROM sv_t WHERE id = 1;
UPDATE sv_t SET v = '{}/5' WHERE id = 1;
SELECT id, v FROM sv_t ORDER BY id;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'sv_t'::regclass AND attname = 'v';
DROP TABLE sv_t;

-- Distances: <-> l2_distance, <#> negative inner product, <=> cosine_distance,
-- <+> l1_distance; elements stored in one operand only count too
SELECT l2_distance('{}/2'::sparsevec, '{1:3,2:4}/2'), l2_distance('{1:3}/2'::sparsevec, '{2:4}/2'),
       l2_distance('{2:4}/2'::sparsevec, '{1:3}/2'), l2_distance('{1:3,2:4}/2'::sparsevec, '{}/2'),
       '{}/2'::sparsevec <-> '{1:3,2:4}/2' AS op;
SELECT l2_distance('{1:1,3:3,5:5,7:7}/8'::sparsevec, '{2:2,3:1,8:8}/8') AS sparse,
       l2_distance('[1,0,3,0,5,0,7,0]'::vector, '[0,2,1,0,0,0,0,8]') AS dense;
SELECT inner_product('{1:1,2:2}/2'::sparsevec, '{1:2,2:4}/2'), inner_product('{1:1,3:3}/4'::sparsevec, '{2:2,4:4}/4'),
       inner_product('{1:1,3:3,5:5}/5'::sparsevec, '{2:4,3:6,4:8}/5'), inner_product('{1:1}/2'::sparsevec, '{}/2'),
       inner_product('{1:3e38}/1'::sparsevec, '{1:3e38}/1') AS overflows,
       '{1:1,2:2}/2'::sparsevec <#> '{1:3,2:4}/2' AS op;
SELECT cosine_distance('{1:1,2:2}/2'::sparsevec, '{1:2,2:4}/2') AS same_direction,
       cosine_distance('{1:1}/2'::sparsevec, '{2:2}/2') AS orthogonal,
       cosine_distance('{1:1,2:1}/2'::sparsevec, '{1:-1.1,2:-1.1}/2') AS opposite,
       cosine_distance('{1:1,2:2}/2'::sparsevec, '{}/2') AS zero,
       cosine_distance('{}/1'::sparsevec, '{}/1') AS both_zero,
       cosine_distance('{1:3e38}/1'::sparsevec, '{1:3e38}/1') AS overflows,
       '{1:1,2:2}/2'::sparsevec <=> '{1:2,2:4}/2' AS op;
SELECT l1_distance('{}/2'::sparsevec, '{1:3,2:4}/2'), l1_distance('{1:1,3:3,5:5,7:7,9:9}/9'::sparsevec, '{2:2,4:4,6:6,8:8}/9'),
       l1_distance('{1:3e38}/1'::sparsevec, '{1:-3e38}/1') AS overflows,
       '{}/2'::sparsevec <+> '{1:3,2:4}/2' AS op;
-- the operators commute
SELECT o.oprname, o.oprcom::regoperator FROM pg_operator o
WHERE o.oprleft = 'sparsevec'::regtype AND o.oprname IN ('<->', '<#>', '<=>', '<+>') ORDER BY 1;
SELECT q AS call, pg_temp.try(q) AS result
FROM (VALUES ($$SELECT l2_distance('{1:1}/2'::sparsevec, '{1:1}/1')$$),
             ($$SELECT inner_product('{1:1,2:2}/2'::sparsevec, '{1:3}/1')$$),
             ($$SELECT cosine_distance('{1:1,2:2}/2'::sparsevec, '{1:3}/1')$$),
             ($$SELECT l1_distance('{1:1,2:2}/2'::sparsevec, '{1:3}/1')$$),
             ($$SELECT '{}/2'::sparsevec <-> '{}/3'$$), ($$SELECT '{}/2'::sparsevec <#> '{}/3'$$),
             ($$SELECT '{}/2'::sparsevec <=> '{}/3'$$), ($$SELECT '{}/2'::sparsevec <+> '{}/3'$$),
             ($$SELECT '{}/2'::sparsevec <-> '[1,2,3]'::vector$$)) t(q);

-- Norms
SELECT l2_norm('{1:3,2:4}/2'::sparsevec), round(l2_norm('{1:1,2:1}/2'::sparsevec)::numeric, 5),
       l2_norm('{}/2'::sparsevec), l2_norm('{1:3e37,2:4e37}/2'::sparsevec)::real AS no_float_overflow;
SELECT l2_normalize('{1:3,2:4}/2'::sparsevec), l2_normalize('{1:3}/2'::sparsevec),
       l2_normalize('{2:0.1}/2'::sparsevec), l2_normalize('{}/2'::sparsevec),
       l2_normalize('{1:3e38}/1'::sparsevec);
-- elements that underflow to zero are dropped
SELECT l2_normalize('{1:3e38,2:1e-37}/2'::sparsevec), l2_normalize('{2:3e37,4:3e-37,6:4e37,8:4e-37}/9'::sparsevec);

-- Comparisons: the order of the dense vectors, then the shorter first
SELECT a, b, a < b AS lt, a <= b AS le, a = b AS eq, a <> b AS ne, a >= b AS ge, a > b AS gt, sparsevec_cmp(a, b) AS cmp
FROM (VALUES ('{1:1,2:2,3:3}/3'::sparsevec, '{1:1,2:2,3:3}/3'::sparsevec), ('{1:1,2:2,3:3}/3', '{1:1,2:2}/2'),
             ('{1:1,2:2}/2', '{1:1,2:2,3:3}/3'), ('{1:1,2:2,3:3}/3', '{}/3'), ('{}/3', '{1:-1}/3'),
             ('{1:1,2:2}/2', '{1:2,2:3,3:4}/3'), ('{1:2,2:3}/2', '{1:1,2:2,3:3}/3'), ('{2:1}/3', '{3:1}/3'),
             ('{3:-1}/3', '{2:-1}/3'), ('{}/2', '{3:1}/3'), ('{3:1}/3', '{}/2'), ('{1:1}/2', '{1:1,3:5}/3'),
             ('{2:1}/3', '{1:1}/3')) t(a, b);
-- the same order as the dense vectors, on many pairs
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE sparsevec_cmp(a::sparsevec, b::sparsevec) <> vector_cmp(a, b)) AS disagree
FROM (SELECT ARRAY(SELECT ((i * 7 + j * 3) % 5 - 2) * (j % 2) FROM generate_series(1, 1 + i % 4) j)::float8[]::vector AS a
      FROM generate_series(1, 40) i) x,
     (SELECT ARRAY(SELECT ((i * 5 + j) % 3 - 1) FROM generate_series(1, 1 + i % 3) j)::float8[]::vector AS b
      FROM generate_series(1, 40) i) y;

-- btree: ORDER BY, DISTINCT, an index for equality and order
CREATE TABLE sv_b (v sparsevec(3));
INSERT INTO sv_b VALUES ('{}/3'), ('{1:1,2:2,3:3}/3'), ('{1:1,2:1,3:1}/3'), (NULL), ('{3:-1}/3'), ('{1:1,2:1,3:1}/3');
SELECT v FROM sv_b ORDER BY v;
SELECT count(DISTINCT v) FROM sv_b;
CREATE INDEX sv_b_idx ON sv_b (v);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM sv_b WHERE v = '{1:1,2:2,3:3}/3';
SELECT v FROM sv_b WHERE v = '{1:1,2:2,3:3}/3';
SELECT v FROM sv_b WHERE v > '{}/3' ORDER BY v DESC;
RESET enable_seqscan;
DROP TABLE sv_b;

-- Casts: vector -> sparsevec (implicit), sparsevec -> vector (assignment),
-- integer[], real[], double precision[], numeric[] -> sparsevec (assignment)
SELECT c.castsource::regtype, c.casttarget::regtype, c.castcontext
FROM pg_cast c WHERE 'sparsevec'::regtype IN (c.castsource, c.casttarget) ORDER BY c.castsource::regtype::text, c.casttarget::regtype::text;
SELECT '[0,1.5,0,3.5,0]'::vector::sparsevec, '[0,1.5,0,3.5,0]'::vector::sparsevec(5), '{2:1.5,4:3.5}/5'::sparsevec::vector,
       '{2:1.5,4:3.5}/5'::sparsevec::vector(5), '[0,0]'::vector::sparsevec AS all_zero;
SELECT ARRAY[1,0,2,0,3,0]::sparsevec AS int, ARRAY[1.0,0.0,2.0,0.0,3.0,0.0]::sparsevec AS num,
       '{1,0,2,0,3,0}'::real[]::sparsevec(6) AS real, '{1,0,2,0,3,0}'::double precision[]::sparsevec AS double,
       '{1e-46,-1e-46}'::double precision[]::sparsevec AS underflow_is_zero;
-- implicit: a vector goes where a sparsevec is expected
SELECT l2_norm('[3,0,4]'::vector) AS vector_to_l2_norm, '{1:1}/3'::sparsevec <-> '[0,0,1]'::vector AS mixed;
CREATE TABLE sv_c (s sparsevec, v vector);
INSERT INTO sv_c VALUES ('[1,0,2]'::vector, '{1:1,3:2}/3'::sparsevec), (ARRAY[0,5]::int[], NULL);
SELECT s, v FROM sv_c;
DROP TABLE sv_c;
SELECT q AS cast, pg_temp.try(q) AS result
FROM (VALUES ($$SELECT '[0,1.5,0,3.5,0]'::vector::sparsevec(4)::text$$),
             ($$SELECT '{2:1.5,4:3.5}/5'::sparsevec::vector(4)::text$$),
             ($$SELECT '{}/16001'::sparsevec::vector::text$$),
             ($$SELECT '{1,0,2,0,3,0}'::real[]::sparsevec(5)::text$$),
             ($$SELECT '{NULL}'::real[]::sparsevec::text$$), ($$SELECT '{NaN}'::real[]::sparsevec::text$$),
             ($$SELECT '{Infinity}'::real[]::sparsevec::text$$), ($$SELECT '{1,-Infinity,NaN}'::real[]::sparsevec::text$$),
             ($$SELECT '{4e38,-4e38}'::double precision[]::sparsevec::text$$),
             ($$SELECT '{}'::real[]::sparsevec::text$$), ($$SELECT '{{1}}'::real[]::sparsevec::text$$),
             ($$SELECT '{1e39}'::numeric[]::sparsevec::text$$),
             ($$SELECT (SELECT array_agg(n) FROM generate_series(1, 16001) n)::sparsevec::text$$),
             ($$SELECT (SELECT array_agg(n % 2) FROM generate_series(1, 32001) n)::sparsevec::text$$)) t(q);
-- As in pgvector, a function defined for several vector types needs one
-- typed argument to choose (two untyped literals are ambiguous: 42725)
SELECT pg_temp.try($$SELECT l2_distance('[0,0]', '[3,4]')$$) AS untyped,
       pg_temp.try($$SELECT l2_distance('[0,0]'::vector, '[3,4]')$$) AS vector,
       pg_temp.try($$SELECT l2_distance('{}/2'::sparsevec, '{1:3,2:4}/2')$$) AS sparsevec;

-- GpuTopK beside sparsevec and bit: their expressions do not compile, so a
-- ranking by them keeps PostgreSQL's plan; as projected columns and as a
-- filter PostgreSQL rechecks they go along with a vector ranking. The
-- answers equal those without GpuTopK.
SET gknn.device = cpu;
SET gknn.topk_min_rows = 0;
CREATE TABLE sv_k AS SELECT i AS id, ARRAY[i % 3, 0, i % 5 - 2]::float8[]::sparsevec AS s, (i % 8)::bit(3) AS b,
  ARRAY[i % 3, 1, i % 5 - 2]::float8[]::vector AS v FROM generate_series(1, 2000) i;
ANALYZE sv_k;
EXPLAIN (COSTS OFF) SELECT id FROM sv_k ORDER BY s <-> '{1:1}/3', id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM sv_k ORDER BY b <~> B'101', id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id, s, b FROM sv_k WHERE s <-> '{1:1}/3' < 1.5 ORDER BY v <-> '[1,1,1]', id LIMIT 4;
CREATE TEMP TABLE sv_k_on AS
  SELECT 1 AS q, id, s::text, b::text FROM (SELECT * FROM sv_k ORDER BY s <-> '{1:1}/3', id LIMIT 3) x
  UNION ALL SELECT 2, id, s::text, b::text FROM (SELECT * FROM sv_k ORDER BY b <~> B'101', id LIMIT 3) x
  UNION ALL SELECT 3, id, s::text, b::text
    FROM (SELECT * FROM sv_k WHERE s <-> '{1:1}/3' < 1.5 ORDER BY v <-> '[1,1,1]', id LIMIT 4) x;
SELECT * FROM sv_k_on ORDER BY q, id;
SET gknn.enable_topk = off;
SELECT count(*) AS differ FROM (
  (SELECT * FROM sv_k_on
   EXCEPT ALL (SELECT 1, id, s::text, b::text FROM (SELECT * FROM sv_k ORDER BY s <-> '{1:1}/3', id LIMIT 3) x
               UNION ALL SELECT 2, id, s::text, b::text FROM (SELECT * FROM sv_k ORDER BY b <~> B'101', id LIMIT 3) x
               UNION ALL SELECT 3, id, s::text, b::text
                 FROM (SELECT * FROM sv_k WHERE s <-> '{1:1}/3' < 1.5 ORDER BY v <-> '[1,1,1]', id LIMIT 4) x))) d;
RESET gknn.enable_topk;
RESET gknn.topk_min_rows;
RESET gknn.device;
DROP TABLE sv_k;
