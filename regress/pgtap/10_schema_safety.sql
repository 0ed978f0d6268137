-- Schema safety: CREATE EXTENSION gknn SCHEMA gknn beside other `vector` and
-- `sparsevec` types (and pgvector-like functions and bit operators) in public. Everything happens inside one
-- transaction that is rolled back, so the database keeps its own gknn.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gknn;

BEGIN;
SELECT plan(104);

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
CREATE TYPE public.sparsevec AS (y int);
CREATE FUNCTION public.l2_norm(public.sparsevec) RETURNS int
  LANGUAGE sql IMMUTABLE AS 'SELECT -2';
CREATE FUNCTION public.hamming_distance(bit, bit) RETURNS int
  LANGUAGE sql IMMUTABLE AS 'SELECT -7';
CREATE OPERATOR public.<~> (LEFTARG = bit, RIGHTARG = bit, FUNCTION = public.hamming_distance);
CREATE SCHEMA gknn;
-- pgvector's halfvec and || stand-ins
CREATE TYPE public.halfvec AS (h int);
CREATE FUNCTION public.l2_norm(public.halfvec) RETURNS int
  LANGUAGE sql IMMUTABLE AS 'SELECT -3';
CREATE FUNCTION public.vector_concat(public.vector, public.vector) RETURNS public.vector
  LANGUAGE sql IMMUTABLE AS 'SELECT ROW(-4)::public.vector';
CREATE OPERATOR public.|| (LEFTARG = public.vector, RIGHTARG = public.vector, FUNCTION = public.vector_concat);

SELECT lives_ok('CREATE EXTENSION gknn SCHEMA gknn',
                'CREATE EXTENSION gknn SCHEMA gknn beside a public.vector type');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'gknn'),
          'gknn', 'pg_extension records schema gknn');

-- Every member object of the extension, with the schema it lives in (casts
-- have no schema: they must join gknn types and gknn functions; an access
-- method has none either: its handler must be a gknn function).
CREATE TEMP TABLE members AS
SELECT d.classid::regclass::text AS catalog,
       pg_describe_object(d.classid, d.objid, d.objsubid) AS object,
       CASE d.classid
         WHEN 'pg_proc'::regclass     THEN (SELECT pronamespace FROM pg_proc WHERE oid = d.objid)
         WHEN 'pg_type'::regclass     THEN (SELECT typnamespace FROM pg_type WHERE oid = d.objid)
         WHEN 'pg_operator'::regclass THEN (SELECT oprnamespace FROM pg_operator WHERE oid = d.objid)
         WHEN 'pg_opclass'::regclass  THEN (SELECT opcnamespace FROM pg_opclass WHERE oid = d.objid)
         WHEN 'pg_opfamily'::regclass THEN (SELECT opfnamespace FROM pg_opfamily WHERE oid = d.objid)
         WHEN 'pg_am'::regclass       THEN (SELECT p.pronamespace FROM pg_am a JOIN pg_proc p ON p.oid = a.amhandler
                                            WHERE a.oid = d.objid)
       END AS nsp,
       d.objid
FROM pg_depend d
WHERE d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gknn')
  AND d.deptype = 'e';

SELECT is_empty($$SELECT catalog FROM members
                  WHERE catalog NOT IN ('pg_proc', 'pg_type', 'pg_operator', 'pg_opclass',
                                        'pg_opfamily', 'pg_cast', 'pg_am')$$,
                'the extension owns only functions, types, operators, operator classes/families, casts '
                'and access methods');
SELECT is_empty($$SELECT object FROM members
                  WHERE catalog <> 'pg_cast' AND nsp IS DISTINCT FROM 'gknn'::regnamespace$$,
                'every function, aggregate, type, operator and operator class/family lives in schema gknn, '
                'every access method''s handler too');
