-- gpu_ivfpq VACUUM on chain pages holding more items than an index page of
-- ordinary index tuples can (the NULL chain's TID-only items: 676 to a page,
-- more than PostgreSQL's MaxIndexTuplesPerPage of 408; list items of 2-d
-- vectors, TID + code + the stored vector, come close): dead items go, the
-- rest stay found, and the backend survives (it crashed once, in
-- PageIndexMultiDelete).
CREATE TABLE ivf_v (id int, emb vector(2));
INSERT INTO ivf_v SELECT i, ARRAY[i % 10, i % 7]::real[]::vector FROM generate_series(1, 1500) i;
INSERT INTO ivf_v SELECT i, NULL FROM generate_series(1501, 2300) i;
CREATE INDEX ivf_v_idx ON ivf_v USING gpu_ivfpq (emb) WITH (lists = 1, m = 1, nbits = 4);
SELECT entries, nulls, pages FROM gknn_ivfpq_info('ivf_v_idx');
DELETE FROM ivf_v WHERE id % 3 = 0;
VACUUM ivf_v;
SELECT entries, nulls FROM gknn_ivfpq_info('ivf_v_idx');
SET enable_seqscan = off;
SELECT count(*), count(*) FILTER (WHERE id % 3 = 0) AS deleted_returned
FROM (SELECT id FROM ivf_v ORDER BY emb <-> '[1,1]' LIMIT 3000) s;
DROP TABLE ivf_v;
