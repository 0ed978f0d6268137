# What the shell-driven live tests share (sourced after setting DB, the
# database they own): the TAP helpers (tap.sh), the clients
# (GKNN_PSQL, GKNN_PGBENCH), and helpers that talk to database $DB of the
# running server (PGHOST/PGPORT/PGUSER). regress/service-lib.sh adds the
# GPU service's.
PSQL=${GKNN_PSQL:-psql}
PGBENCH=${GKNN_PGBENCH:-pgbench}
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"

sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
equal() {  # equal EXPECTED SQL: the query's output is EXPECTED
  local got
  got=$(sql -c "$2") || return 1
  [ "$got" = "$1" ] || { echo "expected: $1"; echo "got: $got"; return 1; }
}
wait_for() {  # wait_for SQL-CONDITION [TENTHS]: true within the time
  local i
  for ((i = 0; i < ${2:-100}; i++)); do
    [ "$(sql -c "SELECT ($1)" 2>/dev/null)" = t ] && return 0
    sleep 0.1
  done
  echo "still false: $1"
  return 1
}
wait_ready() {  # the server accepts queries again (after crash recovery)
  local i
  for ((i = 0; i < 120; i++)); do
    "$PSQL" -X -qAt -d postgres -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
ms_now() { date +%s%3N; }
# fresh_db: database $DB made anew (dropped first if left by an earlier run).
fresh_db() {
  "$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" \
    -c "CREATE DATABASE $DB" >/dev/null
}
# fresh_gknn_db: the same, with gknn created in it.
fresh_gknn_db() { fresh_db && sql -c 'CREATE EXTENSION gknn' >/dev/null; }
drop_db() { "$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1; }
