-- Binary format: vector_send / vector_recv speak pgvector's wire format
-- (int16 dim, int16 unused = 0, dim big-endian float4s) and the value has
-- pgvector's storage size and type attributes. vector_recv is reached through
-- COPY ... FROM PROGRAM (FORMAT binary) with hand-made input; those tests are
-- skipped for a role that may not run server programs.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(33);

-- vector_send -------------------------------------------------------------------------
SELECT is(vector_send('[1,2,3]'), '\x000300003f8000004000000040400000'::bytea,
          'vector_send([1,2,3]) = 0003 0000 3f800000 40000000 40400000');
SELECT is(vector_send('[-0,1e-45,-3.4028235e38,0.1]'),
          '\x000400008000000000000001ff7fffff3dcccccd'::bytea,
          'vector_send keeps -0, denormals, extremes and 0.1 bit for bit');
SELECT is(vector_send('[-1.5]'), '\x00010000bfc00000'::bytea, 'vector_send of one element');

-- Random vectors (dims 1..64, values of every magnitude and sign) against a
-- reference built from int2send and float4send.
SELECT setseed(0.4040) AS seeded \gset
CREATE TEMP TABLE vecs AS
SELECT i, array_agg(x ORDER BY j) AS xs, array_agg(x ORDER BY j)::vector AS v
FROM (SELECT i, CASE WHEN i <= 64 THEN i ELSE 1 + floor(random() * 64)::int END AS dim
      FROM generate_series(1, 300) i) d,
     LATERAL (SELECT j, ((random() * 2 - 1) * 10 ^ floor(random() * 40 - 20))::real AS x
              FROM generate_series(1, d.dim) j) e
GROUP BY i;
INSERT INTO vecs (i, xs, v) VALUES
  (1001, '{-0}', '[-0]'), (1002, '{0}', '[0]'), (1003, '{1e-45,-1e-45}', '[1e-45,-1e-45]'),
  (1004, '{3.4028235e38,-3.4028235e38,1.1754944e-38}', '[3.4028235e38,-3.4028235e38,1.1754944e-38]');
SELECT is((SELECT count(*)::int FROM vecs), 304, '304 vectors to check');
SELECT is_empty($$SELECT i FROM vecs
                  WHERE vector_send(v) IS DISTINCT FROM
                        int2send(cardinality(xs)::int2) || int2send(0::int2) ||
                        (SELECT string_agg(float4send(x), ''::bytea ORDER BY o)
                         FROM unnest(xs) WITH ORDINALITY u(x, o))$$,
                'vector_send = int2send(dim) || int2send(0) || float4send(x1) || ... for every vector');
SELECT is_empty('SELECT i FROM vecs WHERE pg_column_size(xs::vector) <> 8 + 4 * cardinality(xs)',
                'pg_column_size(v) = 4 + 2 + 2 + 4 * dim for every vector (as a fresh value)');

-- Storage ---------------------------------------------------------------------------------
SELECT is(pg_column_size('[1,2,3]'::vector), 20, 'pg_column_size([1,2,3]) = 4+2+2+12 = 20');
SELECT is(pg_column_size('[1,2,3]'::vector(3)), 20, 'pg_column_size([1,2,3]::vector(3)) = 20');
SELECT is(pg_column_size(array_fill(1, ARRAY[16000])::vector), 64008,
          'pg_column_size of a 16000-dimension vector = 8 + 64000');
SELECT results_eq($$SELECT typlen::int, typbyval, typalign::text, typstorage::text
                    FROM pg_type WHERE oid = 'vector'::regtype$$,
                  $$VALUES (-1, false, 'i', 'e')$$,
                  'vector is varlena, int-aligned, STORAGE external (as pgvector)');
CREATE TEMP TABLE stored (id int, v vector);
INSERT INTO stored VALUES (1, '[1,2,3]'), (2, array_fill(0.5, ARRAY[2000])::vector);
SELECT is((SELECT pg_column_size(v) FROM stored WHERE id = 1), 17,
          'a small vector is stored inline with a 1-byte header (1+2+2+12)');
SELECT is((SELECT vector_send(v) FROM stored WHERE id = 1), '\x000300003f8000004000000040400000'::bytea,
          'vector_send of a stored (short-header) vector');
-- 8008 bytes do not fit in a heap tuple: TOAST moves the value out of line,
-- and STORAGE external keeps it uncompressed (so its TOAST size is the
-- 8004 bytes after the 4-byte header, although it would compress well).
SELECT is((SELECT pg_column_size(v) FROM stored WHERE id = 2), 8004,
          'a 2000-dimension vector is stored out of line uncompressed (STORAGE external)');
SELECT is((SELECT vector_send(v) FROM stored WHERE id = 2),
          '\x07d00000'::bytea || (SELECT string_agg('\x3f000000'::bytea, ''::bytea) FROM generate_series(1, 2000)),
          'vector_send of a stored 2000-dimension vector');

