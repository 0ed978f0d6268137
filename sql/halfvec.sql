-- halfvec (pgvector's half-precision vector) and || for vector and halfvec:
-- I/O, rounding, typmods, errors with their SQLSTATEs, binary format and
-- COPY BINARY, operators, functions, casts, comparisons, aggregates.

-- An error as "SQLSTATE: message" (psql shows no SQLSTATE by default).
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  detail text;
BEGIN
  EXECUTE stmt;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || CASE WHEN detail <> '' THEN ' (' || detail || ')' ELSE '' END;
END $$;

-- Text input and output ------------------------------------------------------
SELECT '[1,2,3]'::halfvec, ' [ -1.5 , 2.25 ,3e2 ] '::halfvec, E'[1,\t2,\n3]'::halfvec;
-- Values round to the nearest half, ties to even: 2049 lies halfway between
-- 2048 and 2050 (to 2048, even), 2051 between 2050 and 2052 (to 2052);
-- 65519 rounds down to the largest half, 65504.
SELECT '[1.23456, 0.1, 2049, 2051, 65519, -65504]'::halfvec;
-- Subnormals: 2^-24 is the smallest half; 2^-25 (2.9802322e-08) is halfway
-- to 0 and rounds to 0 (even); below that, and float underflow, give 0.
SELECT '[5.9604645e-08, 2.9802322e-08, 3e-8, 1e-8, -1e-8, 1e-46, -0]'::halfvec;
-- Output is the shortest text of the float value, which reads back exactly.
SELECT '[0.1, 1000.7, 6.1e-5]'::halfvec::text::halfvec = '[0.1, 1000.7, 6.1e-5]'::halfvec AS round_trips;
SELECT vector_dims(('[' || repeat('1,', 15999) || '1]')::halfvec) AS dims_16000;

SELECT s AS input, pg_temp.err(format('SELECT %L::halfvec', s)) AS error
FROM (VALUES ('[1,2'), ('[]'), ('[ ]'), ('[1,,2]'), ('[1,]'), ('[,]'), ('[a]'), ('[1a]'), ('[1 2]'),
             ('1,2'), ('[1,2] x'), (''), ('['), ('[65520]'), ('[-65520]'), ('[1e39]'),
             ('[4e38,1]'), ('[NaN]'), ('[Infinity]'), ('[-inf]')) t(s);
SELECT pg_temp.err($$SELECT ('[' || repeat('1,', 16000) || '1]')::halfvec$$) AS too_many_dims;

-- Type modifiers ----------------------------------------------------------------
SELECT '[1,2,3]'::halfvec(3);
SELECT s AS typmod_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT '[1,2]'::halfvec(3)$$), ($$SELECT '[1,2,3]'::halfvec(0)$$),
             ($$SELECT '[1,2,3]'::halfvec(16001)$$), ($$SELECT '[1,2,3]'::halfvec(3, 2)$$),
             ($$SELECT '{"[1,2,3]"}'::halfvec(2)[]$$), ($$CREATE TABLE hv_bad (v halfvec(0))$$)) t(s);
SELECT '{"[1,2]","[3,4.5]"}'::halfvec[] AS arr, '{"[1,2]"}'::halfvec(2)[] AS typed_arr;

CREATE TABLE hv_io (id int, v halfvec(3));
INSERT INTO hv_io VALUES (1, '[1,2,3]'), (2, NULL), (3, '[1,2,3]'::vector), (4, ARRAY[4,5,6]);
SELECT pg_temp.err($$INSERT INTO hv_io VALUES (5, '[1,2]')$$) AS wrong_dims,
       pg_temp.err($$UPDATE hv_io SET v = '[1,2,3,4]'::halfvec WHERE id = 1$$) AS wrong_dims_update;
SELECT id, v FROM hv_io ORDER BY id;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'hv_io'::regclass AND attname = 'v';
DROP TABLE hv_io;