SELECT is_empty($$SELECT m.object FROM members m JOIN pg_cast c ON c.oid = m.objid
                  JOIN pg_proc p ON p.oid = c.castfunc
                  WHERE p.pronamespace <> 'gknn'::regnamespace
                     OR 'gknn'::regnamespace NOT IN
                        ((SELECT typnamespace FROM pg_type WHERE oid = c.castsource),
                         (SELECT typnamespace FROM pg_type WHERE oid = c.casttarget))$$,
                'every cast goes through a gknn function and involves a gknn type');
SELECT cmp_ok((SELECT count(*) FROM members WHERE catalog = 'pg_proc')::int, '>=', 30,
              'the member list is not empty (functions)');
SELECT ok((SELECT count(DISTINCT catalog) FROM members) = 7,
          'members of all seven kinds were found');
SELECT is((SELECT array_agg(object ORDER BY object) FROM members WHERE catalog = 'pg_am'),
          ARRAY['access method gpu_graph', 'access method gpu_ivfpq'],
          'two access methods: gpu_graph and gpu_ivfpq');
SELECT is((SELECT count(*) FROM members m JOIN pg_proc p ON p.oid = m.objid
           WHERE p.prokind = 'a')::int, 4, 'four aggregates (avg, sum of vector and halfvec) are members');
SELECT is((SELECT count(*) FROM members WHERE catalog = 'pg_cast')::int, 23,
          'twenty-three casts are members (vector: 6, sparsevec: 7, halfvec: 10)');
SELECT is((SELECT typnamespace::regnamespace::text FROM pg_type
           WHERE oid = (SELECT typarray FROM pg_type WHERE oid = 'gknn.vector'::regtype)),
          'gknn', 'the array type of gknn.vector lives in gknn too');
SELECT is((SELECT typnamespace::regnamespace::text FROM pg_type
           WHERE oid = (SELECT typarray FROM pg_type WHERE oid = 'gknn.sparsevec'::regtype)),
          'gknn', 'the array type of gknn.sparsevec lives in gknn too');
SELECT is((SELECT array_agg(o.oid::regoperator::text ORDER BY o.oprname) FROM members m
           JOIN pg_operator o ON o.oid = m.objid WHERE 'bit'::regtype IN (o.oprleft, o.oprright)),
          ARRAY['gknn.<%>(bit,bit)', 'gknn.<~>(bit,bit)'], 'the bit operators are gknn''s, on pg_catalog.bit');

-- Nothing leaked into public or pg_catalog.
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                  WHERE p.pronamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.vector'::regtype = ANY (p.proargtypes::oid[] || p.prorettype)$$,
                'no function in public or pg_catalog takes or returns gknn.vector');
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                  WHERE p.pronamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.sparsevec'::regtype = ANY (p.proargtypes::oid[] || p.prorettype)$$,
                'no function in public or pg_catalog takes or returns gknn.sparsevec');
SELECT is_empty($$SELECT o.oid::regoperator::text FROM pg_operator o
                  WHERE o.oprnamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.vector'::regtype IN (o.oprleft, o.oprright)$$,
                'no operator in public or pg_catalog works on gknn.vector');
SELECT is_empty($$SELECT o.oid::regoperator::text FROM pg_operator o
                  WHERE o.oprnamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND ('gknn.sparsevec'::regtype IN (o.oprleft, o.oprright)
                         OR o.oprname IN ('<%>') OR (o.oprname = '<~>' AND o.oprcode <> 'public.hamming_distance'::regproc))$$,
                'no operator in public or pg_catalog works on gknn.sparsevec, and none of gknn''s on bit');

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
SELECT is(gknn.l2_distance('[0,0]'::gknn.vector, '[3,4]'), 5::float8, 'gknn.l2_distance with search_path = public');

CREATE TEMP TABLE agg_in (v gknn.vector(2));
INSERT INTO agg_in VALUES ('[1,2]'), ('[3,4]'), ('[5,9]');
SELECT is((SELECT gknn.avg(v)::text FROM agg_in), '[3,5]', 'gknn.avg with search_path = public');
SELECT is((SELECT gknn.sum(v)::text FROM agg_in), '[9,15]', 'gknn.sum with search_path = public');
SELECT is((SELECT string_agg(v::text, ' ' ORDER BY v DESC) FROM agg_in), '[5,9] [3,4] [1,2]',
          'ORDER BY on gknn.vector finds the btree opclass with search_path = public');

