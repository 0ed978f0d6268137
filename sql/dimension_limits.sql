-- No route makes a vector of 0, negative or more than 16000 dimensions, and
-- rows an older gknn could store with such dimensions give clean errors
-- everywhere (issue 16: they crashed the server in a gpu_ivfpq build).
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN coalesce(left(r, 40), 'NULL');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- Issue 16's reproduction: a clean ERROR, and the server is still up.
CREATE TABLE z (id int, v vector);
INSERT INTO z SELECT 1, vector_avg('{1}') UNION ALL SELECT 2, vector_avg(array_agg(n)) FROM generate_series(1, 16002) n;
CREATE INDEX ON z USING gpu_ivfpq (v vector_l2_ops);
SELECT 'server still up' AS alive, count(*) AS rows FROM z;
DROP TABLE z;

-- Every route to 0 dimensions (22000) and to more than 16000 (54000).
SELECT q AS expression, pg_temp.try('SELECT ' || q) AS result FROM (VALUES
  ($$'[]'::vector$$), ($$'[ ]'::vector$$), ($$ARRAY[]::int[]::vector$$), ($$ARRAY[]::real[]::vector$$),
  ($$ARRAY[]::float8[]::vector$$), ($$ARRAY[]::numeric[]::vector$$), ($$vector_avg('{1}')$$),
  ($$subvector('[1,2,3]'::vector, 1, 0)$$), ($$subvector('[1,2,3]'::vector, 4, 1)$$), ($$subvector('[1,2,3]'::vector, -1, 2)$$),
  ($$subvector('[1,2,3]'::vector, 2147483647, 2147483647)$$), ($$subvector('[1,2,3]'::vector, -2147483648, 2147483647)$$),
  ($$vector_in('[]', 0, -1)$$), ($$'[1]'::vector(0)$$), ($$'[1]'::vector(-1)$$),
  ($$array_fill(1, ARRAY[16001])::vector$$), ($$array_fill(1::real, ARRAY[16001])::vector$$),
  ($$array_fill(1::float8, ARRAY[16001])::vector$$), ($$array_fill(1::numeric, ARRAY[16001])::vector$$),
  ($$('[' || repeat('1,', 16000) || '1]')::vector$$),
  ($$vector_avg(ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)))$$),
  ($$vector_dims(subvector(array_fill(1, ARRAY[16000])::vector, 1, 16001))$$),
  ($$array_fill(1, ARRAY[16000])::vector(16001)$$), ($$'[1]'::vector(16001)$$),
  ($$vector_dims(array_fill(1, ARRAY[16000])::vector)$$),
  ($$vector_dims(subvector('[1,2,3]'::vector, -1, 3))$$)
) t(q);

-- Rows as an older gknn stored them: its avg made 0 and 16001 dimensions,
-- and a dim that wrapped negative (int16) for more than 32767. A superuser's
-- binary-coercible cast writes such datums.
CREATE CAST (bytea AS vector) WITHOUT FUNCTION;
CREATE FUNCTION pg_temp.legacy(dim int, n int) RETURNS vector LANGUAGE sql AS $$
  SELECT (set_byte(set_byte('\x00000000'::bytea, 0, dim & 255), 1, (dim >> 8) & 255)
          || decode(repeat('0000803f', n), 'hex'))::vector $$;
SELECT vector_dims(pg_temp.legacy(0, 0)) AS zero, vector_dims(pg_temp.legacy(16001, 16001)) AS over,
       vector_dims(pg_temp.legacy(40000 - 65536, 40000)) AS wrapped;
