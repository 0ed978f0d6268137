-- Devices: the gknn.device / gknn.gpu_id GUCs, gknn_devices(),
-- gknn_current_device() and gknn_version(). Passes with and without a GPU
-- (and with PGOPTIONS='-c gknn.device=gpu'): every GPU-dependent expectation
-- is computed from gknn_devices() or skipped.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(43);

-- Load the module, so that its GUCs are defined (until then a SET gknn.x is
-- only a placeholder that PostgreSQL does not validate).
SELECT matches(gknn_version(), '^0\.1\.0 \(CUDA runtime [0-9]+\.[0-9]+\)$',
               'gknn_version() is "0.1.0 (CUDA runtime X.Y)"');
SELECT is(split_part(gknn_version(), ' ', 1),
          (SELECT extversion FROM pg_extension WHERE extname = 'gknn'),
          'gknn_version() starts with the installed extension version');

-- GUC definitions --------------------------------------------------------------
SELECT results_eq($$SELECT name, vartype, context, boot_val, enumvals
                    FROM pg_settings WHERE name = 'gknn.device'$$,
                  $$VALUES ('gknn.device'::text, 'enum'::text, 'user'::text, 'auto'::text,
                            '{auto,gpu,cpu}'::text[])$$,
                  'gknn.device: a user-settable enum auto|gpu|cpu, default auto');
SELECT results_eq($$SELECT name, vartype, context, boot_val, min_val
                    FROM pg_settings WHERE name = 'gknn.gpu_id'$$,
                  $$VALUES ('gknn.gpu_id'::text, 'integer'::text, 'superuser'::text, '0'::text, '0'::text)$$,
                  'gknn.gpu_id: a superuser-settable integer (the GPU is the administrator''s choice), default 0, minimum 0');

SELECT lives_ok('SET gknn.device = auto', 'gknn.device accepts auto');
SELECT is(current_setting('gknn.device'), 'auto', 'gknn.device reads back auto');
SELECT lives_ok('SET gknn.device = gpu', 'gknn.device accepts gpu');
SELECT is(current_setting('gknn.device'), 'gpu', 'gknn.device reads back gpu');
SELECT lives_ok('SET gknn.device = cpu', 'gknn.device accepts cpu');
SELECT is(current_setting('gknn.device'), 'cpu', 'gknn.device reads back cpu');
SELECT throws_ok('SET gknn.device = bogus', '22023', NULL, 'gknn.device rejects bogus');
SELECT throws_ok($$SET gknn.device = ''$$, '22023', NULL, 'gknn.device rejects the empty string');
SELECT throws_ok('SET gknn.device = gpu0', '22023', NULL, 'gknn.device rejects gpu0');
SELECT is(current_setting('gknn.device'), 'cpu', 'a rejected value leaves gknn.device unchanged');
SELECT throws_ok('SET gknn.gpu_id = -1', '22023', NULL, 'gknn.gpu_id rejects -1');
SELECT throws_ok('SET gknn.gpu_id = one', '22023', NULL, 'gknn.gpu_id rejects a non-integer');
SELECT lives_ok('SET gknn.gpu_id = 3', 'gknn.gpu_id accepts 3');
SELECT is(current_setting('gknn.gpu_id'), '3', 'gknn.gpu_id reads back 3');
SELECT throws_ok('SET gknn.devcie = cpu', '42602', NULL,
                 'a misspelt gknn.* setting is an error (reserved prefix)');
SET gknn.gpu_id = 0;

-- gknn_devices() shape ----------------------------------------------------------
SELECT has_function('gknn_devices', '{}'::name[], 'gknn_devices() exists');
SELECT function_returns('gknn_devices', '{}'::name[], 'setof record', 'gknn_devices() returns setof record');
SELECT results_eq($$SELECT n COLLATE "default", t::regtype::text, m
                    FROM pg_proc p, unnest(p.proargnames, p.proallargtypes, p.proargmodes)
                                    WITH ORDINALITY u(n, t, m, i)
                    WHERE p.oid = 'gknn_devices()'::regprocedure ORDER BY i$$,
                  $$VALUES ('ordinal'::text, 'integer'::text, 'o'::"char"),
                           ('name', 'text', 'o'), ('total_memory', 'bigint', 'o'),
                           ('compute_capability', 'text', 'o'), ('in_use', 'boolean', 'o')$$,
                  'gknn_devices() OUT columns: ordinal int, name text, total_memory bigint, compute_capability text, in_use boolean');
CREATE TEMP TABLE devs AS SELECT * FROM gknn_devices();
SELECT count(*) AS ndev FROM devs \gset
SELECT columns_are('devs', ARRAY['ordinal', 'name', 'total_memory', 'compute_capability', 'in_use'],
                   'SELECT * FROM gknn_devices() has the five documented columns');
SELECT results_eq($$SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                    WHERE attrelid = 'devs'::regclass AND attnum > 0 ORDER BY attnum$$,
                  ARRAY['integer', 'text', 'bigint', 'text', 'boolean'],
                  'SELECT * FROM gknn_devices() column types');
