-- Comparison operators and the btree opclass.
SELECT '[1,2,3]'::vector < '[1,2,4]' AS lt, '[1,2,3]'::vector <= '[1,2,3]' AS le,
       '[1,2,3]'::vector = '[1,2,3]' AS eq, '[1,2,3]'::vector <> '[1,2,3]' AS ne,
       '[1,2,4]'::vector >= '[1,2,3]' AS ge, '[2]'::vector > '[1,9]' AS gt;
-- A shorter vector sorts before a longer one with the same prefix
SELECT '[1,2]'::vector < '[1,2,0]' AS shorter_first, '[-0]'::vector = '[0]' AS zeros_equal;
SELECT vector_cmp('[1,2]', '[1,3]'), vector_cmp('[1,3]', '[1,2]'), vector_cmp('[1]', '[1]');
CREATE TABLE cmp_t (id int, v vector);
INSERT INTO cmp_t VALUES (1, '[3,1]'), (2, '[1,2,3]'), (3, '[1,2]'), (4, '[-1,5]'), (5, '[1,2]'), (6, NULL);
SELECT id, v FROM cmp_t ORDER BY v, id;
SELECT v, count(*) FROM cmp_t GROUP BY v ORDER BY v;
SELECT DISTINCT v FROM cmp_t WHERE v IS NOT NULL ORDER BY v DESC;
CREATE INDEX cmp_t_v ON cmp_t USING btree (v);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM cmp_t WHERE v = '[1,2]';
SELECT id FROM cmp_t WHERE v = '[1,2]' ORDER BY id;
SELECT id FROM cmp_t WHERE v > '[1,2]' ORDER BY v, id;
RESET enable_seqscan;
DROP TABLE cmp_t;
