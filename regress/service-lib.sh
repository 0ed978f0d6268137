# What the GPU service's live tests (service-live.sh, service-delta.sh,
# service-graph.sh) share, sourced after setting DB: live-lib.sh, and
# helpers that read the service's state, set its budget and signal it.
. "$(dirname "${BASH_SOURCE[0]}")/live-lib.sh"

status() { sql -c "SELECT $1 FROM gknn_service_status()"; }  # status COLUMN-OR-EXPRESSION
service_pid() { status pid; }
set_limit() {  # set_limit SIZE: gknn.gpu_memory_limit
  "$PSQL" -X -qAt -d postgres -c "ALTER SYSTEM SET gknn.gpu_memory_limit = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
}
reset_limit() {
  "$PSQL" -X -qAt -d postgres -c "ALTER SYSTEM RESET gknn.gpu_memory_limit" -c "SELECT pg_reload_conf()" >/dev/null
}
# sqlstate_is EXPECTED STATEMENTS: the PL/pgSQL STATEMENTS raise SQLSTATE
# EXPECTED ('no error' when they raise none).
sqlstate_is() {
  equal "$1" "
  CREATE TEMP TABLE e (s text);
  DO \$\$ BEGIN $2;
  INSERT INTO e VALUES ('no error'); EXCEPTION WHEN OTHERS THEN INSERT INTO e VALUES (SQLSTATE); END \$\$;
  SELECT s FROM e"
}
# index_pages(regclass), a function in $DB: the md5 of an index's pages past
# each page's LSN and checksum (two builds' pages compare equal).
create_index_pages() {
  sql >/dev/null <<'SQL'
CREATE EXTENSION pageinspect;
CREATE FUNCTION index_pages(idx regclass) RETURNS text LANGUAGE sql AS $$
  SELECT md5(string_agg(substr(get_raw_page(idx::text, b::int), 11), ''::bytea ORDER BY b))
  FROM generate_series(0, pg_relation_size(idx) / 8192 - 1) b $$;
SQL
}
# pgbench_ok SESSIONS THREADS [SCRIPT]: SCRIPT ($tmp/check.sql) run 15 times
# by each session at once, with no error.
pgbench_ok() {
  "$PGBENCH" -n -c "$1" -j "$2" -t 15 -f "${3:-$tmp/check.sql}" "$DB" >"$tmp/pgbench.log" 2>&1
  local rc=$?
  cat "$tmp/pgbench.log"
  ((rc == 0)) && ! grep -q -i 'aborted\|error' "$tmp/pgbench.log"
}
# timeout_ok QUERY: a 300 ms statement_timeout ends QUERY (waiting for the
# stopped service) within 1.3 s.
timeout_ok() {
  local t0 t1 out
  t0=$(ms_now)
  out=$(sql -c "SET statement_timeout = 300" -c "$1" 2>&1)
  t1=$(ms_now)
  echo "$out; $((t1 - t0)) ms"
  grep -q 'statement timeout' <<<"$out" && ((t1 - t0 < 1300))
}
# cancel_ok QUERY PREFIX: QUERY (its text starting with PREFIX, a LIKE
# pattern), waiting for the stopped service, ends within a second of
# pg_cancel_backend.
cancel_ok() {
  local t0 t1 pid
  sql -c "$1" >"$tmp/cancel.out" 2>&1 &
  local bg=$!
  wait_for "(SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '$2%' AND wait_event_type = 'Extension')" ||
    return 1
  pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '$2%'")
  t0=$(ms_now)
  sql -c "SELECT pg_cancel_backend($pid)" >/dev/null
  wait "$bg"
  t1=$(ms_now)
  cat "$tmp/cancel.out"
  echo "cancelled after $((t1 - t0)) ms"
  grep -q 'canceling statement due to user request' "$tmp/cancel.out" && ((t1 - t0 < 1000))
}
# terminate_while_queued OUT SQL-ARGS...: `sql SQL-ARGS` in the background
# (its output in OUT) while the service is stopped; once its request is
# queued, the service is terminated (SIGTERM) and let go, and the client
# waited for: its status in client_rc. False when the request was never
# queued (the client is left running).
terminate_while_queued() {
  local out=$1 pid
  shift
  wait_for "(SELECT state = 'ready' FROM gknn_service_status())" 100 || return 1
  pid=$(service_pid)
  kill -STOP "$pid"
  sql "$@" >"$out" 2>&1 &
  local bg=$!
  wait_for "(SELECT queued = 1 FROM gknn_service_status())" || { kill -CONT "$pid"; return 1; }
  kill -TERM "$pid"
  kill -CONT "$pid"
  wait "$bg"
  client_rc=$?
}
# restarted_since N: the service is ready again, restarted once since its
# restart count was N (within 10 s).
restarted_since() {
  wait_for "(SELECT state = 'ready' AND restarts = $1 + 1 FROM gknn_service_status())" 100
}
# fallback_ok QUERY EXPECTED: QUERY (gknn.device = auto) waits for the
# stopped service, which is then terminated; the backend's CPU answers
# EXPECTED, and the postmaster restarts the service.
fallback_ok() {
  local restarts out
  restarts=$(status restarts)
  terminate_while_queued "$tmp/auto.out" -c "$1" || return 1
  out=$(cat "$tmp/auto.out")
  echo "auto: $out (expected $2)"
  [ "$out" = "$2" ] || return 1
  restarted_since "$restarts"
}
# wait_service_replaced PID: up to a minute for a ready service other than
# PID (until the postmaster has reset the cluster after a SIGKILL, the old
# shared memory still says "ready"); false when none came.
wait_service_replaced() {
  wait_for "(SELECT state = 'ready' AND pid <> $1 FROM gknn_service_status())" 600
}
