#!/usr/bin/env bash
# SQL-level fuzzing of gknn against a running server (PGHOST/PGPORT/PGUSER, a
# superuser), as TAP: regress/sql_fuzz_gen.py writes batches of random calls
# of every SQL-callable gknn function, operator and aggregate with hostile
# arguments, and gpu_ivfpq and gpu_graph builds, inserts and scans and GpuTopK plans over
# tables of hostile rows (seeded: the same batches every run; batch-000-*
# hold the known crashers, one group each). Errors are expected; a crash is the failure:
#   - per batch: the server log (GKNN_SERVER_LOG, when given) gains no
#     "server process ... was terminated" / "exited with exit code" / PANIC
#     line, and psql did not lose its connection;
#   - at the end: a sentinel session opened before the first batch is still
#     there (a crashed backend makes the postmaster end every session), and
#     the whole log since the start is clean.
# Used by regress/run-all.sh (stage sql-fuzz), before the stages that kill
# backends on purpose.
#
#   regress/sql-fuzz.sh    GKNN_PSQL (client), GKNN_SERVER_LOG (the log file),
#                          GKNN_FUZZ_SEED (2), GKNN_FUZZ_BATCHES (30)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SEED=${GKNN_FUZZ_SEED:-2}
BATCHES=${GKNN_FUZZ_BATCHES:-30}
LOG=${GKNN_SERVER_LOG:-}
DB=gknn_sql_fuzz
# The postmaster's lines for a backend that died, and glibc's and the stack
# protector's (written to the same log) for the heap or stack it corrupted.
CRASH_RE='server process \(PID [0-9]+\) (was terminated|exited with exit code)|terminating any other active server processes|PANIC:|double free or corruption|malloc\(\): |free\(\): invalid|corrupted size vs|corrupted double-linked|stack smashing detected'
. regress/live-lib.sh

log_size() { if [ -r "$LOG" ]; then stat -c %s "$LOG"; else echo 0; fi; }
# Crash lines the log gained after byte $1 (nothing when there is no log).
crashes_since() { [ -r "$LOG" ] && tail -c +"$(($1 + 1))" "$LOG" | grep -aE -A1 "$CRASH_RE"; true; }

if ! command -v python3 >/dev/null; then
  echo "1..0 # SKIP no python3 to write the batches"
  exit 0
fi
[ -n "$LOG" ] && [ ! -r "$LOG" ] && echo "# GKNN_SERVER_LOG=$LOG is not readable: crashes are seen by the sentinel only"
[ -z "$LOG" ] && echo "# no GKNN_SERVER_LOG: crashes are seen by the sentinel and psql only"
start=$(log_size)

fresh_db || exit 1
# The cast makes the datums older gknn versions could store (0, > 16000 and
# int16-wrapped dimensions): only a superuser can create it.
sql -c 'CREATE EXTENSION gknn' -c 'CREATE CAST (bytea AS vector) WITHOUT FUNCTION' >/dev/null || exit 1
python3 regress/sql_fuzz_gen.py --seed "$SEED" --batches "$BATCHES" --out "$tmp/fuzz" || exit 1

# The sentinel idles in another database (an open transaction or snapshot
# would hold up CREATE INDEX CONCURRENTLY); closing fd 9 ends it.
exec 9> >(PGAPPNAME=gknn_fuzz_sentinel exec "$PSQL" -X -q -d postgres >/dev/null 2>&1)
spid=''
for ((i = 0; i < 100; i++)); do
  spid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'gknn_fuzz_sentinel'")
  [ -z "$spid" ] || break
  sleep 0.1
done
batches=("$tmp"/fuzz/batch-*.sql)
echo "# seed $SEED, ${#batches[@]} batches, sentinel backend ${spid:-?}"

# run_batch FILE: the batch through psql (errors expected, each statement on
# its own); fails on a crash line in the log or a lost connection.
run_batch() {
  local file=$1 before rc=0 found
  before=$(log_size)
  PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=30s -c client_min_messages=error" \
    "$PSQL" -X -q -v ON_ERROR_STOP=0 -d "$DB" -f "$file" >"$tmp/batch.out" 2>"$tmp/batch.err" || rc=$?
  found=$(crashes_since "$before")
  if [ -n "$found" ] || grep -q 'connection to server was lost\|server closed the connection' "$tmp/batch.err"; then
    echo "psql exit status $rc"
    echo "$found"
    grep -m3 'lost\|closed the connection' "$tmp/batch.err"
    wait_ready
    return 1
  fi
}

for file in "${batches[@]}"; do
  name=$(basename "$file" .sql)
  stmts=$(grep -c '^[^-]' "$file")
  check "$name: $stmts statements, no backend crashed" run_batch "$file"
  echo "#   $(grep -c 'ERROR:' "$tmp/batch.err") of them raised an error"
done

check "the sentinel session (backend ${spid:-?}) outlived every batch" \
  test "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE pid = ${spid:-0}")" = 1
log_clean() {
  local found
  found=$(crashes_since "$start")
  [ -z "$found" ] || { echo "$found"; return 1; }
}
if [ -r "$LOG" ]; then
  check "the server log shows no backend terminated by a signal" log_clean
else
  n=$((n + 1))
  echo "ok $n # SKIP no server log to read"
fi
exec 9>&-
tap_end
