-- COPY round trips in pgvector's binary format (and text).
CREATE TABLE copy_src (id int, v vector);
INSERT INTO copy_src VALUES (1, '[1,2,3]'), (2, '[-0.1,1e-30,3.4028235e38]'), (3, NULL), (4, '[0]');
COPY copy_src TO '/tmp/gknn_regress_copy.bin' (FORMAT binary);
CREATE TABLE copy_dst (id int, v vector);
COPY copy_dst FROM '/tmp/gknn_regress_copy.bin' (FORMAT binary);
SELECT d.id, d.v, d.v IS NOT DISTINCT FROM s.v AS same FROM copy_dst d JOIN copy_src s USING (id) ORDER BY d.id;
-- vector_send / vector_recv directly: int16 dim, int16 unused, big-endian float4s
SELECT vector_send('[1,2,3]');
-- The binary file rejects a typmod mismatch on the way in
CREATE TABLE copy_typed (id int, v vector(3));
COPY copy_typed FROM '/tmp/gknn_regress_copy.bin' (FORMAT binary);
COPY copy_src TO '/tmp/gknn_regress_copy.txt';
TRUNCATE copy_dst;
COPY copy_dst FROM '/tmp/gknn_regress_copy.txt';
SELECT count(*) AS same_rows FROM copy_dst d JOIN copy_src s ON d.id = s.id AND d.v IS NOT DISTINCT FROM s.v;
DROP TABLE copy_src, copy_dst, copy_typed;
