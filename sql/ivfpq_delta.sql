-- gpu_ivfpq: a backend's cached image of a changed index is brought up to
-- date from the pages the metapage's change log names (inserts, new pages,
-- VACUUM's rewrites, NULL and pending chains), and answers exactly as an
-- image read whole from the same pages does: each step changes the index,
-- answers in the session whose image is one step old (the DEBUG line says
-- it was brought up to date, not read again), then in a new session (read
-- whole), and compares. Too many changes for the log, or gknn.ivfpq_delta =
-- off, read the whole index again (no DEBUG line); answers equal still.
SET client_min_messages = notice;

CREATE TABLE dl (id int PRIMARY KEY, emb vector(8)) WITH (autovacuum_enabled = off);
INSERT INTO dl
SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 2000) i;
CREATE INDEX dl_l2 ON dl USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 8, m = 4);
CREATE TABLE dq (q int, v vector(8));
INSERT INTO dq SELECT q, ARRAY(SELECT (q % 4) * 3 + ((q * 13 + j * 5) % 23) / 23.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 5) q;
-- Every query's answer under several settings: PQ candidates with little or
-- no re-rank (their ties go by list position, so the lists' order shows),
-- every list, and the exact mode over every row (NULLs last).
CREATE FUNCTION dl_answers() RETURNS TABLE (q int, setting text, ids int[])
LANGUAGE plpgsql AS $$
DECLARE qv vector; s text;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('gknn.device', 'cpu', true);
  FOR q, qv IN SELECT dq.q, dq.v FROM dq ORDER BY 1 LOOP
    FOREACH s IN ARRAY ARRAY['1/1', '3/1', '8/1', '2/4'] LOOP
      PERFORM set_config('gknn.ivfpq_probes', split_part(s, '/', 1), true);
      PERFORM set_config('gknn.ivfpq_refine', split_part(s, '/', 2), true);
      setting := s;
      SELECT array_agg(id) INTO ids FROM (SELECT id FROM dl ORDER BY emb <-> qv LIMIT 40) x;
      RETURN NEXT;
    END LOOP;
    PERFORM set_config('gknn.ivfpq_exact', 'on', true);
    setting := 'exact';
    SELECT array_agg(id) INTO ids FROM (SELECT id FROM dl ORDER BY emb <-> qv LIMIT 100000) x;
    RETURN NEXT;
    PERFORM set_config('gknn.ivfpq_exact', 'off', true);
  END LOOP;
END $$;
CREATE TABLE dl_got (step int, q int, setting text, ids int[]);
-- The answers of this session (its image brought up to date) as step n.
CREATE FUNCTION dl_keep(n int) RETURNS bigint LANGUAGE sql AS $$
  WITH k AS (INSERT INTO dl_got SELECT n, * FROM dl_answers() RETURNING 1) SELECT count(*) FROM k $$;
-- Answers of step n that differ from a whole image's (this new session's).
CREATE FUNCTION dl_differences(n int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM dl_answers() a FULL JOIN (SELECT * FROM dl_got WHERE step = n) g USING (q, setting)
  WHERE a.ids IS DISTINCT FROM g.ids $$;
SELECT count(*) FROM dl_answers();  -- this session's image, read whole

-- 1. Inserts: items appended to lists' last pages, and new pages. Twenty
-- vectors, fifteen rows each: equal PQ distances, whose ties go by position
-- in the list (so an image with its entries in another order answers
-- otherwise).
INSERT INTO dl
SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i % 10) * 3 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(2001, 2300) i;
SET client_min_messages = debug1;
SELECT dl_keep(1);
SET client_min_messages = notice;
\c
SELECT dl_differences(1);

-- 2. DELETE + VACUUM: pages rewritten without their dead items.
DELETE FROM dl WHERE id % 7 = 3;
VACUUM dl;
SET client_min_messages = debug1;
SELECT dl_keep(2);
SET client_min_messages = notice;
\c
SELECT dl_differences(2);

-- 3. Inserts that reuse the vacuumed heap TIDs (other vectors, other lists),
-- UPDATEs (a new entry, the old one dead), NULLs (the NULL chain).
INSERT INTO dl
SELECT i, ARRAY(SELECT ((i + 1) % 4) * 3 + ((i % 10) * 5 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(3001, 3150) i;
UPDATE dl SET emb = emb + '[0.5,0,0,0,0,0,0,0.5]' WHERE id % 50 = 1;
INSERT INTO dl SELECT i, NULL FROM generate_series(4001, 4003) i;
SET client_min_messages = debug1;
SELECT dl_keep(3);
SET client_min_messages = notice;
\c
SELECT dl_differences(3);

-- 4. Rewrites and appends mixed on the same pages before one refresh.
DELETE FROM dl WHERE id % 50 = 1 OR id = 4002;
VACUUM dl;
INSERT INTO dl
SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i % 10) * 3 + j) % 7 / 7.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(5001, 5040) i;
SET client_min_messages = debug1;
SELECT dl_keep(4);
SET client_min_messages = notice;
\c
SELECT dl_differences(4);

