-- Distance operators and functions, norms, arithmetic.
SELECT '[1,2,3]'::vector <-> '[4,5,6]' AS l2,
       '[1,2,3]'::vector <#> '[4,5,6]' AS neg_ip,
       '[1,2,3]'::vector <=> '[4,5,6]' AS cosine,
       '[1,2,3]'::vector <+> '[4,5,6]' AS l1;
SELECT l2_distance('[0,0]'::vector, '[3,4]'), inner_product('[1,2]'::vector, '[3,4]'),
       cosine_distance('[1,0]'::vector, '[0,1]'), l1_distance('[1,-2]'::vector, '[-1,2]');
SELECT cosine_distance('[1,2]'::vector, '[2,4]'), cosine_distance('[1,2]'::vector, '[-1,-2]');
-- Cosine distance with a zero vector is NaN (sorts last, as PostgreSQL orders float8)
SELECT cosine_distance('[0,0]'::vector, '[1,2]'), '[0,0]'::vector <=> '[0,0]';
SELECT '[1,1]'::vector <-> '[1,1]' AS zero, '[1e30,1e30]'::vector <-> '[-1e30,-1e30]' AS inf_l2;
-- Operators are commutative
SELECT ('[1,5,2]'::vector <-> '[3,1,4]') = ('[3,1,4]'::vector <-> '[1,5,2]') AS commutes;
SELECT vector_dims('[1,2,3]'), vector_norm('[3,4]'), vector_norm('[0,0]');
SELECT l2_normalize('[3,4]'::vector), l2_normalize('[0,0]'::vector), l2_normalize('[1e-45,0]'::vector);
SELECT subvector('[1,2,3,4,5]', 1, 3), subvector('[1,2,3,4,5]', 3, 2),
       subvector('[1,2,3,4,5]', -1, 3), subvector('[1,2,3,4,5]', 4, 10);
SELECT subvector('[1,2,3,4,5]', 1, 2147483647), subvector('[1,2,3,4,5]', 5, 1);
SELECT subvector('[1,2,3,4,5]', 6, 1);
SELECT subvector('[1,2,3,4,5]', 3, 0);
SELECT subvector('[1,2,3,4,5]', -3, 3);
SELECT subvector('[1,2,3,4,5]', 2, -1);
SELECT '[1,2,3]'::vector + '[4,5,6]', '[1,2,3]'::vector - '[4,5,6]', '[1,2,3]'::vector * '[4,5,6]';
SELECT '[3e38]'::vector + '[3e38]';
SELECT '[-3e38]'::vector - '[3e38]';
SELECT '[1e38]'::vector * '[1e38]';
SELECT '[1e-38]'::vector * '[1e-38]';
-- Mismatched dimensions
SELECT '[1,2]'::vector <-> '[1,2,3]';
SELECT '[1,2]'::vector <#> '[1,2,3]';
SELECT '[1,2]'::vector <=> '[1,2,3]';
SELECT '[1,2]'::vector <+> '[1,2,3]';
SELECT inner_product('[1,2]'::vector, '[1,2,3]');
SELECT '[1,2]'::vector + '[1,2,3]';
SELECT '[1,2]'::vector - '[1,2,3]';
SELECT '[1,2]'::vector * '[1,2,3]';
-- NULLs propagate (strict functions)
SELECT l2_distance(NULL, '[1]'::vector) IS NULL AS null_in_null_out, vector_dims(NULL) IS NULL AS dims_null;
-- Nearest neighbours by each operator
CREATE TABLE ops_t (id int, v vector(2));
INSERT INTO ops_t VALUES (1, '[1,1]'), (2, '[2,2]'), (3, '[-1,-1]'), (4, '[0,0]'), (5, '[1,1]'), (6, NULL);
SELECT id, v <-> '[1,1]' AS d FROM ops_t ORDER BY v <-> '[1,1]', id LIMIT 4;
SELECT id, v <#> '[1,1]' AS d FROM ops_t ORDER BY v <#> '[1,1]', id LIMIT 4;
SELECT id, v <=> '[1,1]' AS d FROM ops_t ORDER BY v <=> '[1,1]', id;
SELECT id, v <+> '[1,1]' AS d FROM ops_t ORDER BY v <+> '[1,1]', id LIMIT 4;
DROP TABLE ops_t;
