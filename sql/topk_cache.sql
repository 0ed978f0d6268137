-- GpuTopK's table cache lives in the GPU service (gknn.topk_cache_mb, a
-- server setting). Without the service (expected/topk_cache.out) there is
-- none: queries scan the heap and gknn_cache_table says why. With it
-- (topk_cache_1.out, gknn.service = cpu) an entry is filled by the first
-- query of its columns (or gknn_cache_table), hit by the next ones (and by
-- queries of fewer of its columns), its
-- changed pages checked and read from the heap; every answer equals
-- PostgreSQL's.
LOAD 'gknn';  -- its planner hook (a server may not preload it)
SELECT state <> 'not running' AS service FROM gknn_service_status();
ALTER SYSTEM SET gknn.topk_cache_mb = 64;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SHOW gknn.topk_cache_mb;
SET gknn.topk_min_rows = 0;
SET max_parallel_workers_per_gather = 0;
SET enable_sort = off;
CREATE TABLE tcache (id int, a int4, b float8, s text, e vector(2));
INSERT INTO tcache SELECT i, (i * 7) % 1000, CASE WHEN i % 13 = 0 THEN NULL ELSE (i % 97) / 3.0 END, 'x' || i,
  ARRAY[i % 5, i % 3]
FROM generate_series(1, 20000) i;
VACUUM ANALYZE tcache;
-- what the cache did, and whether the answer equals PostgreSQL's own plan
CREATE FUNCTION tk_cache(q text)
RETURNS TABLE (cache text, cached_rows bigint, heap_rows bigint, checked bigint, same bool)
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
    (p->>'Cache Pages Checked')::bigint, mine IS NOT DISTINCT FROM theirs;
END $$;
CREATE VIEW entries AS SELECT relation::regclass, columns,
  (device = 'cpu') = (SELECT device = 'cpu' FROM gknn_service_status()) AS on_service_device, cached_rows, cached_pages > 0 AS pages,
  hits, state FROM gknn_topk_cache() ORDER BY relation::regclass::text, columns;
EXPLAIN (COSTS OFF) SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5;
-- the first query fills the entry of (id, a, b); the next ones hit it
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- the same columns named in another order: the same entry
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE b > 10 ORDER BY a DESC, id LIMIT 5');
-- fewer columns (id, b): the entry holding them all serves (no entry of their own)
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY b, id LIMIT 4');
SELECT * FROM entries;
-- gknn_cache_table fills an entry ahead of use; then the query hits it
SELECT gknn_cache_table('tcache', ARRAY['a', 'id']);
SELECT gknn_cache_table('tcache', ARRAY['id', 'a']) AS again;
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY a, id LIMIT 7');
SELECT gknn_cache_table('tcache', ARRAY['e', 'id']);
SELECT * FROM tk_cache('SELECT id FROM tcache ORDER BY e <-> ''[1,2]'', id LIMIT 6');
SELECT * FROM entries;
-- what it refuses
\set VERBOSITY terse
SELECT gknn_cache_table('tcache', ARRAY['nope']);
SELECT gknn_cache_table('tcache', ARRAY['s']);
SELECT gknn_cache_table('tcache', ARRAY['a', 'a']);
SELECT gknn_cache_table('tcache', ARRAY[]::text[]);
SELECT gknn_cache_table('entries', ARRAY['hits']);
\set VERBOSITY default
-- an update, a delete, an insert: the changed pages' bits are clear, they
-- are checked, found changed and read from the heap with their segment
UPDATE tcache SET b = 1000 WHERE id = 77;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
DELETE FROM tcache WHERE id IN (97, 194);
INSERT INTO tcache VALUES (-1, 500, 999, 'new');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- in a transaction: its own uncommitted changes, then a rollback
BEGIN;
UPDATE tcache SET b = 2000 WHERE id = 500;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
ROLLBACK;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- VACUUM sets bits again: the map page's LSN moved, so the next query
-- checks every kept page under it; the one after trusts the map again
VACUUM tcache;
SELECT cache, checked > 0 AS checked, same FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 10 ORDER BY b DESC NULLS LAST, id LIMIT 5');
-- TRUNCATE (a new relfilenode) and new rows: filled again
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
-- a budget too small for the table: ranked from the heap, nothing kept
-- (two keys: a shape a GPU service's kernels take too)
ALTER SYSTEM SET gknn.topk_cache_mb = 1;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
INSERT INTO tcache SELECT i, i % 10, i / 7.0, 'y' FROM generate_series(1, 60000) i;
VACUUM tcache;
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b, id LIMIT 5');
-- the reset drops the entries (as the budget's 0 does)
SELECT gknn_topk_cache_reset() >= 0 AS reset;
SELECT count(*) FROM gknn_topk_cache();
ALTER SYSTEM RESET gknn.topk_cache_mb;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT * FROM tk_cache('SELECT id FROM tcache WHERE a > 3 ORDER BY b DESC, id LIMIT 5');
DROP VIEW entries;
DROP FUNCTION tk_cache(text);
DROP TABLE tcache, tcache_u;