-- Rounding of every half ---------------------------------------------------------
-- Each finite non-negative half v(k) (k its bits), the midpoint between it and
-- the next half, and the floats just below and above that midpoint, both
-- signs; expected values come from float8 arithmetic here (round to nearest,
-- ties to the even k), not from gknn.
CREATE FUNCTION pg_temp.to_half(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE
  AS $$ SELECT (ARRAY[x::real]::halfvec::real[])[1]::float8 $$;
CREATE TEMP TABLE halves AS
SELECT k, CASE WHEN k < 1024 THEN k * 2::float8 ^ -24 ELSE (1024 + k % 1024) * 2::float8 ^ (k / 1024 - 25) END AS v
FROM generate_series(0, 31743) k;
CREATE TEMP TABLE rounding AS
SELECT h.k, h.v, n.v AS next, (h.v + n.v) / 2 AS mid,
       -- one unit in the last place of a float4 at the midpoint
       2::float8 ^ (CASE WHEN h.k < 1024 THEN floor(log(2, (2 * h.k + 1)::numeric))::int - 25
                         ELSE h.k / 1024 - 15 END - 23) AS ulp
FROM halves h JOIN halves n ON n.k = h.k + 1;
CREATE TEMP TABLE rounding_cases AS
SELECT 'exact' AS kind, v AS x, v AS expected FROM halves
UNION ALL SELECT 'midpoint', mid, CASE WHEN k % 2 = 0 THEN v ELSE next END FROM rounding
UNION ALL SELECT 'below midpoint', mid - ulp, v FROM rounding
UNION ALL SELECT 'above midpoint', mid + ulp, next FROM rounding;
INSERT INTO rounding_cases SELECT kind || ', negative', -x, -expected FROM rounding_cases;
-- The cases are float4 values (no rounding before the conversion under test).
SELECT count(*) FILTER (WHERE x::real::float8 <> x) AS not_float4 FROM rounding_cases;
SELECT kind, count(*) AS cases,
       count(*) FILTER (WHERE pg_temp.to_half(x) <> expected
                           OR sign(pg_temp.to_half(x)) <> sign(expected)) AS wrong
FROM rounding_cases GROUP BY kind ORDER BY kind;
-- Text input rounds the same way.
SELECT count(*) AS cases,
       count(*) FILTER (WHERE halfvec_send(('[' || x::real::text || ']')::halfvec)
                              <> halfvec_send(ARRAY[x::real]::halfvec)) AS differ
FROM rounding_cases;
-- -0 keeps its sign.
SELECT '[-0]'::halfvec::real[] AS neg_zero, ARRAY[-1e-9]::real[]::halfvec AS underflow_keeps_sign;
DROP TABLE halves, rounding, rounding_cases;

-- Binary format: uint16 dim, uint16 unused (0), then each element's binary16
-- bits, network order (pgvector's) ------------------------------------------------
SELECT halfvec_send('[1,2,3]') AS one_two_three, halfvec_send('[-0,65504,5.9604645e-08]') AS edges;
-- halfvec_recv through COPY BINARY of hand-made payloads: each row of a
-- one-column file (written as bytea) read back as halfvec.
SELECT current_setting('data_directory') || '/gknn_regress_halfvec' AS f \gset
CREATE TABLE hv_recv (v halfvec);
CREATE TABLE hv_recv3 (v halfvec(3));
CREATE FUNCTION pg_temp.recv(payload text, target text DEFAULT 'hv_recv') RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  path text := current_setting('data_directory') || '/gknn_regress_halfvec.payload';
  result text;
BEGIN
  EXECUTE format('COPY (SELECT decode(%L, ''hex'')) TO %L (FORMAT binary)', replace(payload, ' ', ''), path);
  EXECUTE format('TRUNCATE %I', target);
  EXECUTE format('COPY %I FROM %L (FORMAT binary)', target, path);
  EXECUTE format('SELECT v::text FROM %I', target) INTO result;
  RETURN result;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT p AS payload, pg_temp.recv(p) AS received
FROM (VALUES ('0003 0000 3c00 4000 4200'), ('0001 0000 8000'), ('0002 0000 0001 7bff'),
             ('0000 0000'), ('3e80 0000'), ('3e81 0000'), ('ffff 0000'), ('0001 0001 3c00'),
             ('0001 ffff 3c00'), ('0001 0000 7e00'), ('0001 0000 7c01'), ('0001 0000 7c00'),
             ('0001 0000 fc00'), ('0002 0000 3c00'), ('0001 0000 3c00 0000')) t(p);
SELECT pg_temp.recv('0002 0000 3c00 4000', 'hv_recv3') AS typmod_mismatch,
       pg_temp.recv('0003 0000 3c00 4000 4200', 'hv_recv3') AS typmod_match;
DROP TABLE hv_recv, hv_recv3;

-- COPY BINARY (and text) round trips
CREATE TABLE hv_copy_src (id int, v halfvec, v3 halfvec(3));
INSERT INTO hv_copy_src VALUES
  (1, '[1,2,3]', '[4,5,6]'), (2, '[-0.1,6e-8,65504,-65504]', '[0,-0,0.5]'), (3, NULL, NULL),
  (4, array_fill(0.25, ARRAY[16000])::halfvec, '[1e-7,1e-5,1e-3]');
\set ECHO none
SELECT format('COPY hv_copy_src TO %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
CREATE TABLE hv_copy_dst (LIKE hv_copy_src);
\set ECHO none
SELECT format('COPY hv_copy_dst FROM %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
SELECT d.id, s.v IS NOT DISTINCT FROM d.v AND s.v3 IS NOT DISTINCT FROM d.v3 AS same,
       halfvec_send(s.v) IS NOT DISTINCT FROM halfvec_send(d.v) AS same_bytes
FROM hv_copy_src s JOIN hv_copy_dst d USING (id) ORDER BY id;
TRUNCATE hv_copy_dst;
\set ECHO none
SELECT format('COPY hv_copy_src TO %L', :'f' || '.txt') \gexec
SELECT format('COPY hv_copy_dst FROM %L', :'f' || '.txt') \gexec
\set ECHO all
SELECT count(*) AS same_rows FROM hv_copy_src s JOIN hv_copy_dst d
  ON s.id = d.id AND halfvec_send(s.v) IS NOT DISTINCT FROM halfvec_send(d.v) AND s.v3 IS NOT DISTINCT FROM d.v3;
DROP TABLE hv_copy_src, hv_copy_dst;

-- Distances ------------------------------------------------------------------------
SELECT '[1,2,3]'::halfvec <-> '[4,5,6]' AS l2, '[1,2,3]'::halfvec <#> '[4,5,6]' AS neg_ip,
       '[1,2,3]'::halfvec <=> '[4,5,6]' AS cosine, '[1,2,3]'::halfvec <+> '[4,5,6]' AS l1;
SELECT l2_distance('[0,0]'::halfvec, '[3,4]'), inner_product('[1,2]'::halfvec, '[3,4]'),
       cosine_distance('[1,0]'::halfvec, '[0,1]'), l1_distance('[1,-2]'::halfvec, '[-1,2]'),
       halfvec_l2_squared_distance('[0,0]', '[3,4]'), halfvec_negative_inner_product('[1,2]', '[3,4]');
SELECT cosine_distance('[1,2]'::halfvec, '[2,4]'), cosine_distance('[1,2]'::halfvec, '[-1,-2]'),
       cosine_distance('[0,0]'::halfvec, '[1,2]') AS zero_is_nan;
-- Distances accumulate in float: 65504^2 * 2 is finite in float.
SELECT '[65504,65504]'::halfvec <-> '[-65504,-65504]' AS far, '[65504]'::halfvec <#> '[65504]' AS big_ip;
SELECT s AS mismatched, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT '[1,2]'::halfvec <-> '[1,2,3]'$$), ($$SELECT '[1,2]'::halfvec <#> '[1,2,3]'$$),
             ($$SELECT '[1,2]'::halfvec <=> '[1,2,3]'$$), ($$SELECT '[1,2]'::halfvec <+> '[1,2,3]'$$),
             ($$SELECT inner_product('[1,2]'::halfvec, '[1,2,3]')$$),
             ($$SELECT halfvec_l2_squared_distance('[1,2]', '[1,2,3]')$$)) t(s);
-- A halfvec's distances are those of its float values: equal to the vector
-- operators' bit for bit, and close to float8 sums computed here.
CREATE TEMP TABLE hv_big AS
SELECT i, ARRAY(SELECT sin(i * 7919 + j) * 20 FROM generate_series(1, 3072) j)::halfvec(3072) AS h
FROM generate_series(1, 5) i;
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE a.h <-> b.h = a.h::vector <-> b.h::vector
                          AND a.h <#> b.h = a.h::vector <#> b.h::vector
                          AND a.h <=> b.h IS NOT DISTINCT FROM a.h::vector <=> b.h::vector
                          AND a.h <+> b.h = a.h::vector <+> b.h::vector
                          AND l2_norm(a.h) = vector_norm(a.h::vector)) AS equal_to_vector
FROM hv_big a, hv_big b;
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE abs((a.h <-> b.h) - r.l2) <= 1e-5 * r.l2
                          AND abs((a.h <+> b.h) - r.l1) <= 1e-5 * r.l1
                          AND abs((a.h <#> b.h) + r.ip) <= 1e-5 * r.scale) AS close_to_float8
FROM hv_big a, hv_big b,
     LATERAL (SELECT sqrt(sum((x - y) ^ 2)) AS l2, sum(abs(x - y)) AS l1, sum(x * y) AS ip,
                     sum(abs(x * y)) AS scale
              FROM unnest(a.h::real[]::float8[], b.h::real[]::float8[]) u(x, y)) r;
-- Nearest neighbours by each operator
CREATE TABLE hv_ops (id int, v halfvec(2));
INSERT INTO hv_ops VALUES (1, '[1,1]'), (2, '[2,2]'), (3, '[-1,-1]'), (4, '[0,0]'), (5, '[1,1]'), (6, NULL);
SELECT id, v <-> '[1,1]' AS d FROM hv_ops ORDER BY v <-> '[1,1]', id LIMIT 4;
SELECT id, v <#> '[1,1]' AS d FROM hv_ops ORDER BY v <#> '[1,1]', id LIMIT 4;
SELECT id, v <=> '[1,1]' AS d FROM hv_ops ORDER BY v <=> '[1,1]', id;
SELECT id, v <+> '[1,1]' AS d FROM hv_ops ORDER BY v <+> '[1,1]', id LIMIT 4;
-- A vector operand meets halfvec's operators through the implicit cast.
SELECT id, v <-> '[1,1]'::vector AS d FROM hv_ops ORDER BY v <-> '[1,1]'::vector, id LIMIT 2;
DROP TABLE hv_ops;

-- Functions --------------------------------------------------------------------------
SELECT vector_dims('[1,2,3]'::halfvec), l2_norm('[3,4]'::halfvec), l2_norm('[0,0]'::halfvec),
       l2_norm('[65504,65504]'::halfvec) AS big_norm;
SELECT l2_normalize('[3,4]'::halfvec), l2_normalize('[0,0]'::halfvec),
       l2_normalize('[5.9604645e-08,0]'::halfvec), l2_normalize('[65504,65504,-65504]'::halfvec);
SELECT subvector('[1,2,3,4,5]'::halfvec, 1, 3), subvector('[1,2,3,4,5]'::halfvec, 3, 2),
       subvector('[1,2,3,4,5]'::halfvec, -1, 3), subvector('[1,2,3,4,5]'::halfvec, 4, 10),
       subvector('[1,2,3,4,5]'::halfvec, 1, 2147483647), subvector('[1,2,3,4,5]'::halfvec, 5, 1);
SELECT s AS subvector_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT subvector('[1,2,3,4,5]'::halfvec, 6, 1)$$),
             ($$SELECT subvector('[1,2,3,4,5]'::halfvec, 3, 0)$$),
             ($$SELECT subvector('[1,2,3,4,5]'::halfvec, -3, 3)$$),
             ($$SELECT subvector('[1,2,3,4,5]'::halfvec, 2, -1)$$),
             ($$SELECT subvector('[1,2,3,4,5]'::halfvec, 2147483647, 2147483647)$$),
             ($$SELECT subvector('[1,2,3,4,5]'::halfvec, -2147483648, 2147483647)$$)) t(s);
SELECT binary_quantize('[1,-1,0,2,3,4,5,6,-7]'::halfvec), binary_quantize('[-0,5.9604645e-08]'::halfvec),
       pg_typeof(binary_quantize('[1]'::halfvec));
SELECT l2_distance(NULL::halfvec, '[1]') IS NULL AS null_in_null_out, vector_dims(NULL::halfvec) IS NULL AS dims_null;
-- Unknown literals name vector's and halfvec's functions alike (as in pgvector).
SELECT pg_temp.err($$SELECT vector_dims('[1,2]')$$) AS ambiguous,
       pg_temp.err($$SELECT l2_norm('[3,4]'::vector)$$) AS ambiguous_through_casts;

-- Arithmetic: computed in float, rounded to the nearest half -----------------------
SELECT '[1,2,3]'::halfvec + '[4,5,6]' AS sum, '[1,2,3]'::halfvec - '[4,5,6]' AS diff,
       '[1,2,3]'::halfvec * '[4,5,6]' AS prod;
SELECT '[2048,2048]'::halfvec + '[1,3]' AS ties_to_even, '[0.001]'::halfvec * '[0.001]' AS subnormal,
       '[65504]'::halfvec - '[8]' AS below_max;
SELECT s AS arithmetic_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT '[65504]'::halfvec + '[65504]'$$), ($$SELECT '[-65504]'::halfvec - '[65504]'$$),
             ($$SELECT '[65504]'::halfvec + '[16]'$$), ($$SELECT '[300]'::halfvec * '[300]'$$),
             ($$SELECT '[1e-4]'::halfvec * '[1e-4]'$$), ($$SELECT '[1,2]'::halfvec + '[1,2,3]'$$),
             ($$SELECT '[1,2]'::halfvec - '[1,2,3]'$$), ($$SELECT '[1,2]'::halfvec * '[1,2,3]'$$)) t(s);