-- vector_recv through COPY FROM PROGRAM (FORMAT binary) ------------------------------------
-- A binary COPY stream of one-column rows from the fields' bytes, and the
-- COPY statement that reads it through `base64 -d` on the server.
CREATE FUNCTION pg_temp.copy_stream(fields bytea[]) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT '\x5047434f50590aff0d0a00'::bytea || '\x0000000000000000'::bytea ||
         coalesce((SELECT string_agg('\x0001'::bytea || int4send(length(f)) || f, ''::bytea ORDER BY o)
                   FROM unnest(fields) WITH ORDINALITY u(f, o)), ''::bytea) || '\xffff'::bytea
$$;
CREATE FUNCTION pg_temp.copy_from(tbl text, fields bytea[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT format('COPY %s FROM PROGRAM %L WITH (FORMAT binary)', tbl,
                'echo ' || replace(encode(pg_temp.copy_stream(fields), 'base64'), E'\n', '') || ' | base64 -d')
$$;
CREATE TEMP TABLE recv_any (v vector);
CREATE TEMP TABLE recv_3 (v vector(3));
CREATE TEMP TABLE recv_rt (v vector);

SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       OR pg_has_role('pg_execute_server_program', 'member') AS can_copy_program \gset
\if :can_copy_program
SELECT lives_ok(pg_temp.copy_from('recv_any', ARRAY['\x000300003f8000004000000040400000'::bytea]),
                'COPY binary reads 0003 0000 3f800000 40000000 40400000');
SELECT is((SELECT v::text FROM recv_any), '[1,2,3]', 'vector_recv decodes [1,2,3]');
SELECT lives_ok(pg_temp.copy_from('recv_rt', (SELECT array_agg(vector_send(v) ORDER BY i) FROM vecs)),
                'COPY binary reads the vector_send output of every test vector');
SELECT is((SELECT count(*)::int FROM recv_rt), 304, 'every vector was read back');
SELECT is((SELECT array_agg(vector_send(v) ORDER BY vector_send(v)) FROM recv_rt),
          (SELECT array_agg(vector_send(v) ORDER BY vector_send(v)) FROM vecs),
          'vector_recv(vector_send(v)) reproduces every vector bit for bit');
SELECT lives_ok(pg_temp.copy_from('recv_3', ARRAY['\x000300003f8000004000000040400000'::bytea]),
                'COPY binary into a vector(3) column');
SELECT throws_ok(pg_temp.copy_from('recv_3', ARRAY['\x000200003f80000040000000'::bytea]),
                 '22000', 'expected 3 dimensions, not 2', 'vector_recv checks the typmod');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000200013f80000040000000'::bytea]),
                 '22000', 'expected unused to be 0, not 1', 'vector_recv rejects unused <> 0 (as pgvector)');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x0002ffff3f80000040000000'::bytea]),
                 '22000', 'expected unused to be 0, not 65535', 'vector_recv reads unused unsigned (as pgvector)');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x00000000'::bytea]),
                 '22000', 'vector must have at least 1 dimension', 'vector_recv rejects dim 0');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\xffff0000'::bytea]),
                 '54000', 'vector cannot have more than 16000 dimensions',
                 'vector_recv reads dim unsigned: 0xffff is 65535 dimensions (as pgvector)');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x3e810000'::bytea]),
                 '54000', 'vector cannot have more than 16000 dimensions', 'vector_recv rejects dim 16001');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000100007fc00000'::bytea]),
                 '22000', 'NaN not allowed in vector', 'vector_recv rejects NaN');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x00010000ff800000'::bytea]),
                 '22000', 'infinite value not allowed in vector', 'vector_recv rejects -Infinity');
-- Elements are checked in order, whatever the read does at once: the first
-- bad one is what is reported (an element before a short field, an
-- infinity before a NaN).
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000300003f8000007fc00000'::bytea]),
                 '22000', 'NaN not allowed in vector', 'vector_recv reports a NaN before the field ends short');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000200007f8000007fc00000'::bytea]),
                 '22000', 'infinite value not allowed in vector', 'vector_recv reports the first bad element');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000100003f80000000'::bytea]),
                 '22P03', NULL, 'trailing bytes after the elements are rejected');
SELECT throws_ok(pg_temp.copy_from('recv_any', ARRAY['\x000200003f800000'::bytea]),
                 '08P01', NULL, 'a field shorter than its dim says is rejected');
SELECT is((SELECT count(*)::int FROM recv_any), 1, 'the failed COPYs added no rows');
\else
SELECT skip('COPY FROM PROGRAM needs superuser or pg_execute_server_program', 18);
\endif

SELECT * FROM finish();
ROLLBACK;
