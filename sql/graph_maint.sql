-- gpu_graph maintenance: inserts (linked both ways, found at once), DELETE
-- and VACUUM (dead nodes out of every list, never returned, the rest still
-- found), UPDATE, REINDEX.
SET client_min_messages = notice;

CREATE TABLE gm (id int PRIMARY KEY, emb vector(8));
INSERT INTO gm
SELECT i, ARRAY(SELECT (i % 10) * 3 + ((i * 7919 + j * 104729) % 1013) / 1013.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 1000) i;
CREATE INDEX gm_idx ON gm USING gpu_graph (emb) WITH (degree = 8);
SELECT nodes, live, dead, no_in_edges FROM gknn_graph_info('gm_idx');
-- the build's entries (one per part of the graph) are flagged on their nodes
SELECT entries >= 1 AS has_entries FROM gknn_graph_info('gm_idx');
CREATE FUNCTION gm_exact(qv vector, k int) RETURNS int[] LANGUAGE sql AS
  $$SELECT array_agg(id ORDER BY d, id) FROM (SELECT id, emb <-> qv AS d FROM gm ORDER BY emb <-> qv, id LIMIT k) s$$;
CREATE FUNCTION gm_index(qv vector, k int) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  SET LOCAL enable_seqscan = off;
  SELECT array_agg(id) INTO r FROM (SELECT id FROM gm ORDER BY emb <-> qv LIMIT k) s;
  RETURN r;
END $$;

-- inserts: 200 rows (20 %), in this session and in one statement
SELECT generation AS g0 FROM gknn_graph_info('gm_idx') \gset
INSERT INTO gm
SELECT i, ARRAY(SELECT (i % 10) * 3 + ((i * 7919 + j * 104729) % 1013) / 1013.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1001, 1200) i;
SELECT nodes, live, dead, dead_edges, generation - :g0 AS changes FROM gknn_graph_info('gm_idx');
-- every new node has an edge to it
SELECT no_in_edges FROM gknn_graph_info('gm_idx');
-- a new row is its own nearest neighbour
SELECT bool_and((gm_index(emb, 1))[1] = id) FROM gm WHERE id > 1190;
-- the nearest ten of a few rows, as the exact search says
SELECT count(*) FILTER (WHERE gm_index(emb, 10) = gm_exact(emb, 10)) AS same, count(*)
FROM gm WHERE id % 100 = 7;
-- NULL inserts
INSERT INTO gm VALUES (5000, NULL);
SELECT nulls FROM gknn_graph_info('gm_idx');

-- DELETE a third, VACUUM: dead nodes marked, every list repaired
DELETE FROM gm WHERE id % 3 = 0;
VACUUM gm;
SELECT nodes, live, dead, nulls, dead_edges FROM gknn_graph_info('gm_idx');
SELECT entries >= 1 AS has_entries FROM gknn_graph_info('gm_idx');
SELECT no_in_edges FROM gknn_graph_info('gm_idx');
-- deleted rows are never returned (their TIDs may be reused)
SELECT count(*) FROM (SELECT id FROM gm ORDER BY emb <-> '[1,1,1,1,1,1,1,1]' LIMIT 2000) s WHERE id % 3 = 0;
SELECT count(*), count(DISTINCT id) FROM (
  SELECT id FROM gm ORDER BY emb <-> '[1,1,1,1,1,1,1,1]' LIMIT 2000) s;
SELECT count(*) FILTER (WHERE gm_index(emb, 10) = gm_exact(emb, 10)) AS same, count(*)
FROM gm WHERE id % 100 = 7;
-- rows inserted after the VACUUM (TIDs of deleted rows reused)
INSERT INTO gm SELECT i, ARRAY[i, 1, 1, 1, 1, 1, 1, 1]::float8[]::vector FROM generate_series(3000, 3099) i;
SELECT bool_and((gm_index(emb, 1))[1] = id) FROM gm WHERE id BETWEEN 3000 AND 3099;
-- UPDATE: a new version, the old one dead after VACUUM
UPDATE gm SET emb = '[100,100,100,100,100,100,100,100]' WHERE id = 1;
SELECT gm_index('[100,100,100,100,100,100,100,100]', 1);
VACUUM gm;
SELECT dead_edges FROM gknn_graph_info('gm_idx');
SELECT gm_index('[100,100,100,100,100,100,100,100]', 1);

-- REINDEX: the dead nodes are gone
REINDEX INDEX gm_idx;
SELECT nodes = live + nulls AS compact, dead, dead_edges FROM gknn_graph_info('gm_idx');
SELECT count(*) FILTER (WHERE gm_index(emb, 10) = gm_exact(emb, 10)) AS same, count(*)
FROM gm WHERE id % 100 = 7;

DROP TABLE gm;
DROP FUNCTION gm_exact, gm_index;