SELECT '[0,1]'::halfvec * '[1e-4,0]' AS zero_times_small;

-- || ---------------------------------------------------------------------------------
SELECT '[1,2,3]'::vector || '[4,5]' AS v, pg_typeof('[1,2,3]'::vector || '[4,5]'),
       '[1,2,3]'::halfvec || '[4,5]' AS h, pg_typeof('[1,2,3]'::halfvec || '[4,5]');
SELECT '[1.5]'::vector || '[0.1]'::halfvec AS mixed, pg_typeof('[1.5]'::vector || '[0.1]'::halfvec);
SELECT vector_dims(array_fill(0, ARRAY[15999])::vector || '[1]') AS vector_16000,
       vector_dims(array_fill(0, ARRAY[15999])::halfvec || '[1]') AS halfvec_16000;
SELECT pg_temp.err($$SELECT array_fill(0, ARRAY[16000])::vector || '[1]'$$) AS vector_too_long,
       pg_temp.err($$SELECT array_fill(0, ARRAY[16000])::halfvec || '[1]'$$) AS halfvec_too_long;
SELECT NULL::vector || '[1]' IS NULL AS null_vector, NULL::halfvec || '[1]' IS NULL AS null_halfvec;
CREATE TABLE hv_concat (a vector(2), b halfvec(3), ab vector(5), bb halfvec(6));
INSERT INTO hv_concat (a, b) VALUES ('[1,2]', '[3,4,5]');
UPDATE hv_concat SET ab = a || '[3,4,5]', bb = b || b;
SELECT * FROM hv_concat;
DROP TABLE hv_concat;