SELECT is((SELECT gknn.vector_dims(v) FROM agg_in LIMIT 1), 2,
          'gknn.vector_dims beside public.vector_dims(public.vector)');
SELECT is(gknn.vector_norm('[3,4]'), 5::float8, 'gknn.vector_norm with search_path = public');
SELECT is(gknn.l2_normalize('[3,4]'::gknn.vector)::text, '[0.6,0.8]', 'gknn.l2_normalize with search_path = public');
SELECT is(gknn.subvector('[1,2,3,4]'::gknn.vector, 2, 2)::text, '[2,3]', 'gknn.subvector with search_path = public');
SELECT is((ARRAY[1,2,3]::int[]::gknn.vector(3))::text, '[1,2,3]',
          'int[] -> gknn.vector(3) cast with search_path = public');
SELECT is('[1.5,2]'::gknn.vector::real[], ARRAY[1.5,2]::real[],
          'gknn.vector -> real[] cast with search_path = public');
SELECT throws_ok($$SELECT '[1,2,3]'::gknn.vector(2)$$, '22000', 'expected 2 dimensions, not 3',
                 'the vector(n) typmod check with search_path = public');
SELECT is(encode(gknn.vector_send('[1]'), 'hex'), '000100003f800000',
          'gknn.vector_send with search_path = public');

-- sparsevec and the bit functions with search_path = public
SELECT is('{1:1,2:2}/2'::gknn.sparsevec OPERATOR(gknn.<->) '{1:2,2:3}/2'::gknn.sparsevec, sqrt(2::float8),
          'OPERATOR(gknn.<->) on gknn.sparsevec with search_path = public');
