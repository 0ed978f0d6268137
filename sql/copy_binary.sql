-- COPY round trips in pgvector's binary format (and text). Files go into the
-- server's data directory, which only the server's OS user writes, so other
-- clusters and earlier runs cannot interfere.
SELECT current_setting('data_directory') || '/gknn_regress_copy' AS f \gset
-- (the COPY statements are not echoed: they name the data directory)
CREATE TABLE copy_src (id int, v vector);
INSERT INTO copy_src VALUES (1, '[1,2,3]'), (2, '[-0.1,1e-30,3.4028235e38]'), (3, NULL), (4, '[0]');
\set ECHO none
SELECT format('COPY copy_src TO %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
CREATE TABLE copy_dst (id int, v vector);
\set ECHO none
SELECT format('COPY copy_dst FROM %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
SELECT d.id, d.v, d.v IS NOT DISTINCT FROM s.v AS same FROM copy_dst d JOIN copy_src s USING (id) ORDER BY d.id;
-- vector_send / vector_recv directly: int16 dim, int16 unused, big-endian float4s
SELECT vector_send('[1,2,3]');
-- The binary file rejects a typmod mismatch on the way in
CREATE TABLE copy_typed (id int, v vector(3));
\set ECHO none
SELECT format('COPY copy_typed FROM %L (FORMAT binary)', :'f' || '.bin') \gexec
\set ECHO all
\set ECHO none
SELECT format('COPY copy_src TO %L', :'f' || '.txt') \gexec
\set ECHO all
TRUNCATE copy_dst;
\set ECHO none
SELECT format('COPY copy_dst FROM %L', :'f' || '.txt') \gexec
\set ECHO all
SELECT count(*) AS same_rows FROM copy_dst d JOIN copy_src s ON d.id = s.id AND d.v IS NOT DISTINCT FROM s.v;
DROP TABLE copy_src, copy_dst, copy_typed;
