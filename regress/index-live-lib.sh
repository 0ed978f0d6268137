# What graph-live.sh and ivfpq-live.sh share (sourced after live-lib.sh):
# the same concurrency workload and the same crash, on an index each
# access method makes its own way (USING: e.g. "gpu_graph (emb) WITH
# (degree = 8)").

# concurrent_workload USING: table t (3000 rows of 8 dimensions) indexed
# USING, then 4 pgbench sessions insert, search, delete and vacuum it (a check).
concurrent_workload() {
  sql >/dev/null <<SQL
CREATE TABLE t (id bigserial PRIMARY KEY, emb vector(8));
INSERT INTO t (emb)
SELECT ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 3000) i;
CREATE INDEX t_emb ON t USING $1;
SQL
  cat >"$tmp/insert.sql" <<'SQL'
\set i random(1, 100000)
INSERT INTO t (emb) SELECT ARRAY(SELECT ((:i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector;
SQL
  cat >"$tmp/query.sql" <<'SQL'
\set i random(1, 1000000)
SELECT id FROM t ORDER BY emb <-> (SELECT ARRAY(SELECT ((:i * 31 + j * 17) % 101) / 101.0 FROM generate_series(1, 8) j)::float8[]::vector) LIMIT 10;
SQL
  cat >"$tmp/delete.sql" <<'SQL'
\set i random(1, 6000)
DELETE FROM t WHERE id = :i;
SQL
  cat >"$tmp/vacuum.sql" <<'SQL'
VACUUM t;
SQL
  check "pgbench: 4 sessions insert, search, delete and vacuum concurrently without errors" \
    "$PGBENCH" -n -c 4 -j 2 -t 150 -f "$tmp/insert.sql@10" -f "$tmp/query.sql@10" \
    -f "$tmp/delete.sql@3" -f "$tmp/vacuum.sql@1" "$DB"
}

# crash_while_inserting USING APPNAME: after a checkpoint, table c (2000
# rows) indexed USING, and a backend (application_name APPNAME) inserting
# into it is killed with SIGKILL: the postmaster resets every backend and
# replays WAL, where the index build and the inserts are (checks: it ran,
# the server recovered, some inserts were committed).
crash_while_inserting() {
  sql -c 'CHECKPOINT' >/dev/null
  sql >/dev/null <<SQL
CREATE TABLE c (id bigserial PRIMARY KEY, emb vector(8));
INSERT INTO c (emb)
SELECT ARRAY(SELECT ((i * 7919 + j * 104729) % 1009) / 1009.0 FROM generate_series(1, 8) j)::float8[]::vector
FROM generate_series(1, 2000) i;
CREATE INDEX c_emb ON c USING $1;
CREATE PROCEDURE fill() LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..100000 LOOP
    INSERT INTO c (emb) SELECT ARRAY(SELECT ((i * 31 + j * 7) % 997) / 997.0 FROM generate_series(1, 8) j)::float8[]::vector
      FROM generate_series(1, 5);
    IF i % 3 = 0 THEN COMMIT; END IF;
  END LOOP;
END \$\$;
SQL
  local filler pid
  PGAPPNAME=$2 "$PSQL" -X -q -d "$DB" -c 'CALL fill()' >/dev/null 2>&1 &
  filler=$!
  sleep 3
  pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$2'")
  check "a backend inserting into the index is running" test -n "$pid"
  [ -n "$pid" ] && kill -9 "$pid"
  wait "$filler" 2>/dev/null
  check "the server recovers after the backend is killed" wait_ready
  check "after the crash some inserted rows were committed" equal t "SELECT count(*) > 2000 FROM c"
}