SELECT is('{1:1,2:2}/2'::gknn.sparsevec OPERATOR(gknn.<#>) '{1:2,2:3}/2'::gknn.sparsevec, -8::float8,
          'OPERATOR(gknn.<#>) on gknn.sparsevec with search_path = public');
SELECT is('{1:1}/2'::gknn.sparsevec OPERATOR(gknn.<=>) '{2:1}/2'::gknn.sparsevec, 1::float8,
          'OPERATOR(gknn.<=>) on gknn.sparsevec with search_path = public');
SELECT is('{1:1,2:2}/2'::gknn.sparsevec OPERATOR(gknn.<+>) '{1:2,2:4}/2'::gknn.sparsevec, 3::float8,
          'OPERATOR(gknn.<+>) on gknn.sparsevec with search_path = public');
SELECT is(gknn.l2_norm('{1:3,3:4}/3'::gknn.sparsevec), 5::float8,
          'gknn.l2_norm beside public.l2_norm(public.sparsevec)');
SELECT is(gknn.l2_normalize('{1:3,3:4}/3'::gknn.sparsevec)::text, '{1:0.6,3:0.8}/3',
          'gknn.l2_normalize on gknn.sparsevec with search_path = public');
SELECT is('[0,1.5,0]'::gknn.vector::gknn.sparsevec(3)::text, '{2:1.5}/3',
          'gknn.vector -> gknn.sparsevec(3) cast with search_path = public');
SELECT is('{2:1.5}/3'::gknn.sparsevec::gknn.vector::text, '[0,1.5,0]',
          'gknn.sparsevec -> gknn.vector cast with search_path = public');
SELECT is((ARRAY[0,2]::int[]::gknn.sparsevec)::text, '{2:2}/2', 'int[] -> gknn.sparsevec cast with search_path = public');
SELECT throws_ok($$SELECT '{}/3'::gknn.sparsevec(2)$$, '22000', 'expected 2 dimensions, not 3',
                 'the sparsevec(n) typmod check with search_path = public');
SELECT is(encode(gknn.sparsevec_send('{2:1}/3'), 'hex'), '00000003000000010000000000000001' || '3f800000',
          'gknn.sparsevec_send with search_path = public');
SELECT is((SELECT string_agg(v::text, ' ' ORDER BY v) FROM (VALUES ('{1:1}/2'::gknn.sparsevec), ('{}/2'),
                                                                  ('{2:-1}/2')) t(v)),
          '{2:-1}/2 {}/2 {1:1}/2', 'ORDER BY on gknn.sparsevec finds the btree opclass with search_path = public');
SELECT is(B'101' <~> B'011', -7, 'an unqualified <~> on bit is public''s own');
SELECT is(B'101' OPERATOR(gknn.<~>) B'011', 2::float8, 'OPERATOR(gknn.<~>) with search_path = public');
SELECT is(B'1100' OPERATOR(gknn.<%>) B'1010', 1 - 1 / 3::float8, 'OPERATOR(gknn.<%>) with search_path = public');
SELECT is(gknn.hamming_distance(B'1', B'0'), 1::float8, 'gknn.hamming_distance beside public.hamming_distance(bit, bit)');
SELECT is(gknn.jaccard_distance(B'11', B'10'), 0.5::float8, 'gknn.jaccard_distance with search_path = public');
SELECT is(gknn.binary_quantize('[1,-1,0.5]'::gknn.vector)::text, '101', 'gknn.binary_quantize with search_path = public');
CREATE TEMP TABLE bq_in (v gknn.vector(3));
INSERT INTO bq_in VALUES ('[1,-1,1]'), ('[-1,1,1]');
SELECT lives_ok('CREATE INDEX ON bq_in ((gknn.binary_quantize(v)::bit(3)))',
                'an expression index on gknn.binary_quantize(v)::bit(3) with search_path = public');
SELECT is((SELECT v::text FROM bq_in WHERE gknn.binary_quantize(v)::bit(3) = B'011'), '[-1,1,1]',
          'the expression index''s expression finds the row');
DROP TABLE bq_in;
SELECT matches(gknn.gknn_version(), '^0\.1\.0 ', 'gknn.gknn_version() with search_path = public');

-- A gpu_ivfpq index with search_path = public: its operator classes are
-- gknn's, and an ordered scan through OPERATOR(gknn.<->) uses it.
CREATE TEMP TABLE ivf_in (id int, v gknn.vector(2));
INSERT INTO ivf_in SELECT i, ARRAY[i % 7, i % 5]::float8[]::gknn.vector FROM generate_series(1, 200) i;
CREATE INDEX ivf_in_idx ON ivf_in USING gpu_ivfpq (v gknn.vector_l2_ops) WITH (lists = 4, m = 1);
SET LOCAL enable_seqscan = off;
SELECT is((SELECT count(*) FROM (SELECT id FROM ivf_in ORDER BY v OPERATOR(gknn.<->) '[1,1]'::gknn.vector
                                 LIMIT 5) s)::int, 5, 'a gpu_ivfpq index scan with search_path = public');
SELECT ok((SELECT entries = 200 FROM gknn.gknn_ivfpq_info('ivf_in_idx')),
          'gknn.gknn_ivfpq_info with search_path = public');
RESET enable_seqscan;
DROP TABLE ivf_in;
-- and a halfvec expression index through gknn's halfvec operator class
CREATE TEMP TABLE ivf_h (id int, v gknn.vector(2));
INSERT INTO ivf_h SELECT i, ARRAY[i % 7, i % 5]::float8[]::gknn.vector FROM generate_series(1, 200) i;
CREATE INDEX ivf_h_idx ON ivf_h USING gpu_ivfpq ((v::gknn.halfvec(2)) gknn.halfvec_l2_ops) WITH (lists = 4, m = 1);
SET LOCAL enable_seqscan = off;
SET LOCAL gknn.ivfpq_exact = on;
SELECT is((SELECT array_agg(id) FROM (SELECT id FROM ivf_h ORDER BY v::gknn.halfvec(2) OPERATOR(gknn.<->)
                                      '[1,1]'::gknn.halfvec(2) LIMIT 4) s),
          '{1,36,71,106}'::int[], 'a gpu_ivfpq halfvec expression index with search_path = public');
RESET gknn.ivfpq_exact;
RESET enable_seqscan;
DROP TABLE ivf_h;

-- halfvec and || with search_path = public: gknn.halfvec beside public.halfvec.
SELECT is((SELECT typnamespace::regnamespace::text FROM pg_type
           WHERE oid = (SELECT typarray FROM pg_type WHERE oid = 'gknn.halfvec'::regtype)),
          'gknn', 'the array type of gknn.halfvec lives in gknn too');
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                  WHERE p.pronamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND 'gknn.halfvec'::regtype = ANY (p.proargtypes::oid[] || p.prorettype)$$,
                'no function in public or pg_catalog takes or returns gknn.halfvec');
