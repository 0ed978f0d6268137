-- sparsevec in pgvector's binary format: send/recv, COPY round trips, every
-- check of binary input (a COPY file is input like any other), and the
-- on-disk layout. Files go into the server's data directory, as in
-- copy_binary.sql.
SELECT current_setting('data_directory') || '/gknn_regress_sparsevec' AS f \gset

-- send: int32 dim, int32 nnz, int32 unused, int32 indices (0-based), float4
-- values, all big-endian
SELECT sparsevec_send('{1:1.5,3:2}/5');
SELECT sparsevec_send('{}/1000000000');

-- The stored datum is pgvector's too (dim, nnz, unused, indices, values in
-- the server's byte order; little-endian here)
CREATE CAST (sparsevec AS bytea) WITHOUT FUNCTION;
SELECT '{1:1.5,3:2}/5'::sparsevec::bytea AS datum, pg_column_size('{1:1.5,3:2}/5'::sparsevec) AS bytes,
       pg_column_size('{}/7'::sparsevec) AS empty_bytes;
DROP CAST (sparsevec AS bytea);

-- COPY round trips, binary and text, typmod checked on the way in
CREATE TABLE svc_src (id int, v sparsevec);
INSERT INTO svc_src VALUES (1, '{1:1,2:2,3:3}/3'), (2, '{}/3'), (3, NULL), (4, '{1:-0.1,1000000000:3.4028235e38}/1000000000'),
  (5, '{2:1e-30}/2');
\set ECHO none
SELECT format('COPY svc_src TO %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
CREATE TABLE svc_dst (id int, v sparsevec);
\set ECHO none
SELECT format('COPY svc_dst FROM %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
SELECT d.id, d.v, d.v IS NOT DISTINCT FROM s.v AS same FROM svc_dst d JOIN svc_src s USING (id) ORDER BY d.id;
CREATE TABLE svc_typed (id int, v sparsevec(3));
\set ECHO none
SELECT format('COPY svc_typed FROM %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
\set ECHO none
SELECT format('COPY svc_src TO %L', :'f' || '.txt') \gexec
\set ECHO all
TRUNCATE svc_dst;
\set ECHO none
SELECT format('COPY svc_dst FROM %L', :'f' || '.txt') \gexec
\set ECHO all
SELECT count(*) AS same_rows FROM svc_dst d JOIN svc_src s ON d.id = s.id AND d.v IS NOT DISTINCT FROM s.v;

-- recv(payload): the value binary COPY reads from one field holding these
-- bytes (written as a bytea field, whose binary form is the bytes
-- themselves), or "SQLSTATE: message".
CREATE FUNCTION pg_temp.recv(payload text, typmod int DEFAULT -1) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  path text := current_setting('data_directory') || '/gknn_regress_sparsevec_recv.bin';
  result text;
  state text;
  msg text;
BEGIN
  EXECUTE format('COPY (SELECT decode(%L, ''hex'')) TO %L (FORMAT binary)', replace(payload, ' ', ''), path);
  CREATE TEMP TABLE recv_t (v sparsevec);
  IF typmod > 0 THEN
    EXECUTE format('ALTER TABLE recv_t ALTER v TYPE sparsevec(%s)', typmod);
  END IF;
  EXECUTE format('COPY recv_t FROM %L (FORMAT binary)', path);
  SELECT v::text INTO result FROM recv_t;
  DROP TABLE recv_t;
  RETURN result;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
  RETURN state || ': ' || msg;
END $$;

--         dim      nnz      unused   indices           values
SELECT what, payload, pg_temp.recv(payload) AS result
FROM (VALUES ('valid', '00000005 00000002 00000000 00000000 00000002 3fc00000 40000000'),
             ('valid, empty', '00000001 00000000 00000000'),
             ('dim 0', '00000000 00000000 00000000'),
             ('dim -1', 'ffffffff 00000000 00000000'),
             ('dim 10^9 + 1', '3b9aca01 00000000 00000000'),
             ('nnz -1', '00000005 ffffffff 00000000'),
             ('nnz 16001', '000f4240 00003e81 00000000'),
             ('nnz > dim', '00000001 00000002 00000000 00000000 00000001 3f800000 3f800000'),
             ('unused 7', '00000005 00000000 00000007'),
             ('index -1', '00000005 00000001 00000000 ffffffff 3f800000'),
             ('index = dim', '00000005 00000001 00000000 00000005 3f800000'),
             ('descending', '00000005 00000002 00000000 00000002 00000000 3f800000 3f800000'),
             ('duplicate', '00000005 00000002 00000000 00000001 00000001 3f800000 3f800000'),
             ('zero value', '00000005 00000001 00000000 00000001 00000000'),
             ('negative zero', '00000005 00000001 00000000 00000001 80000000'),
             ('NaN', '00000005 00000001 00000000 00000001 7fc00000'),
             ('infinity', '00000005 00000001 00000000 00000001 ff800000'),
             ('nnz beyond the payload', '00000005 00000002 00000000 00000001 3f800000'),
             ('nnz 16000, no elements', '000f4240 00003e80 00000000'),
             ('truncated header', '00000005 0000'),
             ('bytes left over', '00000005 00000000 00000000 00000000')) t(what, payload);
SELECT pg_temp.recv('00000005 00000000 00000000', 5) AS typmod_5, pg_temp.recv('00000005 00000000 00000000', 4) AS typmod_4;

DROP TABLE svc_src, svc_dst, svc_typed;