-- Comparisons and the btree opclass -------------------------------------------------
SELECT '[1,2,3]'::halfvec < '[1,2,4]' AS lt, '[1,2,3]'::halfvec <= '[1,2,3]' AS le,
       '[1,2,3]'::halfvec = '[1,2,3]' AS eq, '[1,2,3]'::halfvec <> '[1,2]' AS ne,
       '[1,2,3]'::halfvec >= '[1,2]' AS ge, '[2]'::halfvec > '[1,9]' AS gt,
       '[-0]'::halfvec = '[0]' AS zero_eq, '[1.0001]'::halfvec = '[1]' AS rounded_eq;
SELECT halfvec_cmp('[1,2,3]', '[1,2,3]'), halfvec_cmp('[1,2,3]', '[0,0,0]'), halfvec_cmp('[0,0,0]', '[1,2,3]'),
       halfvec_cmp('[1,2]', '[1,2,3]'), halfvec_cmp('[1,2,3]', '[1,2]'), halfvec_cmp('[1,2]', '[2,3,4]');
CREATE TABLE hv_cmp (id int, v halfvec);
INSERT INTO hv_cmp VALUES (1, '[2]'), (2, '[1,5]'), (3, '[1]'), (4, '[1,5]'), (5, '[-1,100]'), (6, NULL), (7, '[-0]'), (8, '[0]');
SELECT string_agg(v::text, ' ' ORDER BY v, id) AS sorted FROM hv_cmp;
SELECT DISTINCT v FROM hv_cmp WHERE v IS NOT NULL ORDER BY v;
CREATE INDEX hv_cmp_v ON hv_cmp (v);
SET enable_seqscan = off;
SELECT id FROM hv_cmp WHERE v = '[1,5]' ORDER BY id;
SELECT id FROM hv_cmp WHERE v > '[1]' ORDER BY v, id;
RESET enable_seqscan;
DROP TABLE hv_cmp;

