-- Privileges: settings that hold GPU or host memory beyond a query, or pick
-- the GPU, are the superuser's (an ordinary user could starve the cluster);
-- nothing runs as SECURITY DEFINER; a report on an index needs SELECT on its
-- table (42501); gknn.topk_cache_mb is the GPU service's budget (a server
-- setting); resetting the service's table cache is revoked from PUBLIC;
-- gknn_cache_table needs SELECT on the columns (and the service).
LOAD 'gknn';  -- its GUCs and planner hook (a server may not preload it)
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  IF q !~* '^SELECT' THEN
    EXECUTE q;
    RETURN 'ok';
  END IF;
  EXECUTE q INTO r;
  RETURN coalesce(left(r, 40), 'NULL');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

-- (gknn.service, postmaster, exists only where gknn is preloaded)
SELECT name, context FROM pg_settings WHERE name LIKE 'gknn.%' AND name <> 'gknn.service' ORDER BY name;
SELECT count(*) AS security_definer FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'gknn'
WHERE p.prosecdef;

CREATE ROLE regress_gknn_user;
CREATE TABLE priv_t (id int, v vector(2));
INSERT INTO priv_t SELECT i, ARRAY[i % 10, i % 7] FROM generate_series(1, 20000) i;
VACUUM ANALYZE priv_t;
CREATE INDEX priv_idx ON priv_t USING gpu_ivfpq (v) WITH (lists = 4, m = 1);

-- An ordinary user: the session's own choices stay settable, the
-- superuser's are not.
SET ROLE regress_gknn_user;
SELECT q AS statement, pg_temp.try(q) AS result FROM (VALUES
  ('SET gknn.gpu_id = 1'), ('SET gknn.topk_cache_mb = 64'),
  ('SET gknn.device = cpu'), ('SET gknn.ivfpq_probes = 5'), ('SET gknn.ivfpq_refine = 5'),
  ('SET gknn.max_k = 10'), ('SET gknn.enable_topk = off'), ('SET gknn.topk_min_rows = 5'),
  ('SET gknn.topk_gpu_setup_cost = 1'),
  ($$SELECT trained FROM gknn_ivfpq_info('priv_idx')$$),
  ($$SELECT trained FROM gknn_ivfpq_info('priv_t')$$),
  ($$SELECT count(*) FROM gknn_topk_cache()$$),
  ($$SELECT gknn_topk_cache_reset()$$)
) t(q);
RESET ROLE;
RESET ALL;  -- the SETs above
SET client_min_messages = warning;
-- The superuser can set them for a role (not the cache's budget: a server setting).
ALTER ROLE regress_gknn_user SET gknn.gpu_id = 0;
SELECT pg_temp.try('ALTER ROLE regress_gknn_user SET gknn.topk_cache_mb = 16') AS cache_budget;
SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'regress_gknn_user'::regrole;

GRANT SELECT ON priv_t TO regress_gknn_user;
SET ROLE regress_gknn_user;
SELECT trained, dims, lists, entries FROM gknn_ivfpq_info('priv_idx');
SELECT pg_temp.try($$SELECT trained FROM gknn_ivfpq_info('pg_class')$$) AS not_an_index;
RESET ROLE;

-- The table cache: without SELECT on the columns, gknn_cache_table is
-- 42501; with it, the service is needed (not preloaded here, or with the
-- cache off where it is: 55000, the message says which). The
-- reset is not PUBLIC's; the listing shows nothing without the service.
REVOKE SELECT ON priv_t FROM regress_gknn_user;
SET ROLE regress_gknn_user;
SELECT pg_temp.try($$SELECT gknn_cache_table('priv_t', ARRAY['id'])$$) AS no_select;
SELECT pg_temp.try($$SELECT gknn_topk_cache_reset()$$) AS reset;
RESET ROLE;
GRANT SELECT (id) ON priv_t TO regress_gknn_user;
SET ROLE regress_gknn_user;
SELECT pg_temp.try($$SELECT gknn_cache_table('priv_t', ARRAY['v'])$$) AS other_column;
SELECT split_part(pg_temp.try($$SELECT gknn_cache_table('priv_t', ARRAY['id'])$$), ':', 1) AS column_granted;
SELECT count(*) AS listed FROM gknn_topk_cache();
RESET ROLE;
REVOKE SELECT (id) ON priv_t FROM regress_gknn_user;

DROP TABLE priv_t;
DROP ROLE regress_gknn_user;
