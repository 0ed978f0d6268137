-- pgvector's distances on PostgreSQL's bit type: hamming_distance (<~>) and
-- jaccard_distance (<%>), and binary_quantize(vector) -> bit, including an
-- expression index on binary_quantize(emb)::bit(n).

-- try(query): the query's single value, or "SQLSTATE: message".
CREATE FUNCTION pg_temp.try(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
  state text;
  msg text;
BEGIN
  EXECUTE query INTO result;
  RETURN result;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
  RETURN state || ': ' || msg;
END $$;

-- Hamming: the number of differing bits
SELECT hamming_distance('111', '111'), hamming_distance('111', '110'), hamming_distance('111', '100'),
       hamming_distance('111', '000'), hamming_distance('', '') AS empty,
       hamming_distance('10101010101010101010', '01010101010101010101');
SELECT B'1010' <~> B'0110' AS op, hamming_distance('111', '000'::varbit(4)) AS varbit;
-- Jaccard: 1 - |a AND b| / |a OR b|, and 1 when no bit is set in both
SELECT jaccard_distance('1111', '1111'), jaccard_distance('1111', '1110'), jaccard_distance('1111', '1100'),
       jaccard_distance('1111', '1000'), jaccard_distance('1111', '0000'), jaccard_distance('1100', '1000'),
       jaccard_distance('0000', '0000') AS no_bits, jaccard_distance('', '') AS empty,
       jaccard_distance('10101010101010101010', '01010101010101010101');
SELECT B'1100' <%> B'1010' AS op, jaccard_distance('1111', '0000'::varbit(5)) AS varbit;
-- Long strings (whole 64-bit words and a tail) agree with bit_count
SELECT n, bool_and(hamming_distance(a, b) = bit_count(a # b)) AS hamming_ok,
       bool_and(jaccard_distance(a, b) = CASE WHEN bit_count(a & b) = 0 THEN 1
                                              ELSE 1 - bit_count(a & b)::float8 / bit_count(a | b) END) AS jaccard_ok
FROM (SELECT n, s,
             (SELECT string_agg(((i * 7 + s * 13 + i / 3) % 3 = 0)::int::text, '') FROM generate_series(1, n) i)::varbit AS a,
             (SELECT string_agg(((i * 5 + s) % 4 < 2)::int::text, '') FROM generate_series(1, n) i)::varbit AS b
      FROM (VALUES (1), (63), (64), (65), (513), (1536)) l(n), generate_series(1, 5) s) t
GROUP BY n ORDER BY n;
SELECT hamming_distance(repeat('1', 1000)::bit(1000), repeat('0', 1000)::bit(1000)),
       jaccard_distance(repeat('1', 1000)::bit(1000), ('1' || repeat('0', 999))::bit(1000));
-- the operators commute
SELECT o.oprname, o.oprcom::regoperator FROM pg_operator o
WHERE o.oprleft = 'bit'::regtype AND o.oprname IN ('<~>', '<%>') ORDER BY 1;
-- Different lengths: 22000, as pgvector words it
SELECT q AS call, pg_temp.try(q) AS result
FROM (VALUES ($$SELECT hamming_distance('111', '00')$$), ($$SELECT hamming_distance('111', '0000'::varbit(4))$$),
             ($$SELECT jaccard_distance('1111', '000')$$), ($$SELECT jaccard_distance('1111', '00000'::varbit(5))$$),
             ($$SELECT B'1' <~> B'11'$$), ($$SELECT B'11' <%> B''$$)) t(q);

-- binary_quantize: 1 where the element is above 0
SELECT binary_quantize('[1,0,-1]'::vector), binary_quantize('[0,0.1,-0.2,-0.3,0.4,0.5,0.6,-0.7,0.8,-0.9,1]'::vector),
       binary_quantize('[1,2,3,-4,5,6,-7,8,1,-2,-3,4,5,-6,7,8,-1,2,3]'::vector), binary_quantize('[-0]'::vector),
       binary_quantize('[1e-45]'::vector) AS smallest;
SELECT length(binary_quantize(v)), bit_count(binary_quantize(v))
FROM (SELECT ARRAY(SELECT (i % 3) - 1 FROM generate_series(1, 16000) i)::float8[]::vector AS v) t;
SELECT pg_typeof(binary_quantize('[1]'::vector)), binary_quantize('[1,-1,1]'::vector) <~> binary_quantize('[1,1,1]'::vector);

-- An expression index on binary_quantize(emb)::bit(3), as pgvector users
-- build them; queries that repeat the expression use it
CREATE TABLE bq (id int, emb vector(3));
INSERT INTO bq SELECT i, ARRAY[(i % 3) - 1, (i % 5) - 2, (i % 7) - 3]::float8[]::vector FROM generate_series(1, 200) i;
INSERT INTO bq VALUES (0, NULL);
CREATE INDEX bq_bits ON bq USING btree ((binary_quantize(emb)::bit(3)));
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM bq WHERE binary_quantize(emb)::bit(3) = B'101';
SELECT count(*) FROM bq WHERE binary_quantize(emb)::bit(3) = B'101';
RESET enable_seqscan;
-- the same rows found from the elements' signs
SELECT count(*) FROM bq WHERE (emb::real[])[1] > 0 AND NOT (emb::real[])[2] > 0 AND (emb::real[])[3] > 0;
SELECT binary_quantize(emb)::bit(3) AS bits, count(*) FROM bq GROUP BY 1 ORDER BY 1;
-- ranking by Hamming distance, re-ranked by the exact distance
SELECT id, emb, binary_quantize(emb)::bit(3) <~> B'111' AS hamming
FROM bq WHERE id > 0 ORDER BY binary_quantize(emb)::bit(3) <~> B'111', emb <-> '[1,1,1]', id LIMIT 4;
SET gknn.topk_min_rows = 0;
SELECT id, emb, binary_quantize(emb)::bit(3) <%> B'110' AS jaccard
FROM bq WHERE id > 0 ORDER BY binary_quantize(emb)::bit(3) <%> B'110', id LIMIT 3;
RESET gknn.topk_min_rows;
-- bit(n) as PostgreSQL has it: an explicit cast pads or truncates, storing
-- into a bit(3) column checks the length
SELECT binary_quantize('[1,2,3,4]'::vector)::bit(3) AS truncated, binary_quantize('[1,2]'::vector)::bit(3) AS padded;
CREATE TEMP TABLE bq_bits (b bit(3));
SELECT pg_temp.try($$INSERT INTO bq_bits VALUES (binary_quantize('[1,2,3,4]'::vector)) RETURNING b::text$$) AS wrong_length,
       pg_temp.try($$INSERT INTO bq_bits VALUES (binary_quantize('[1,-2,3]'::vector)) RETURNING b::text$$) AS right_length;
INSERT INTO bq VALUES (201, '[1,2,3]');
SELECT count(*) FROM bq;
DROP TABLE bq;