SELECT results_eq('SELECT ordinal FROM gknn_devices()',
                  'SELECT generate_series(0, (SELECT count(*) FROM devs)::int - 1)',
                  'ordinals are 0 .. n-1 in order');
SELECT is_empty($$SELECT ordinal FROM devs
                  WHERE name IS NULL OR name = '' OR total_memory IS NULL OR total_memory <= 0
                     OR compute_capability !~ '^[0-9]+\.[0-9]+$' OR in_use IS NULL$$,
                'every device row has a name, a positive memory size and a compute capability X.Y');
SELECT diag('GPUs visible: ' || (SELECT count(*) FROM devs) ||
            coalesce(' (' || (SELECT string_agg(ordinal || ': ' || name || ', cc ' || compute_capability, '; ')
                              FROM devs) || ')', ''));

-- gknn.device = cpu ---------------------------------------------------------------
SET gknn.device = cpu;
SELECT is(gknn_current_device(), 'cpu', 'device=cpu: gknn_current_device() is cpu');
SELECT is((SELECT count(*) FROM gknn_devices() WHERE in_use)::int, 0, 'device=cpu: no device is in use');
SET gknn.gpu_id = 1023;
SELECT is(gknn_current_device(), 'cpu', 'device=cpu: gpu_id does not matter');

-- gknn.device = auto ---------------------------------------------------------------
SET gknn.device = auto;
SET gknn.gpu_id = 0;
SELECT is(gknn_current_device(),
          CASE WHEN (SELECT count(*) FROM devs) = 0 THEN 'cpu'
               ELSE 'gpu 0: ' || (SELECT name FROM devs WHERE ordinal = 0) END,
          'device=auto: GPU 0 when there is one, else cpu');
SELECT is((SELECT array_agg(ordinal) FROM gknn_devices() WHERE in_use),
          CASE WHEN (SELECT count(*) FROM devs) = 0 THEN NULL ELSE ARRAY[0] END,
          'device=auto: GPU 0 in use when there is one, else none');
SET gknn.gpu_id = :ndev;
SELECT is(gknn_current_device(), 'cpu', 'device=auto, gpu_id = device count: falls back to cpu');
SELECT is((SELECT count(*) FROM gknn_devices() WHERE in_use)::int, 0,
          'device=auto, gpu_id = device count: no device in use');

-- gknn.device = gpu ------------------------------------------------------------------
SET gknn.device = gpu;
SET gknn.gpu_id = 0;
SELECT CASE WHEN (SELECT count(*) FROM devs) = 0
  THEN throws_ok('SELECT gknn_current_device()', '55000', NULL,
                 'device=gpu without a GPU: gknn_current_device() fails with 55000')
  ELSE skip('a GPU is visible', 1) END;
SELECT CASE WHEN (SELECT count(*) FROM devs) = 0
  THEN skip('no GPU visible', 2)
  ELSE collect_tap(
    is(gknn_current_device(), 'gpu 0: ' || (SELECT name FROM devs WHERE ordinal = 0),
       'device=gpu: gknn_current_device() is "gpu 0: <name of ordinal 0>"'),
    results_eq('SELECT ordinal FROM gknn_devices() WHERE in_use', ARRAY[0],
               'device=gpu: exactly GPU 0 is in use')) END;
SET gknn.gpu_id = 1;
SELECT CASE WHEN (SELECT count(*) FROM devs) < 2
  THEN skip('fewer than two GPUs visible', 2)
  ELSE collect_tap(
    is(gknn_current_device(), 'gpu 1: ' || (SELECT name FROM devs WHERE ordinal = 1),
       'device=gpu, gpu_id=1: gknn_current_device() is "gpu 1: <name of ordinal 1>"'),
    results_eq('SELECT ordinal FROM gknn_devices() WHERE in_use', ARRAY[1],
               'device=gpu, gpu_id=1: exactly GPU 1 is in use')) END;
SET gknn.gpu_id = :ndev;
SELECT throws_ok('SELECT gknn_current_device()', '55000', NULL,
                 'device=gpu, gpu_id = device count: fails with 55000');
SET gknn.gpu_id = 1023;
SELECT throws_ok('SELECT gknn_current_device()', '55000', NULL,
                 'device=gpu, gpu_id = 1023: fails with 55000');
SELECT is((SELECT count(*) FROM gknn_devices())::int, (SELECT count(*) FROM devs)::int,
          'gknn_devices() still lists every device when gpu_id names none');

-- Back to the session's own setting: the failures above left nothing behind.
SET gknn.device = cpu;
SET gknn.gpu_id = 0;
SELECT is(gknn_current_device(), 'cpu', 'after the errors, device=cpu still gives cpu');
SELECT is('[0,0]'::vector <-> '[3,4]', 5::float8, 'after the errors, operators still work');

SELECT * FROM finish();
ROLLBACK;
