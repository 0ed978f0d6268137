-- gpu_ivfpq maintenance: inserts after the build are found, DELETE + VACUUM
-- remove entries, REINDEX rebuilds, the generation counts changes, an
-- interrupted build leaves nothing behind.
SET client_min_messages = notice;

CREATE TABLE ivf_m (id int PRIMARY KEY, emb vector(6));
INSERT INTO ivf_m
SELECT i, ARRAY(SELECT (i % 5) * 4 + ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 6) j)::float8[]::vector
FROM generate_series(1, 1000) i;
CREATE INDEX ivf_m_idx ON ivf_m USING gpu_ivfpq (emb) WITH (lists = 10, m = 3);
SELECT entries, pending, nulls, generation FROM gknn_ivfpq_info('ivf_m_idx');

SET enable_seqscan = off;
-- rows inserted after the build: found first when they are the nearest
INSERT INTO ivf_m VALUES (2001, '[100,100,100,100,100,100]'), (2002, '[100,100,100,100,100,101]'),
                         (2003, NULL);
SELECT entries, nulls, generation FROM gknn_ivfpq_info('ivf_m_idx');
SELECT id FROM ivf_m ORDER BY emb <-> '[100,100,100,100,100,100.2]' LIMIT 2;
-- many inserts (new list pages) in one transaction
INSERT INTO ivf_m
SELECT i, ARRAY(SELECT 50 + ((i * 31 + j * 7) % 97) / 97.0 FROM generate_series(1, 6) j)::float8[]::vector
FROM generate_series(3001, 4000) i;
SELECT entries, nulls FROM gknn_ivfpq_info('ivf_m_idx');
SET gknn.ivfpq_probes = 10;
SET gknn.ivfpq_refine = 1000;
SELECT count(*) FILTER (WHERE id BETWEEN 3001 AND 4000) AS new_rows, count(*) AS all_rows
FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[50.5,50.5,50.5,50.5,50.5,50.5]' LIMIT 1000) s;
-- an aborted insert leaves an entry the scan skips
BEGIN;
INSERT INTO ivf_m VALUES (5000, '[50.5,50.5,50.5,50.5,50.5,50.5]');
ROLLBACK;
SELECT (SELECT id FROM ivf_m ORDER BY emb <-> '[50.5,50.5,50.5,50.5,50.5,50.5]' LIMIT 1) = 5000 AS aborted_row_returned;
SELECT count(*) FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[50.5,50.5,50.5,50.5,50.5,50.5]' LIMIT 5000) s;

-- DELETE + VACUUM: entries removed, the rest still found
DELETE FROM ivf_m WHERE id % 2 = 0;
VACUUM ivf_m;
SELECT entries, nulls FROM gknn_ivfpq_info('ivf_m_idx');
SELECT count(*) FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[1,1,1,1,1,1]' LIMIT 5000) s;
SELECT count(*) FROM ivf_m;
SELECT bool_and(id % 2 = 1) AS only_odd FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[1,1,1,1,1,1]' LIMIT 100) s;
-- VACUUM VERBOSE-like numbers through pg_class
SELECT reltuples FROM pg_class WHERE relname = 'ivf_m_idx';
-- delete everything
DELETE FROM ivf_m;
VACUUM ivf_m;
SELECT entries, nulls FROM gknn_ivfpq_info('ivf_m_idx');
SELECT count(*) FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[1,1,1,1,1,1]' LIMIT 10) s;
-- and insert again into the emptied pages
INSERT INTO ivf_m
SELECT i, ARRAY(SELECT (i % 5) * 4 + ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 6) j)::float8[]::vector
FROM generate_series(1, 500) i;
SELECT entries FROM gknn_ivfpq_info('ivf_m_idx');
SELECT count(*) FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[1,1,1,1,1,1]' LIMIT 600) s;

-- REINDEX: same rows found, generation back to 1
REINDEX INDEX ivf_m_idx;
SELECT entries, generation FROM gknn_ivfpq_info('ivf_m_idx');
SELECT count(*) FROM (SELECT id FROM ivf_m ORDER BY emb <-> '[1,1,1,1,1,1]' LIMIT 600) s;
REINDEX TABLE ivf_m;
SELECT entries FROM gknn_ivfpq_info('ivf_m_idx');
-- TRUNCATE: an empty, untrained index
TRUNCATE ivf_m;
SELECT trained, entries FROM gknn_ivfpq_info('ivf_m_idx');
INSERT INTO ivf_m VALUES (1, '[1,2,3,4,5,6]');
SELECT id FROM ivf_m ORDER BY emb <-> '[1,2,3,4,5,6]' LIMIT 1;
RESET enable_seqscan;
RESET gknn.ivfpq_probes;
RESET gknn.ivfpq_refine;

-- a cancelled build (statement_timeout) leaves no index
INSERT INTO ivf_m
SELECT i, ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 6) j)::float8[]::vector
FROM generate_series(2, 20000) i;
SET statement_timeout = '20ms';
CREATE INDEX ivf_m_slow ON ivf_m USING gpu_ivfpq (emb) WITH (lists = 1000, m = 6, kmeans_iters = 1000);
RESET statement_timeout;
SELECT count(*) FROM pg_class WHERE relname = 'ivf_m_slow';

DROP TABLE ivf_m;
