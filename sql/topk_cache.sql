-- GpuTopK's table cache: built from the all-visible pages, hit while they
-- are unchanged, rebuilt after a change; every answer equals PostgreSQL's.
-- The cache is the backend's own, in host memory, ranked on the backend's
-- CPU (GpuTopK's GPU work is the GPU service's, which keeps no cache yet).
LOAD 'gknn';  -- its planner hook (a server may not preload it)
SET gknn.topk_min_rows = 0;
SET max_parallel_workers_per_gather = 0;
SET enable_sort = off;
SET gknn.topk_cache_mb = 64;
CREATE TABLE tcache (id int, a int4, b float8, s text);
INSERT INTO tcache SELECT i, (i * 7) % 1000, CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 97) / 3.0 END, 'x' || i
FROM generate_series(1, 20000) i;
VACUUM ANALYZE tcache;
-- what the cache did, and whether the answer equals PostgreSQL's own plan
CREATE FUNCTION tk_cache(q text) RETURNS TABLE (cache text, cached_rows bigint, heap_rows bigint, same bool)
LANGUAGE plpgsql AS $$
DECLARE p jsonb; mine int[]; theirs int[];
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO p;
  p := jsonb_path_query_first(p, 'strict $.**?(@."Custom Plan Provider" == "GpuTopK")');
  EXECUTE 'SELECT array_agg(id) FROM (' || q || ') x' INTO mine;
  SET LOCAL gknn.enable_topk = off;
  EXECUTE 'SELECT array_agg(id) FROM (' || q || ') x' INTO theirs;
  SET LOCAL gknn.enable_topk = on;
  RETURN QUERY SELECT p->>'Table Cache', (p->>'Cached Rows')::bigint, (p->>'Rows Scanned')::bigint,
    mine IS NOT DISTINCT FROM theirs;
END $$;
EXPLAIN (COSTS OFF) SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT relation::regclass, columns, device = 'cpu' AS device,
  cached_rows, cached_pages > 0 AS pages FROM gknn_topk_cache();
-- other columns: an entry of their own
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY a, id LIMIT 7');
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY a, id LIMIT 7');
SELECT count(*) FROM gknn_topk_cache();
-- an update, a delete, an insert: the changed pages drop the entry; the
-- rebuild keeps the pages still all-visible and scans the others
UPDATE tcache SET b = 1000 WHERE id = 77;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
DELETE FROM tcache WHERE id IN (97, 194);
INSERT INTO tcache VALUES (-1, 500, 999, 'new');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- in a transaction: its own uncommitted changes, then a rollback
BEGIN;
UPDATE tcache SET b = 2000 WHERE id = 500;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
ROLLBACK;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- VACUUM changes only pages the entry does not have (they became
-- all-visible): still a hit, those pages scanned until a rebuild
VACUUM tcache;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- TRUNCATE (a new relfilenode) and new rows
TRUNCATE tcache;
INSERT INTO tcache SELECT i, i % 10, i / 7.0, 'y' FROM generate_series(1, 3000) i;
VACUUM tcache;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- not used: a qual PostgreSQL runs, SERIALIZABLE, an unlogged table
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE s LIKE ''y%'' ORDER BY b DESC NULLS LAST, id LIMIT 5');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC NULLS LAST, id LIMIT 5');
COMMIT;
CREATE UNLOGGED TABLE tcache_u AS SELECT * FROM tcache;
VACUUM tcache_u;
SELECT * FROM tk_cache('SELECT id FROM tcache_u ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- a cache too small for the table: ranked from the heap, nothing kept
SET gknn.topk_cache_mb = 1;
INSERT INTO tcache SELECT i, i % 10, i / 7.0, 'y' FROM generate_series(1, 60000) i;
VACUUM tcache;
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY a DESC, b, id LIMIT 5');
-- the cache's plan (CPU costs, workers allowed): serial GpuTopK over page
-- checks
SET gknn.topk_cache_mb = 64;
SET max_parallel_workers_per_gather = 2;
SET enable_sort = on;
SET gknn.device = cpu;
EXPLAIN (COSTS OFF) SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5;
RESET gknn.device;
SET enable_sort = off;
SET max_parallel_workers_per_gather = 0;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5');
-- reset drops the entries; turned off, they go at the next GpuTopK
SELECT gknn_topk_cache_reset() AS dropped;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5');
SELECT count(*) FROM gknn_topk_cache();
SET gknn.topk_cache_mb = 0;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5');
SELECT count(*) FROM gknn_topk_cache();
DROP FUNCTION tk_cache(text);
DROP TABLE tcache, tcache_u;
