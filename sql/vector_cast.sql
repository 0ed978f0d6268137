-- Casts between arrays and vector.
SELECT ARRAY[1,2,3]::vector, ARRAY[1.5,2.5]::real[]::vector, ARRAY[1.25,2]::double precision[]::vector,
       ARRAY[1.5,2.75]::numeric[]::vector;
SELECT '{4,5}'::int[]::vector(2);
SELECT '[1,2,3]'::vector::real[];
SELECT ('[1,2,3]'::vector)::real[] = ARRAY[1,2,3]::real[] AS same;
-- Assignment casts into vector columns, implicit cast to real[]
CREATE TABLE cast_t (v vector(3));
INSERT INTO cast_t VALUES (ARRAY[1,2,3]), (ARRAY[1.5,2.5,3.5]::float8[]), ('{7,8,9}'::real[]), (ARRAY[1,2,3]::numeric[]);
SELECT v, array_length(v::real[], 1) FROM cast_t;
-- vector is implicitly a real[] where a real[] is expected
CREATE FUNCTION cast_sum(a real[]) RETURNS real LANGUAGE sql AS 'SELECT sum(x) FROM unnest(a) x';
SELECT cast_sum(v) FROM cast_t;
DROP FUNCTION cast_sum(real[]);
INSERT INTO cast_t VALUES (ARRAY[1,2]);
DROP TABLE cast_t;
-- Errors
SELECT '{{1,2},{3,4}}'::int[]::vector;
SELECT ARRAY[1,NULL,3]::vector;
SELECT '{}'::real[]::vector;
SELECT ARRAY['NaN']::real[]::vector;
SELECT ARRAY['Infinity']::float8[]::vector;
SELECT ARRAY[1e300]::float8[]::vector;
SELECT ARRAY['NaN']::numeric[]::vector;
SELECT ARRAY[1,2,3]::vector(2);
SELECT array_fill(1, ARRAY[16001])::vector;
-- Length coercion of vector itself
SELECT '[1,2]'::vector::vector(2);
SELECT '[1,2]'::vector::vector(3);
