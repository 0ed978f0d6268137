-- Smoke test of the pgTAP plumbing. regress/run-all.sh runs every
-- regress/pgtap/*.sql with pg_prove in one fresh database where
-- `CREATE EXTENSION pgtap; CREATE EXTENSION gknn;` were already run; each file
-- rolls back what it does.
BEGIN;
SELECT plan(3);

SELECT has_extension('gknn');
SELECT has_type('vector');
SELECT is('[1,2]'::vector::text, '[1,2]', 'vector text form round-trips');

SELECT * FROM finish();
ROLLBACK;
