-- avg(vector) and sum(vector).
SELECT avg(v), sum(v) FROM (VALUES ('[1,2,3]'::vector), ('[3,4,5]'), (NULL)) t(v);
SELECT avg(v), sum(v) FROM (VALUES (NULL::vector)) t(v);
SELECT avg(v) IS NULL AS avg_null, sum(v) IS NULL AS sum_null FROM (SELECT '[1]'::vector WHERE false) t(v);
SELECT avg(v) FROM (VALUES ('[1e38]'::vector), ('[1e38]'), ('[1e38]')) t(v);
SELECT avg(v) FROM (VALUES ('[1,2]'::vector), ('[1,2,3]')) t(v);
SELECT sum(v) FROM (VALUES ('[1,2]'::vector), ('[1,2,3]')) t(v);
SELECT sum(v) FROM (VALUES ('[3e38]'::vector), ('[3e38]')) t(v);
SELECT avg(v) FROM (VALUES ('[3e38]'::vector), ('[3e38]')) t(v);
-- Grouped, and parallel (partial aggregates combined across workers). Small
-- integers keep every float32 partial sum exact, so the result does not
-- depend on how rows are split among workers.
CREATE TABLE agg_t (g int, v vector(3));
INSERT INTO agg_t SELECT i % 3, ARRAY[i % 100, (i % 7) * 2, -(i % 50)]::vector FROM generate_series(1, 30000) i;
ANALYZE agg_t;
SELECT g, avg(v), sum(v) FROM agg_t GROUP BY g ORDER BY g;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT avg(v), sum(v) FROM agg_t;
SELECT avg(v), sum(v) FROM agg_t;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE agg_t;
-- The state functions are callable with any float8[]: states pgvector
-- rejects are rejected with its messages and SQLSTATEs, counts no aggregate
-- makes (negative, fractional, infinite, NaN) too, and no state gives a
-- vector of 0 or more than 16000 dimensions.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN coalesce(left(r, 40), 'NULL');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT vector_avg('{3,3,6,9}'), vector_avg('{0}') IS NULL AS no_rows, vector_avg('{0,7,7}') IS NULL AS zero_count;
SELECT vector_accum('{0}', '[4,5]'), vector_accum('{0,0,0}', '[4,5]'), vector_accum('{2,1,1}', '[4,5]');
SELECT vector_combine('{0}', '{0}'), vector_combine('{0}', '{2,3,4}'), vector_combine('{2,3,4}', '{0}'),
       vector_combine('{1,1,1}', '{2,3,4}');
SELECT q AS call, pg_temp.try(q) AS result FROM (VALUES
  ($$SELECT vector_avg('{1}')$$),
  ($$SELECT vector_avg('{4}')$$),
  ($$SELECT vector_avg(ARRAY(SELECT 1::float8 FROM generate_series(0, 16000)))$$),
  ($$SELECT vector_avg(ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)))$$),
  ($$SELECT vector_avg(array_agg(n)) FROM generate_series(1, 16002) n$$),
  ($$SELECT vector_avg(ARRAY(SELECT 1::float8 FROM generate_series(0, 40000)))$$),
  ($$SELECT vector_avg('{}')$$),
  ($$SELECT vector_avg('{{3,3,6}}')$$),
  ($$SELECT vector_avg('{NULL,3,6}')$$),
  ($$SELECT vector_avg('{3,NULL}')$$),
  ($$SELECT vector_avg('{-1,2}')$$),
  ($$SELECT vector_avg('{0.5,2}')$$),
  ($$SELECT vector_avg('{Infinity,2}')$$),
  ($$SELECT vector_avg('{NaN,2}')$$),
  ($$SELECT vector_avg('{1,NaN}')$$),
  ($$SELECT vector_avg('{1,Infinity}')$$),
  ($$SELECT vector_avg('{1,1e300}')$$),
  ($$SELECT vector_accum('{0,0}', '[4,5]')$$),
  ($$SELECT vector_accum('{1,2,3,4}', '[4,5]')$$),
  ($$SELECT vector_accum('{}', '[4,5]')$$),
  ($$SELECT vector_accum('{{0}}', '[4,5]')$$),
  ($$SELECT vector_accum('{NULL}', '[4,5]')$$),
  ($$SELECT vector_accum('{-2}', '[4,5]')$$),
  ($$SELECT vector_accum('{1,Infinity,0}', '[1,1]')$$),
  ($$SELECT vector_accum(vector_accum('{0}', '[3e38]'), '[3e38]')$$),
  ($$SELECT vector_combine('{1,2}', '{1,2,3}')$$),
  ($$SELECT vector_combine('{}', '{1,2}')$$),
  ($$SELECT vector_combine('{1,2}', '{}')$$),
  ($$SELECT vector_combine('{{1,2}}', '{1,2}')$$),
  ($$SELECT vector_combine('{1,NULL}', '{1,2}')$$),
  ($$SELECT vector_combine('{1,2}', '{0.25,2}')$$),
  ($$SELECT vector_combine('{1,1.7e308}', '{1,1.7e308}')$$),
  ($$SELECT vector_combine('{0}', ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)))$$),
  ($$SELECT vector_combine(ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)), '{0}')$$),
  ($$SELECT vector_combine(ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)),
                           ARRAY(SELECT 1::float8 FROM generate_series(0, 16001)))$$),
  ($$SELECT vector_avg(vector_combine('{0}', '{0}'))$$)
) t(q);