-- Casts -------------------------------------------------------------------------------
-- As pgvector declares them (i: implicit, a: assignment, e: explicit only).
SELECT castsource::regtype AS source, casttarget::regtype AS target, castcontext, castfunc::regproc
FROM pg_cast WHERE 'halfvec'::regtype IN (castsource, casttarget)
ORDER BY castsource::regtype::text COLLATE "C", casttarget::regtype::text COLLATE "C";
SELECT '[1,2.5,-3]'::vector::halfvec, '[1.23456]'::vector::halfvec(1), '[1e-10]'::vector::halfvec AS underflow,
       '[0.1,65504]'::halfvec::vector AS exact;
SELECT ARRAY[1,2,3]::halfvec AS ints, ARRAY[1.5,2.25]::real[]::halfvec AS reals,
       ARRAY[0.1,2049]::float8[]::halfvec AS doubles, ARRAY[1.23456,65519.9]::numeric[]::halfvec AS numerics,
       '[1,2.5]'::halfvec::real[] AS to_real;
SELECT s AS cast_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT '[70000]'::vector::halfvec$$), ($$SELECT '[1,2]'::vector::halfvec(3)$$),
             ($$SELECT '[1,2]'::halfvec::vector(3)$$), ($$SELECT ARRAY[1,70000]::halfvec$$),
             ($$SELECT ARRAY[-1e5]::real[]::halfvec$$), ($$SELECT ARRAY[1e300]::float8[]::halfvec$$),
             ($$SELECT ARRAY['NaN']::float8[]::halfvec$$), ($$SELECT ARRAY['-Infinity']::real[]::halfvec$$),
             ($$SELECT ARRAY[1e40]::numeric[]::halfvec$$), ($$SELECT ARRAY[1,NULL]::int[]::halfvec$$),
             ($$SELECT ARRAY[[1,2],[3,4]]::int[]::halfvec$$), ($$SELECT '{}'::real[]::halfvec$$),
             ($$SELECT array_fill(1, ARRAY[16001])::halfvec$$), ($$SELECT ARRAY[1,2]::halfvec(3)$$)) t(s);
