-- A gpu_ivfpq build gives the same index wherever its training and encoding
-- run: with gknn.device = auto, through the GPU service where gknn is
-- preloaded (gknn.service = gpu or cpu), else on the backend's own device;
-- with gknn.device = cpu, on the backend's CPU. The same pages byte for byte
-- (past each page's LSN and checksum), the same gknn_ivfpq_info, the same
-- answers; REINDEX too. This file passes with and without the preload
-- (run-all.sh runs it both ways).
SET client_min_messages = warning;
CREATE EXTENSION pageinspect;

-- md5 of an index's pages, each past its LSN and checksum (10 bytes)
CREATE FUNCTION index_pages(idx regclass) RETURNS text LANGUAGE sql AS $$
  SELECT md5(string_agg(substr(get_raw_page(idx::text, b::int), 11), ''::bytea ORDER BY b))
  FROM generate_series(0, pg_relation_size(idx) / 8192 - 1) b $$;
CREATE FUNCTION index_info(idx regclass) RETURNS text LANGUAGE sql AS $$
  SELECT row(i.*)::text FROM gknn_ivfpq_info(idx) i $$;
-- the ids an index scan returns for `nq` queries, k = 10, 4 probes
CREATE FUNCTION answers(tab regclass, op text, nq int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('gknn.ivfpq_probes', '4', true);
  EXECUTE format('SELECT string_agg(ids, '';'' ORDER BY q) FROM (SELECT q, (SELECT string_agg(id::text, '','') FROM
                    (SELECT id FROM %s ORDER BY emb %s (SELECT emb FROM %s WHERE id = q) LIMIT 10) s) AS ids
                  FROM generate_series(1, %s) q) t', tab, op, tab, nq) INTO r;
  RETURN r;
END $$;
-- builds `tab`'s index with `opts` on the backend's CPU and with
-- gknn.device = auto: pages, info and answers equal, then after REINDEX
CREATE FUNCTION same_build(tab text, opclass text, op text, opts text)
RETURNS TABLE (same_pages bool, same_info bool, same_answers bool, same_after_reindex bool)
LANGUAGE plpgsql AS $$
DECLARE cpu_pages text; cpu_info text; cpu_answers text;
BEGIN
  PERFORM set_config('gknn.device', 'cpu', true);
  EXECUTE format('CREATE INDEX %I ON %I USING gpu_ivfpq (emb %s) WITH (%s)', tab || '_cpu', tab, opclass, opts);
  cpu_pages := index_pages((tab || '_cpu')::regclass);
  cpu_info := index_info((tab || '_cpu')::regclass);
  cpu_answers := answers(tab::regclass, op, 20);
  EXECUTE format('DROP INDEX %I', tab || '_cpu');
  PERFORM set_config('gknn.device', 'auto', true);
  EXECUTE format('CREATE INDEX %I ON %I USING gpu_ivfpq (emb %s) WITH (%s)', tab || '_dev', tab, opclass, opts);
  same_pages := index_pages((tab || '_dev')::regclass) = cpu_pages;
  same_info := index_info((tab || '_dev')::regclass) = cpu_info;
  same_answers := answers(tab::regclass, op, 20) = cpu_answers;
  EXECUTE format('REINDEX INDEX %I', tab || '_dev');
  same_after_reindex := index_pages((tab || '_dev')::regclass) = cpu_pages;
  RETURN NEXT;
END $$;

SELECT setseed(0.17);
-- l2: 3000 rows in 12 dimensions, NULLs, a sample smaller than the table
CREATE TABLE bs_l2 (id int, emb vector(12));
INSERT INTO bs_l2 SELECT i, CASE WHEN i % 97 = 0 THEN NULL ELSE
  ARRAY(SELECT (i % 5) * 2 + random() FROM generate_series(1, 12) j)::float8[]::vector END
FROM generate_series(1, 3000) i;
SELECT * FROM same_build('bs_l2', 'vector_l2_ops', '<->', 'lists = 20, m = 6, training_sample = 1500');
-- cosine: 1000 rows in 16 dimensions, 4-bit codes, some zero vectors
CREATE TABLE bs_cos (id int, emb vector(16));
INSERT INTO bs_cos SELECT i, CASE WHEN i % 101 = 0 THEN array_fill(0, ARRAY[16])::vector ELSE
  ARRAY(SELECT random() - 0.5 FROM generate_series(1, 16) j)::float8[]::vector END
FROM generate_series(1, 1000) i;
SELECT * FROM same_build('bs_cos', 'vector_cosine_ops', '<=>', 'lists = 8, m = 8, nbits = 4');
-- inner product: 600 rows in 6 dimensions, more lists than rows sampled
CREATE TABLE bs_ip (id int, emb vector);
INSERT INTO bs_ip SELECT i, ARRAY(SELECT random() * 4 - 2 FROM generate_series(1, 6) j)::float8[]::vector
FROM generate_series(1, 600) i;
SELECT * FROM same_build('bs_ip', 'vector_ip_ops', '<#>', 'lists = 64, m = 3, training_sample = 40');

DROP TABLE bs_l2, bs_cos, bs_ip;
DROP FUNCTION same_build, answers, index_info, index_pages;
DROP EXTENSION pageinspect;