SELECT is_empty($$SELECT o.oid::regoperator::text FROM pg_operator o
                  WHERE o.oprnamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace)
                    AND ('gknn.halfvec'::regtype IN (o.oprleft, o.oprright)
                         OR (o.oprname = '||' AND 'gknn.vector'::regtype IN (o.oprleft, o.oprright)))$$,
                'no operator in public or pg_catalog works on gknn.halfvec, nor || on gknn.vector');
SELECT is((SELECT count(*) FROM members m JOIN pg_cast c ON c.oid = m.objid
           WHERE 'gknn.halfvec'::regtype IN (c.castsource, c.casttarget))::int, 10,
          'ten casts of gknn.halfvec are members');
SELECT is('[1,2]'::gknn.halfvec OPERATOR(gknn.<->) '[2,3]'::gknn.halfvec, sqrt(2::float8),
          'OPERATOR(gknn.<->) on gknn.halfvec with search_path = public');
SELECT is('[1,2]'::gknn.halfvec OPERATOR(gknn.<#>) '[2,3]'::gknn.halfvec, -8::float8,
          'OPERATOR(gknn.<#>) on gknn.halfvec with search_path = public');
SELECT is('[1,0]'::gknn.halfvec OPERATOR(gknn.<=>) '[0,1]'::gknn.halfvec, 1::float8,
          'OPERATOR(gknn.<=>) on gknn.halfvec with search_path = public');
SELECT is('[1,2]'::gknn.halfvec OPERATOR(gknn.<+>) '[2,4]'::gknn.halfvec, 3::float8,
          'OPERATOR(gknn.<+>) on gknn.halfvec with search_path = public');
SELECT is(('[1,2]'::gknn.halfvec OPERATOR(gknn.*) '[2,3]'::gknn.halfvec)::text, '[2,6]',
          'OPERATOR(gknn.*) on gknn.halfvec with search_path = public');
SELECT is('[1,2]'::gknn.vector OPERATOR(gknn.<->) '[1,3]'::gknn.halfvec, 1::float8,
          'gknn.vector meets gknn.halfvec through the implicit cast with search_path = public');
SELECT is(('[1,2]'::gknn.vector OPERATOR(gknn.||) '[3]'::gknn.vector)::text, '[1,2,3]',
          'OPERATOR(gknn.||) on gknn.vector with search_path = public');
SELECT is(('[1,2]'::gknn.halfvec OPERATOR(gknn.||) '[0.1]'::gknn.halfvec)::text, '[1,2,0.099975586]',
          'OPERATOR(gknn.||) on gknn.halfvec with search_path = public');
SELECT is((ROW(1)::public.vector || ROW(2)::public.vector)::text, '(-4)', 'public''s own || on public.vector is untouched');
SELECT is(gknn.l2_norm('[3,4]'::gknn.halfvec), 5::float8, 'gknn.l2_norm beside public.l2_norm(public.halfvec)');
SELECT is(gknn.vector_dims('[1,2,3]'::gknn.halfvec), 3, 'gknn.vector_dims on gknn.halfvec with search_path = public');
SELECT is(gknn.l2_normalize('[3,4]'::gknn.halfvec)::text, '[0.60009766,0.7998047]',
          'gknn.l2_normalize on gknn.halfvec with search_path = public');
SELECT is(gknn.subvector('[1,2,3,4]'::gknn.halfvec, 2, 2)::text, '[2,3]',
          'gknn.subvector on gknn.halfvec with search_path = public');
SELECT is(gknn.binary_quantize('[1,-1,0.5]'::gknn.halfvec)::text, '101',
          'gknn.binary_quantize on gknn.halfvec with search_path = public');
CREATE TEMP TABLE hagg_in (v gknn.halfvec(2));
INSERT INTO hagg_in VALUES ('[1,2]'), ('[3,4]'), ('[5,9]');
SELECT is((SELECT gknn.avg(v)::text FROM hagg_in), '[3,5]', 'gknn.avg(gknn.halfvec) with search_path = public');
SELECT is((SELECT gknn.sum(v)::text FROM hagg_in), '[9,15]', 'gknn.sum(gknn.halfvec) with search_path = public');
SELECT is((SELECT string_agg(v::text, ' ' ORDER BY v DESC) FROM hagg_in), '[5,9] [3,4] [1,2]',
          'ORDER BY on gknn.halfvec finds the btree opclass with search_path = public');
DROP TABLE hagg_in;
SELECT is(('[1,2.5]'::gknn.vector::gknn.halfvec(2))::text, '[1,2.5]',
          'gknn.vector -> gknn.halfvec(2) cast with search_path = public');
SELECT is(('[0.1]'::gknn.halfvec::gknn.vector)::text, '[0.099975586]',
          'gknn.halfvec -> gknn.vector cast with search_path = public');
SELECT is((ARRAY[1,2,3]::int[]::gknn.halfvec(3))::text, '[1,2,3]',
          'int[] -> gknn.halfvec(3) cast with search_path = public');
SELECT is('[1.5,2]'::gknn.halfvec::real[], ARRAY[1.5,2]::real[],
          'gknn.halfvec -> real[] cast with search_path = public');
SELECT is(('[0,1.5]'::gknn.halfvec::gknn.sparsevec)::text, '{2:1.5}/2',
          'gknn.halfvec -> gknn.sparsevec cast with search_path = public');
SELECT is(('{2:0.1}/2'::gknn.sparsevec::gknn.halfvec)::text, '[0,0.099975586]',
          'gknn.sparsevec -> gknn.halfvec cast with search_path = public');
SELECT throws_ok($$SELECT '[1,2,3]'::gknn.halfvec(2)$$, '22000', 'expected 2 dimensions, not 3',
                 'the halfvec(n) typmod check with search_path = public');
SELECT throws_ok($$SELECT '[70000]'::gknn.halfvec$$, '22003', '"70000" is out of range for type halfvec',
                 'halfvec''s range error with search_path = public');
SELECT is(encode(gknn.halfvec_send('[1]'), 'hex'), '000100003c00',
          'gknn.halfvec_send with search_path = public');
SET LOCAL search_path = '';
CREATE TEMP TABLE half_empty_path AS
SELECT ('[1,2]'::gknn.halfvec OPERATOR(gknn.<->) '[2,3]'::gknn.halfvec) = pg_catalog.sqrt(2::float8) AS l2,
       (SELECT gknn.avg(v)::text FROM (VALUES ('[1,2]'::gknn.halfvec), ('[3,4]')) t(v)) AS avg,
       (SELECT gknn.sum(v)::text FROM (VALUES ('[1,2]'::gknn.halfvec), ('[3,4]')) t(v)) AS sum,
       (SELECT pg_catalog.string_agg(v::text, ' ' ORDER BY v)
          FROM (VALUES ('[2]'::gknn.halfvec), ('[1,5]'), ('[1]')) t(v)) AS sorted,
       ('{1,2}'::float8[]::gknn.halfvec)::text AS cast,
       ('[1]'::gknn.vector OPERATOR(gknn.||) '[2]'::gknn.vector)::text AS concat,
       ('[1]'::gknn.vector::gknn.halfvec OPERATOR(gknn.||) '[2]'::gknn.halfvec)::text AS half_concat;
SET LOCAL search_path = public;
SELECT results_eq('SELECT l2, avg, sum, sorted, "cast", concat, half_concat FROM pg_temp.half_empty_path',
                  $$VALUES (true, '[2,3]', '[4,6]', '[1] [1,5] [2]', '[1,2]', '[1,2]', '[1,2]')$$,
                  'halfvec operators, aggregates, ORDER BY, casts and || work with an empty search_path');
DROP TABLE pg_temp.half_empty_path;

-- The same with an empty search_path (only pg_catalog and pg_temp).
SET LOCAL search_path = '';
CREATE TEMP TABLE empty_path AS
SELECT ('[1,2]'::gknn.vector OPERATOR(gknn.<->) '[2,3]'::gknn.vector) = pg_catalog.sqrt(2::float8) AS l2,
       (SELECT gknn.avg(v)::text FROM (VALUES ('[1,2]'::gknn.vector), ('[3,4]')) t(v)) AS avg,
       (SELECT gknn.sum(v)::text FROM (VALUES ('[1,2]'::gknn.vector), ('[3,4]')) t(v)) AS sum,
       (SELECT pg_catalog.string_agg(v::text, ' ' ORDER BY v)
          FROM (VALUES ('[2]'::gknn.vector), ('[1,5]'), ('[1]')) t(v)) AS sorted,
       ('{1,2}'::float8[]::gknn.vector)::text AS cast,
       (SELECT pg_catalog.string_agg(v::text, ' ' ORDER BY v)
          FROM (VALUES ('{2:1}/2'::gknn.sparsevec), ('{1:1}/2')) t(v)) AS sparse_sorted,
       ('[0,3]'::gknn.vector::gknn.sparsevec OPERATOR(gknn.<->) '{2:3}/2'::gknn.sparsevec) AS sparse_l2,
       (B'110' OPERATOR(gknn.<~>) gknn.binary_quantize('[1,1,1]'::gknn.vector)) AS hamming;
SET LOCAL search_path = public;
SELECT results_eq('SELECT l2, avg, sum, sorted, "cast", sparse_sorted, sparse_l2, hamming FROM pg_temp.empty_path',
                  $$VALUES (true, '[2,3]', '[4,6]', '[1] [1,5] [2]', '[1,2]', '{2:1}/2 {1:1}/2', 0::float8, 1::float8)$$,
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
                  WHERE p.proname IN ('vector', 'array_to_vector', 'vector_to_float4', 'sparsevec',
                                      'vector_to_sparsevec', 'sparsevec_to_vector', 'array_to_sparsevec')$$,
                'DROP EXTENSION removes the casts');
SELECT is_empty($$SELECT 1 FROM pg_am WHERE amname IN ('gpu_ivfpq', 'gpu_graph')$$,
                'DROP EXTENSION removes gpu_ivfpq and gpu_graph');
SELECT is_empty($$SELECT 1 FROM pg_cast c JOIN pg_proc p ON p.oid = c.castfunc
                  WHERE p.proname IN ('halfvec', 'array_to_halfvec', 'halfvec_to_float4', 'halfvec_to_vector',
                                      'vector_to_halfvec', 'halfvec_to_sparsevec', 'sparsevec_to_halfvec')$$,
                'DROP EXTENSION removes the casts of halfvec');
SELECT is(public.l2_norm(ROW(1)::public.halfvec), -3, 'public.halfvec and public.l2_norm still work');
SELECT is((ROW(1)::public.vector || ROW(2)::public.vector)::text, '(-4)', 'public.|| on public.vector still works');
SELECT is((SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ')
           FROM pg_attribute WHERE attrelid = (SELECT typrelid FROM pg_type
                                               WHERE oid = 'public.vector'::regtype)
             AND attnum > 0),
          'x integer', 'public.vector is intact');
SELECT is(ROW(7)::public.vector::text, '(7)', 'public.vector still works');
SELECT is(public.l2_norm(ROW(1)::public.sparsevec), -2, 'public.sparsevec and public.l2_norm still work');
SELECT is(B'1' <~> B'0', -7, 'public.<~> on bit still works');

SELECT * FROM finish();
ROLLBACK;
