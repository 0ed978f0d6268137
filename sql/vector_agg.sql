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
