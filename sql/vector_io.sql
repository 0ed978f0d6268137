-- Text input and output of vector, typmods and vector(n) columns.
SELECT '[1,2,3]'::vector;
SELECT '[-1.5, 2.25 ,3e2]'::vector;
SELECT ' [ 1 , 2 ] '::vector;
SELECT E'[1,\t2,\n3]'::vector;
-- Shortest text that reads back to the same float4
SELECT '[0.1,0.2,0.3,1e-7,3.4028235e38,-0,1.17549435e-38]'::vector;
SELECT '[1.0000001, 123456789]'::vector;
SELECT '[0.1]'::vector::text::vector = '[0.1]'::vector AS round_trips;
SELECT vector_dims(('[' || repeat('1,', 15999) || '1]')::vector);
-- Elements as strtof reads them: signs, hex, points at either end, subnormals, underflow to 0
SELECT '[+1.5, 0x1p3, -0X10, -.5e-3, 5., 00012.5e+3, 1e-45, -1e-50]'::vector;

-- Errors, as pgvector words them
SELECT '[1,2'::vector;
SELECT '[]'::vector;
SELECT '[ ]'::vector;
SELECT '[1,,2]'::vector;
SELECT '[a]'::vector;
SELECT '[1e999]'::vector;
SELECT '[-1e999]'::vector;
SELECT '[NaN]'::vector;
SELECT '[Infinity]'::vector;
SELECT '[-Infinity]'::vector;
SELECT '1,2'::vector;
SELECT '[1,2] x'::vector;
SELECT '[1 2]'::vector;
SELECT ''::vector;
SELECT ('[' || repeat('1,', 16000) || '1]')::vector;

-- Typmods
SELECT '[1,2,3]'::vector(3);
SELECT '[1,2]'::vector(3);
SELECT '[1,2,3]'::vector(0);
SELECT '[1,2,3]'::vector(16001);
SELECT '[1,2,3]'::vector(3, 2);

CREATE TABLE io_t (id int, v vector(3));
INSERT INTO io_t VALUES (1, '[1,2,3]'), (2, NULL);
INSERT INTO io_t VALUES (3, '[1,2]');
INSERT INTO io_t VALUES (3, '[1,2,3,4]'::vector);
INSERT INTO io_t SELECT 4, v FROM io_t WHERE id = 1;
UPDATE io_t SET v = '[1]' WHERE id = 1;
SELECT id, v FROM io_t ORDER BY id;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'io_t'::regclass AND attname = 'v';
CREATE TABLE io_bad (v vector(0));
CREATE TABLE io_bad (v vector(16001));
DROP TABLE io_t;
