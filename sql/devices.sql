-- Device GUCs and functions; output is the same with and without a GPU
-- (device-specific checks are in regress/pgtap).
-- The GUCs exist once the library is loaded (any gknn function loads it).
-- Values SET before the load are kept (placeholders until then), for every
-- module's settings.
SET gknn.ivfpq_probes = 3;
SET gknn.topk_min_rows = 7;
SET gknn.device = 'cpu';
LOAD 'gknn';
SELECT current_setting('gknn.ivfpq_probes') AS probes, current_setting('gknn.topk_min_rows') AS min_rows,
       current_setting('gknn.device') AS device;
RESET ALL;
SELECT name, boot_val, enumvals FROM pg_settings WHERE name LIKE 'gknn.%' ORDER BY name;
SET gknn.device = 'cpu';
SELECT gknn_current_device();
SELECT count(*) AS in_use FROM gknn_devices() WHERE in_use;
SET gknn.device = 'bogus';
SET gknn.gpu_id = -1;
SET gknn.no_such_setting = 1;
RESET gknn.device;
SELECT gknn_version() ~ '^0\.1\.0 \(CUDA runtime \d+\.\d+\)$' AS version_ok;
SELECT count(*) >= 0 AS listed FROM gknn_devices();
SELECT pg_typeof(ordinal), pg_typeof(name), pg_typeof(total_memory), pg_typeof(compute_capability), pg_typeof(in_use)
FROM gknn_devices() RIGHT JOIN (VALUES (1)) v(x) ON true LIMIT 1;