CREATE TABLE z (id int, v vector);
INSERT INTO z VALUES (1, pg_temp.legacy(0, 0)), (2, pg_temp.legacy(16001, 16001));
-- The crash: the 0-dimension row left the dimension "unknown" and the sample
-- was sized for it; now the first row's dimension is checked first.
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
TRUNCATE z;
INSERT INTO z VALUES (2, pg_temp.legacy(16001, 16001)), (1, pg_temp.legacy(0, 0));
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
TRUNCATE z;
INSERT INTO z VALUES (1, pg_temp.legacy(0, 0)), (2, '[1,2,3,4]'), (3, '[5,6,7,8]');
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
TRUNCATE z;
INSERT INTO z VALUES (1, '[1,2,3,4]'), (2, pg_temp.legacy(0, 0));
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
TRUNCATE z;
INSERT INTO z VALUES (1, pg_temp.legacy(65535 - 65536, 65535));
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
-- An index built on an empty table takes its dimension from the first insert.
TRUNCATE z;
CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops);
INSERT INTO z VALUES (1, pg_temp.legacy(0, 0));
INSERT INTO z VALUES (2, pg_temp.legacy(16001, 16001));
INSERT INTO z VALUES (3, pg_temp.legacy(40000 - 65536, 40000));
SELECT dims, entries, pending FROM gknn_ivfpq_info('z_idx');
INSERT INTO z VALUES (4, '[1,2,3,4]');
SELECT dims, entries, pending FROM gknn_ivfpq_info('z_idx');
SELECT 'server still up' AS alive;

-- Functions given such datums: the type's errors, never a vector of an
-- invalid dimension.
SELECT q AS expression, pg_temp.try('SELECT ' || q) AS result FROM (VALUES
  ($$pg_temp.legacy(0, 0) + pg_temp.legacy(0, 0)$$),
  ($$pg_temp.legacy(16001, 16001) - pg_temp.legacy(16001, 16001)$$),
  ($$pg_temp.legacy(-2, 65534) * pg_temp.legacy(-2, 65534)$$),
  ($$l2_normalize(pg_temp.legacy(-1, 65535))$$),
  ($$l2_normalize(pg_temp.legacy(0, 0))$$),
  ($$subvector(pg_temp.legacy(16001, 16001), 1, 16001)$$),
  ($$subvector(pg_temp.legacy(16001, 16001), 2, 16000) = array_fill(1, ARRAY[16000])::vector$$),
  ($$vector_accum('{0}', pg_temp.legacy(0, 0))$$),
  ($$vector_accum('{0}', pg_temp.legacy(-1, 65535))$$),
  ($$avg(v) FROM (VALUES (pg_temp.legacy(16001, 16001))) t(v)$$),
  ($$sum(v) FROM (VALUES (pg_temp.legacy(0, 0)), (pg_temp.legacy(0, 0))) t(v)$$),
  ($$pg_temp.legacy(0, 0)::vector(3)$$),
  ($$vector_to_float4(pg_temp.legacy(-25536, 40000), -1, false)$$),
  ($$pg_temp.legacy(-25536, 40000)::text$$),
  ($$pg_temp.legacy(0, 0) <-> pg_temp.legacy(0, 0)$$),
  ($$pg_temp.legacy(0, 0) < '[1]'$$)
) t(q);

-- GpuTopK: a query vector of an invalid dimension is refused, not copied.
CREATE TABLE zq AS SELECT i AS id, ARRAY[i, 2 * i]::vector AS v FROM generate_series(1, 100) i;
ANALYZE zq;
SET gknn.topk_min_rows = 0;
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT id FROM zq ORDER BY v <-> (SELECT pg_temp.legacy(-1, 65535)) LIMIT 3;
SELECT id FROM zq ORDER BY v <-> (SELECT pg_temp.legacy(-1, 65535)) LIMIT 3;
SELECT id FROM zq ORDER BY v <-> (SELECT pg_temp.legacy(0, 0)) LIMIT 3;
SELECT id FROM zq ORDER BY v <-> (SELECT '[1,1]'::vector) LIMIT 3;
RESET gknn.topk_min_rows;
RESET enable_sort;

-- A failed CREATE INDEX CONCURRENTLY leaves an invalid index with no pages.
CREATE TABLE zc (id int, v vector(4));
INSERT INTO zc SELECT i, ARRAY[i, i, i, i] FROM generate_series(1, 50) i;
CREATE INDEX CONCURRENTLY zc_idx ON zc USING gpu_ivfpq (v) WITH (m = 3);
SELECT gknn_ivfpq_info('zc_idx');
DROP TABLE z, zq, zc;
DROP CAST (bytea AS vector);