-- halfvec <-> sparsevec: non-zero halves kept exactly (-0 is zero); stored
-- values rounded to halves.
SELECT '[0,1.5,-0,65504,5.9604645e-08]'::halfvec::sparsevec AS to_sparse,
       '{2:0.1,4:1e-8,5:-2049}/5'::sparsevec::halfvec AS to_half,
       '[1,2]'::halfvec <-> '{1:1}/2'::sparsevec AS mixed_l2,
       pg_typeof('[1,2]'::halfvec + '[1,1]'::vector) AS half_plus_vector;
SELECT s AS sparse_cast_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT '{1:70000}/2'::sparsevec::halfvec$$), ($$SELECT '{1:1}/16001'::sparsevec::halfvec$$),
             ($$SELECT '{1:1}/2'::sparsevec::halfvec(3)$$), ($$SELECT '[1,2]'::halfvec::sparsevec(3)$$)) t(s);
-- Contexts at work: assignment to columns; vector -> halfvec also implicitly
-- in expressions; arrays and halfvec -> vector never implicitly.
CREATE TABLE hv_cast (h halfvec(2), v vector(2), r real[]);
INSERT INTO hv_cast VALUES (ARRAY[1,2]::int[], '[3,4]'::halfvec, '[5,6]'::halfvec);
INSERT INTO hv_cast VALUES ('[7,8]'::vector, '[9,10]'::vector, '{11,12}');
SELECT h, v, r, pg_typeof(h + v) AS mixed_plus FROM hv_cast ORDER BY h;
SELECT pg_temp.err($$SELECT '[1,2]'::halfvec + ARRAY[1,2]::real[]$$) AS no_implicit_array,
       pg_temp.err($$SELECT vector_norm('[1,2]'::halfvec)$$) AS no_implicit_to_vector;
DROP TABLE hv_cast;