-- 5. More changes than the log holds (448): the image is read whole.
INSERT INTO dl
SELECT i, ARRAY(SELECT (i % 4) * 3 + ((i * 29 + j * 13) % 83) / 83.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(6001, 6500) i;
SET client_min_messages = debug1;
SELECT dl_keep(5);
SET client_min_messages = notice;
\c
SELECT dl_differences(5);

-- 6. gknn.ivfpq_delta = off: read whole.
DELETE FROM dl WHERE id BETWEEN 6001 AND 6010;
VACUUM dl;
SET gknn.ivfpq_delta = off;
SET client_min_messages = debug1;
SELECT dl_keep(6);
SET client_min_messages = notice;
\c
SELECT dl_differences(6);

-- 7. An index built on no rows: inserts go to its pending chain.
CREATE TABLE dp (id int, emb vector(4)) WITH (autovacuum_enabled = off);
CREATE INDEX dp_idx ON dp USING gpu_ivfpq (emb) WITH (lists = 4, m = 2);
INSERT INTO dp VALUES (1, '[1,1,1,1]'), (2, '[2,2,2,2]');
SET enable_seqscan = off;
SET gknn.device = cpu;
SELECT array_agg(id) FROM (SELECT id FROM dp ORDER BY emb <-> '[0,0,0,0]' LIMIT 5) s;
INSERT INTO dp VALUES (3, '[0.5,0.5,0.5,0.5]'), (4, NULL);
SET client_min_messages = debug1;
SELECT array_agg(id) FROM (SELECT id FROM dp ORDER BY emb <-> '[0,0,0,0]' LIMIT 5) s;
SET client_min_messages = notice;
DELETE FROM dp WHERE id = 1;
VACUUM dp;
SET client_min_messages = debug1;
SELECT array_agg(id) FROM (SELECT id FROM dp ORDER BY emb <-> '[0,0,0,0]' LIMIT 5) s;
SET client_min_messages = notice;

-- 8. Stored vectors of other element types (halfvec, bit strings): the
-- refreshed image's exact answers equal a whole image's.
CREATE TABLE dt (id int PRIMARY KEY, h halfvec(6), b bit(12)) WITH (autovacuum_enabled = off);
INSERT INTO dt SELECT i, ARRAY(SELECT ((i * 7 + j * 3) % 11) / 4.0 FROM generate_series(1, 6) j)::halfvec,
                      ((i * 37) % 4096)::bit(12) FROM generate_series(1, 600) i;
CREATE INDEX dt_h ON dt USING gpu_ivfpq (h halfvec_l2_ops) WITH (lists = 4, m = 3);
CREATE INDEX dt_b ON dt USING gpu_ivfpq (b bit_hamming_ops) WITH (lists = 4, m = 3, nbits = 4);
CREATE FUNCTION dt_answers() RETURNS text LANGUAGE plpgsql AS $$
DECLARE ra text; rb text;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('gknn.device', 'cpu', true);
  PERFORM set_config('gknn.ivfpq_exact', 'on', true);
  SELECT string_agg(id::text, ',') INTO ra FROM (SELECT id FROM dt ORDER BY h <-> '[1,2,0.5,1,2,0.5]' LIMIT 30) x;
  SELECT string_agg(id::text, ',') INTO rb FROM (SELECT id FROM dt ORDER BY b <~> B'101100111000' LIMIT 30) x;
  RETURN ra || ' / ' || rb;
END $$;
CREATE TABLE dt_got (a text);
SELECT length(dt_answers()) > 0;
INSERT INTO dt SELECT i, ARRAY(SELECT ((i * 5 + j) % 11) / 4.0 FROM generate_series(1, 6) j)::halfvec,
                      ((i * 91) % 4096)::bit(12) FROM generate_series(601, 700) i;
DELETE FROM dt WHERE id % 9 = 4;
VACUUM dt;
SET client_min_messages = debug1;
INSERT INTO dt_got SELECT dt_answers();
SET client_min_messages = notice;
\c
SELECT dt_answers() = a AS same_answers FROM dt_got;

DROP TABLE dl, dq, dl_got, dp, dt, dt_got;
DROP FUNCTION dt_answers();
DROP FUNCTION dl_answers(), dl_keep(int), dl_differences(int);
