-- Schema safety: CREATE EXTENSION gknn SCHEMA gknn beside another `vector`
-- type (and pgvector-like functions) in public. Everything happens inside one
-- transaction that is rolled back, so the database keeps its own gknn.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(39);

-- Move the existing installation out of the way and put stand-ins for
-- pgvector's objects into public.
DROP EXTENSION gknn;
CREATE TYPE public.vector AS (x int);
CREATE FUNCTION public.l2_distance(int, int) RETURNS int
  LANGUAGE sql IMMUTABLE AS 'SELECT abs($1 - $2) + 1000';
CREATE FUNCTION public.vector_dims(public.vector) RETURNS int
  LANGUAGE sql IMMUTABLE AS 'SELECT -1';
CREATE FUNCTION public.vector_add(public.vector, public.vector) RETURNS public.vector
  LANGUAGE sql IMMUTABLE AS 'SELECT ROW(-1)::public.vector';
CREATE OPERATOR public.<-> (LEFTARG = int, RIGHTARG = int, FUNCTION = public.l2_distance);
CREATE SCHEMA gknn;

SELECT lives_ok('CREATE EXTENSION gknn SCHEMA gknn',
                'CREATE EXTENSION gknn SCHEMA gknn beside a public.vector type');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'gknn'),
          'gknn', 'pg_extension records schema gknn');

-- Every member object of the extension, with the schema it lives in (casts
-- have no schema: they must join gknn types and gknn functions).
CREATE TEMP TABLE members AS
SELECT d.classid::regclass::text AS catalog,
       pg_describe_object(d.classid, d.objid, d.objsubid) AS object,
       CASE d.classid
         WHEN 'pg_proc'::regclass     THEN (SELECT pronamespace FROM pg_proc WHERE oid = d.objid)
         WHEN 'pg_type'::regclass     THEN (SELECT typnamespace FROM pg_type WHERE oid = d.objid)
         WHEN 'pg_operator'::regclass THEN (SELECT oprnamespace FROM pg_operator WHERE oid = d.objid)
         WHEN 'pg_opclass'::regclass  THEN (SELECT opcnamespace FROM pg_opclass WHERE oid = d.objid)
         WHEN 'pg_opfamily'::regclass THEN (SELECT opfnamespace FROM pg_opfamily WHERE oid = d.objid)
       END AS nsp,
       d.objid
FROM pg_depend d
WHERE d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gknn')
  AND d.deptype = 'e';

SELECT is_empty($$SELECT catalog FROM members
                  WHERE catalog NOT IN ('pg_proc', 'pg_type', 'pg_operator', 'pg_opclass',
                                        'pg_opfamily', 'pg_cast')$$,
                'the extension owns only functions, types, operators, operator classes/families and casts');
SELECT is_empty($$SELECT object FROM members
                  WHERE catalog <> 'pg_cast' AND nsp IS DISTINCT FROM 'gknn'::regnamespace$$,
                'every function, aggregate, type, operator and operator class/family lives in schema gknn');
SELECT is_empty($$SELECT m.object FROM members m JOIN pg_cast c ON c.oid = m.objid
                  JOIN pg_proc p ON p.oid = c.castfunc
                  WHERE p.pronamespace <> 'gknn'::regnamespace
                     OR 'gknn'::regnamespace NOT IN
                        ((SELECT typnamespace FROM pg_type WHERE oid = c.castsource),
                         (SELECT typnamespace FROM pg_type WHERE oid = c.casttarget))$$,
                'every cast goes through a gknn function and involves a gknn type');
SELECT cmp_ok((SELECT count(*) FROM members WHERE catalog = 'pg_proc')::int, '>=', 30,
              'the member list is not empty (functions)');
SELECT ok((SELECT count(DISTINCT catalog) FROM members) = 6,
          'members of all six kinds were found');
SELECT is((SELECT count(*) FROM members m JOIN pg_proc p ON p.oid = m.objid
           WHERE p.prokind = 'a')::int, 2, 'two aggregates (avg, sum) are members');
SELECT is((SELECT count(*) FROM members WHERE catalog = 'pg_cast')::int, 6, 'six casts are members');
SELECT is((SELECT typnamespace::regnamespace::text FROM pg_type
           WHERE oid = (SELECT typarray FROM pg_type WHERE oid = 'gknn.vector'::regtype)),
          'gknn', 'the array type of gknn.vector lives in gknn too');

-- Nothing leaked into public or pg_catalog.
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                  WHERE p.pronamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.vector'::regtype = ANY (p.proargtypes::oid[] || p.prorettype)$$,
                'no function in public or pg_catalog takes or returns gknn.vector');
SELECT is_empty($$SELECT o.oid::regoperator::text FROM pg_operator o
                  WHERE o.oprnamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.vector'::regtype IN (o.oprleft, o.oprright)$$,
                'no operator in public or pg_catalog works on gknn.vector');

-- Everything below runs with public alone on the search path (pgTAP lives in
-- public). Values are compared as text: gknn's = is not on the search path.
SET LOCAL search_path = public;

SELECT is('[1,2]'::gknn.vector OPERATOR(gknn.<->) '[2,3]'::gknn.vector, sqrt(2::float8),
          'OPERATOR(gknn.<->) with search_path = public');