-- Aggregates ---------------------------------------------------------------------------
CREATE TABLE hv_agg (v halfvec(3));
SELECT avg(v), sum(v) FROM hv_agg;
INSERT INTO hv_agg VALUES ('[1,2,3]'), ('[4,5,6]'), (NULL), ('[0.1,-7,0]');
SELECT avg(v), sum(v) FROM hv_agg;
SELECT avg(v) FROM (VALUES ('[65504]'::halfvec), ('[65504]')) t(v);
SELECT pg_temp.err($$SELECT sum(v) FROM (VALUES ('[65504]'::halfvec), ('[65504]')) t(v)$$) AS sum_overflow,
       pg_temp.err($$SELECT avg(v) FROM (VALUES ('[1,2]'::halfvec), ('[1,2,3]')) t(v)$$) AS avg_dims,
       pg_temp.err($$SELECT sum(v) FROM (VALUES ('[1,2]'::halfvec), ('[1,2,3]')) t(v)$$) AS sum_dims;
-- The state functions check what they are given (states only SQL can forge).
SELECT s AS state_case, pg_temp.err(s) AS error
FROM (VALUES ($$SELECT halfvec_accum('{1,2}', '[1,2,3]')$$), ($$SELECT halfvec_accum('{}', '[1]')$$),
             ($$SELECT halfvec_accum('{{1,2}}', '[1]')$$), ($$SELECT halfvec_accum('{1,NULL}', '[1]')$$),
             ($$SELECT halfvec_avg('{1}')$$), ($$SELECT halfvec_avg('{2,200000}')$$),
             ($$SELECT halfvec_avg(array_fill(1::float8, ARRAY[16002]))$$)) t(s);
SELECT halfvec_accum('{0}', '[1,2]') AS first, halfvec_accum('{1,1,2}', '[1,2]') AS second,
       halfvec_combine('{2,1,2}', '{1,3,4}') AS combined, halfvec_avg('{0}') IS NULL AS empty,
       halfvec_avg('{4,2,6}') AS mean;
-- Parallel aggregation (combine functions) gives the serial answer; the
-- values keep every partial sum exact, so the order of addition is moot.
CREATE TABLE hv_par AS SELECT ARRAY[i % 5, (i % 3) * 0.5, -(i % 2)]::halfvec(3) AS v FROM generate_series(1, 600) i;
ANALYZE hv_par;
SELECT avg(v), sum(v) FROM hv_par;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT avg(v), sum(v) FROM hv_par;
SELECT avg(v), sum(v) FROM hv_par;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;
DROP TABLE hv_agg, hv_par;

-- GpuTopK beside halfvec ------------------------------------------------------------
-- GpuTopK compiles no halfvec function: a ranking by a halfvec distance, or
-- a halfvec expression (|| too) it would compute below the sort, keeps
-- PostgreSQL's plan; a halfvec column projected, or a halfvec qual that
-- PostgreSQL rechecks, go along with a vector ranking. Answers equal those
-- with GpuTopK off.
SET gknn.device = cpu;
SET gknn.topk_min_rows = 0;
SET enable_sort = off;
CREATE TABLE hv_topk AS
SELECT i AS id, ARRAY[i % 7, i % 5, i % 3]::halfvec(3) AS h, ARRAY[i % 7, i % 5, i % 3]::vector(3) AS v
FROM generate_series(1, 500) i;
EXPLAIN (COSTS OFF) SELECT id FROM hv_topk ORDER BY h <-> '[1,2,2]', id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id, v || '[9]' FROM hv_topk ORDER BY v <-> '[1,2,2]', id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id, h FROM hv_topk WHERE id > 5 ORDER BY v <-> '[1,2,2]', id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM hv_topk WHERE h <-> '[1,2,2]' < 1 ORDER BY v <-> '[1,2,2]', id LIMIT 3;
CREATE FUNCTION pg_temp.topk_answers() RETURNS text LANGUAGE sql AS $$
  SELECT (SELECT string_agg(format('%s %s', id, h), ', ')
          FROM (SELECT id, h FROM hv_topk WHERE id > 5 ORDER BY v <-> '[1,2,2]', id LIMIT 3) s) || ' | ' ||
         (SELECT string_agg(id::text, ', ')
          FROM (SELECT id FROM hv_topk WHERE h <-> '[1,2,2]' < 1 ORDER BY v <-> '[1,2,2]', id LIMIT 3) s)
$$;
CREATE TEMP TABLE hv_topk_on AS SELECT pg_temp.topk_answers() AS answers;
SET gknn.enable_topk = off;
RESET enable_sort;
SELECT answers, answers = pg_temp.topk_answers() AS same_without_topk FROM hv_topk_on;
RESET gknn.enable_topk;
RESET gknn.topk_min_rows;
RESET gknn.device;
DROP TABLE hv_topk, hv_topk_on;