SELECT is('[1,2]'::gknn.vector OPERATOR(gknn.<#>) '[2,3]'::gknn.vector, -8::float8,
          'OPERATOR(gknn.<#>) with search_path = public');
SELECT is('[1,0]'::gknn.vector OPERATOR(gknn.<=>) '[0,1]'::gknn.vector, 1::float8,
          'OPERATOR(gknn.<=>) with search_path = public');
SELECT is('[1,2]'::gknn.vector OPERATOR(gknn.<+>) '[2,4]'::gknn.vector, 3::float8,
          'OPERATOR(gknn.<+>) with search_path = public');
SELECT is(('[1,2]'::gknn.vector OPERATOR(gknn.+) '[2,3]'::gknn.vector)::text, '[3,5]',
          'OPERATOR(gknn.+) with search_path = public');
SELECT throws_ok($$SELECT '[1,2]'::gknn.vector <-> '[2,3]'::gknn.vector$$, '42883', NULL,
                 'an unqualified <-> on gknn.vector is not found through public');
SELECT is(1 <-> 5, 1004, 'public''s own <-> on int is untouched');
SELECT is(l2_distance(1, 5), 1004, 'public.l2_distance(int, int) is untouched');
SELECT is(gknn.l2_distance('[0,0]', '[3,4]'), 5::float8, 'gknn.l2_distance with search_path = public');

CREATE TEMP TABLE agg_in (v gknn.vector(2));
INSERT INTO agg_in VALUES ('[1,2]'), ('[3,4]'), ('[5,9]');
SELECT is((SELECT gknn.avg(v)::text FROM agg_in), '[3,5]', 'gknn.avg with search_path = public');
SELECT is((SELECT gknn.sum(v)::text FROM agg_in), '[9,15]', 'gknn.sum with search_path = public');
SELECT is((SELECT string_agg(v::text, ' ' ORDER BY v DESC) FROM agg_in), '[5,9] [3,4] [1,2]',
          'ORDER BY on gknn.vector finds the btree opclass with search_path = public');

SELECT is((SELECT gknn.vector_dims(v) FROM agg_in LIMIT 1), 2,
          'gknn.vector_dims beside public.vector_dims(public.vector)');
SELECT is(gknn.vector_norm('[3,4]'), 5::float8, 'gknn.vector_norm with search_path = public');
SELECT is(gknn.l2_normalize('[3,4]')::text, '[0.6,0.8]', 'gknn.l2_normalize with search_path = public');
SELECT is(gknn.subvector('[1,2,3,4]', 2, 2)::text, '[2,3]', 'gknn.subvector with search_path = public');
SELECT is((ARRAY[1,2,3]::int[]::gknn.vector(3))::text, '[1,2,3]',
          'int[] -> gknn.vector(3) cast with search_path = public');
SELECT is('[1.5,2]'::gknn.vector::real[], ARRAY[1.5,2]::real[],
          'gknn.vector -> real[] cast with search_path = public');
SELECT throws_ok($$SELECT '[1,2,3]'::gknn.vector(2)$$, '22000', 'expected 2 dimensions, not 3',
                 'the vector(n) typmod check with search_path = public');
SELECT is(encode(gknn.vector_send('[1]'), 'hex'), '000100003f800000',
          'gknn.vector_send with search_path = public');
SELECT matches(gknn.gknn_version(), '^0\.1\.0 ', 'gknn.gknn_version() with search_path = public');

-- The same with an empty search_path (only pg_catalog and pg_temp).
SET LOCAL search_path = '';
CREATE TEMP TABLE empty_path AS
SELECT ('[1,2]'::gknn.vector OPERATOR(gknn.<->) '[2,3]'::gknn.vector) = pg_catalog.sqrt(2::float8) AS l2,
       (SELECT gknn.avg(v)::text FROM (VALUES ('[1,2]'::gknn.vector), ('[3,4]')) t(v)) AS avg,
       (SELECT gknn.sum(v)::text FROM (VALUES ('[1,2]'::gknn.vector), ('[3,4]')) t(v)) AS sum,
       (SELECT pg_catalog.string_agg(v::text, ' ' ORDER BY v)
          FROM (VALUES ('[2]'::gknn.vector), ('[1,5]'), ('[1]')) t(v)) AS sorted,
       ('{1,2}'::float8[]::gknn.vector)::text AS cast;
SET LOCAL search_path = public;
SELECT results_eq('SELECT l2, avg, sum, sorted, "cast" FROM pg_temp.empty_path',
                  $$VALUES (true, '[2,3]', '[4,6]', '[1] [1,5] [2]', '[1,2]')$$,
                  'operators, aggregates, ORDER BY and casts work with an empty search_path');
DROP TABLE pg_temp.empty_path;

-- Drop: every gknn object goes, public's stand-ins stay.
DROP TABLE agg_in;
SELECT lives_ok('DROP EXTENSION gknn', 'DROP EXTENSION gknn (no CASCADE needed)');
SELECT is_empty($$SELECT 1 FROM pg_proc WHERE pronamespace = 'gknn'::regnamespace
                  UNION ALL SELECT 1 FROM pg_type WHERE typnamespace = 'gknn'::regnamespace
                  UNION ALL SELECT 1 FROM pg_operator WHERE oprnamespace = 'gknn'::regnamespace
                  UNION ALL SELECT 1 FROM pg_opclass WHERE opcnamespace = 'gknn'::regnamespace
                  UNION ALL SELECT 1 FROM pg_opfamily WHERE opfnamespace = 'gknn'::regnamespace$$,
                'DROP EXTENSION leaves nothing in schema gknn');
SELECT is_empty($$SELECT 1 FROM pg_cast c JOIN pg_proc p ON p.oid = c.castfunc
                  WHERE p.proname IN ('vector', 'array_to_vector', 'vector_to_float4')$$,
                'DROP EXTENSION removes the casts');
SELECT is((SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ')
           FROM pg_attribute WHERE attrelid = (SELECT typrelid FROM pg_type
                                               WHERE oid = 'public.vector'::regtype)
             AND attnum > 0),
          'x integer', 'public.vector is intact');
SELECT is(ROW(7)::public.vector::text, '(7)', 'public.vector still works');

SELECT * FROM finish();
ROLLBACK;
