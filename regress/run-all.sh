#!/usr/bin/env bash
# Every gknn test in one command (`make test`):
#   core unit tests (GoogleTest through ctest), the same tests built with
#   AddressSanitizer + UndefinedBehaviorSanitizer (stage asan), a short
#   libFuzzer run of every fuzz target (stage fuzz), the extension's
#   pg_regress suite (sql/, expected/) and the pgTAP files
#   regress/pgtap/*.sql, the last two against a throwaway PostgreSQL 15
#   cluster.
# The last line printed is "N passed, N failed", N counting ctest tests,
# pg_regress test files and pgTAP assertions; a stage that breaks (a build, the
# server, a crashed runner) counts as one failure. Exit status 0 only if
# nothing failed; before it, when something did, the failed stages and (at
# most 20) the failed tests by name. Logs go to build/test-logs/.
#
# The ivfpq-live stage (regress/ivfpq-live.sh, TAP, last since it crashes
# the server on purpose) runs concurrent pgbench sessions and a kill -9 of a
# backend against the gpu_ivfpq index; graph-live (regress/graph-live.sh,
# after it) the same against gpu_graph.
#
# The sql-fuzz stage (regress/sql-fuzz.sh, TAP; under a minute) calls every
# SQL-callable function and operator with hostile arguments and builds,
# fills and scans gpu_ivfpq indexes over hostile rows; it fails when the
# server log shows a backend terminated by a signal (or a sentinel session
# was ended by a crash's reset). Stage fuzz-svc runs a shorter one on the
# service stage's cluster, where index searches go through the GPU service.
#
# The dump stage (regress/dump-restore.sh, TAP) dumps a database with
# vector, halfvec, sparsevec and bit columns, their indexes, a CHECK and a
# view with pg_dump (custom and plain format) and restores it, with gknn in
# public and in its own schema.
#
# The ivfpq-recall stage (regress/ivfpq-recall.sh, TAP) asserts gpu_ivfpq's
# recall@10 on Fashion-MNIST at documented settings; the graph-recall stage
# (regress/graph-recall.sh) gpu_graph's, fresh, after inserts and after
# DELETE + VACUUM.
#
# The service stage (regress/service-live.sh, TAP, on a cluster of its own
# with gknn preloaded) checks the GPU service: answers equal to the CPU path,
# 64 concurrent sessions, eviction, cancellation, index builds through the
# service, the service killed; stage service-delta (regress/service-delta.sh,
# the same cluster, first) checks images kept fresh by deltas after inserts,
# VACUUM and during both; stage service-graph (regress/service-graph.sh,
# after it) gpu_graph searches through the service: answers equal to the CPU
# path, concurrency, cancellation, the service killed (stage
# service-graph-ring: the same with gknn.service_cpu_ring, the resident
# kernel's ring served on the CPU); stage service-topk
# (regress/service-topk.sh, after it) GpuTopK ranked in the service: answers
# equal to PostgreSQL's plan, serial and parallel, cancellation, the service
# killed; stage service-topk-dml (regress/service-topk-dml.sh, before it)
# GpuTopK through the service against PostgreSQL's plan under the same
# snapshot while other sessions UPDATE, DELETE, INSERT, VACUUM and TRUNCATE.
# On the same cluster, stages
# regress-svc and pgtap-svc run gpu_ivfpq's, gpu_graph's and GpuTopK's pg_regress files
# and GpuTopK's and gpu_ivfpq's pgTAP files again.
#
# The asan stage builds the core library and its GoogleTest binary in
# build/asan with GKNN_SANITIZE=address,undefined (host code instrumented,
# the host parts of .cu files through nvcc's host compiler; PTX for one
# architecture only, -O1) and runs the binary once; a sanitizer report
# aborts it and counts as a failure. GPU tests skip without a GPU as in the
# core stage.
#
# The fuzz stage (fuzz/run.sh, build/fuzz-test) builds the libFuzzer targets
# with clang and runs each for $GKNN_FUZZ_SECONDS (default 20) seconds from
# its committed corpus; a crash fails it (`make fuzz` runs them longer).
#
# The bench stage builds bench/ (build/bench), runs the load generator's unit
# tests (GoogleTest) and, against the same server, bench/tests/loadgen-live.sh
# (TAP): both counted under "bench". The report stage (bench/tests/report_check.py,
# TAP, no build or server) checks the results' comparison at a recall; the
# host-cpu stage (bench/tests/host_cpu_check.py, likewise) bench/host_cpu.py's
# tables of the GPU host's CPU by benchmark point.
#
# pgTAP files run in one fresh database in which `CREATE EXTENSION pgtap` and
# `CREATE EXTENSION gknn` were already run; each file should wrap itself in
# BEGIN ... ROLLBACK so that files do not see each other's objects.
#
# Environment:
#   GKNN_DEVICE=auto|gpu|cpu   run the SQL suites with -c gknn.device=... (PGOPTIONS)
#   GKNN_SKIP_APT=1            do not install packages
#   GKNN_SKIP_BUILD=1          use build/cmake and the installed extension as they are
#   GKNN_USE_SERVER=1          use the running server given by PGHOST/PGPORT/PGUSER
#                              instead of starting a throwaway cluster
#   GKNN_CORE_RUNNER=ctest|gtest  gtest runs the binaries listed in
#                              $GKNN_CORE_TESTS (a file, one path a line) directly,
#                              for hosts without CMake
#   GKNN_PG_REGRESS=make|direct   direct calls PGXS's pg_regress without make
#   GKNN_SKIP_ASAN=1, GKNN_SKIP_FUZZ=1  leave out those stages
#   GKNN_FUZZ_SECONDS=N        seconds per fuzz target (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
. regress/cluster.sh

LOGS=build/test-logs
JOBS=$(nproc)
PASSED=0
FAILED=0
SUMMARY=()   # one line per stage, printed before the total

log_path() { echo "$LOGS/$1.log"; }

# The counters below note each failed test's line in $FAILED_LIST as "LOG:
# LINE" through this awk function (FILENAME is the stage's log); main
# prints the first 20 above the total, so that a run seen only by its tail
# (a CI's summary) still names them.
FAILED_LIST=$LOGS/failed-tests.txt
NOTE_FAILED='function note_failed(line,  stage) {
  stage = FILENAME; sub(/.*\//, "", stage); sub(/\.log$/, "", stage)
  print stage ": " line >> failed_list }'

# run_logged NAME CMD...: run CMD with its output shown and kept in the
# stage's log; returns CMD's status without tripping `set -e`.
run_logged() {
  local name=$1 rc=0
  shift
  echo "== $name: $*" | tee -a "$(log_path "$name")"
  "$@" 2>&1 | tee -a "$(log_path "$name")" || rc=$?
  return "$rc"
}

# tally STAGE RC PASSED FAILED [SKIPPED]: add a stage's counts. A runner that
# exits non-zero without reporting a failed test, or that ran nothing, broke:
# one failure.
tally() {
  local stage=$1 rc=$2 p=$3 f=$4 s=${5:-0} note=''
  if ((rc != 0 && f == 0)); then
    f=1
    note=" (exit status $rc)"
  elif ((p + f + s == 0)); then
    f=1
    note=' (no tests ran)'
  fi
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  SUMMARY+=("$(printf '%-10s %d passed, %d failed, %d skipped%s' "$stage:" "$p" "$f" "$s" "$note")")
}

# A step that is not itself a test (a build, starting the server).
step() {
  local name=$1
  shift
  if run_logged "$name" "$@"; then
    return 0
  fi
  FAILED=$((FAILED + 1))
  SUMMARY+=("$(printf '%-10s FAILED, see %s' "$name:" "$(log_path "$name")")")
  return 1
}

skip_stage() { SUMMARY+=("$(printf '%-10s not run: %s' "$1:" "$2")"); }

# timed NAME CMD...: runs CMD and records its wall time (printed at the end,
# for the CI budget).
TIMES=()
timed() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  TIMES+=("$name $((SECONDS - t0)) s")
}

install_prerequisites() {
  [ "${GKNN_SKIP_APT:-0}" = 1 ] && return 0
  step apt ensure_packages postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap \
    libtap-parser-sourcehandler-pgtap-perl cmake g++ make libgtest-dev libpq-dev python3 \
    dataset-fashion-mnist clang libclang-rt-14-dev
}

build_core_tests() {
  [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && return 0
  step core-build cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DGKNN_BUILD_TESTS=ON &&
    step core-build cmake --build build/cmake -j"$JOBS"
}

# ctest prints one line per test: "1/9 Test #1: Suite.Name ....   Passed  0.01 sec"
# ("***Failed", "***Skipped", "***Not Run (Disabled)", "***Exception: ...",
# "***Timeout", "***Not Run").
count_ctest() {
  awk -v failed_list="$FAILED_LIST" "$NOTE_FAILED"'
       /^ *[0-9]+\/[0-9]+ +Test +#[0-9]+:/ {
         if ($0 ~ / Passed +[0-9.]+ sec/) p++
         else if ($0 ~ /Skipped|Not Run \(Disabled\)/) s++
         else { f++; note_failed($0) } }
       END { print p+0, f+0, s+0 }' "$1"
}

# gtest prints "[       OK ] Suite.Name (3 ms)", "[  FAILED  ] Suite.Name (3 ms)",
# "[  SKIPPED ] Suite.Name (0 ms)" once per test (its closing list of failed
# tests has no time, so it is not counted twice). A binary that said
# "[==========] Running ..." but never "[==========] N tests ... ran." died
# midway: one more failure.
count_gtest() {
  awk -v failed_list="$FAILED_LIST" "$NOTE_FAILED"'
       /^\[       OK \] .* \([0-9]+ ms\)$/ {p++}
       /^\[  FAILED  \] .* \([0-9]+ ms\)$/ {f++; note_failed($0)}
       /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ {s++}
       /^\[==========\] Running / {unfinished++}
       /^\[==========\] [0-9]+ tests? from .* ran\./ {unfinished--}
       END { print p+0, f+unfinished, s+0 }' "$1"
}

run_gtest_binaries() {
  local list=${GKNN_CORE_TESTS:?GKNN_CORE_TESTS must name the list of test binaries} bin rc=0
  [ -s "$list" ] || { echo "no test binaries listed in $list"; return 1; }
  while read -r bin; do
    [ -n "$bin" ] || continue
    echo "-- $bin"
    "$bin" || rc=1
  done <"$list"
  return "$rc"
}

run_core_tests() {
  local rc=0 log counts p f s
  log=$(log_path core-tests)
  if [ "${GKNN_CORE_RUNNER:-ctest}" = gtest ]; then
    run_logged core-tests run_gtest_binaries || rc=$?
    counts=$(count_gtest "$log")
  else
    run_logged core-tests ctest --test-dir build/cmake --output-on-failure \
      --timeout 600 -j"$JOBS" || rc=$?
    counts=$(count_ctest "$log")
  fi
  read -r p f s <<<"$counts"
  tally core "$rc" "$p" "$f" "$s"
}

# The core tests under AddressSanitizer + UBSan (stage asan). Only the test
# binary and the library it links are built; one CUDA architecture as PTX
# (nothing runs on a GPU in CI, and ptxas is most of a CUDA build's time).
build_asan_tests() {
  [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && return 0
  local flags
  read -r -a flags <<<"$(makefile_var ASAN_CMAKE_FLAGS)"
  step asan-build cmake -S . -B build/asan "${flags[@]}" -DGKNN_SANITIZE=address,undefined \
    -DGKNN_BUILD_TESTS=ON &&
    step asan-build cmake --build build/asan --target gknn_core_tests -j"$JOBS"
}

run_asan_tests() {
  local rc=0 p f s bin=build/asan/gpu/gknn_core_tests
  if [ "${GKNN_SKIP_ASAN:-0}" = 1 ]; then
    skip_stage asan 'GKNN_SKIP_ASAN=1'
    return 0
  fi
  if ! build_asan_tests; then
    skip_stage asan 'build failed'
    return 0
  fi
  if [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && [ ! -x "$bin" ]; then
    skip_stage asan 'not built (GKNN_SKIP_BUILD=1)'
    return 0
  fi
  # protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap
  # would be (needed on a GPU host only, harmless elsewhere).
  ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    run_logged asan "$bin" || rc=$?
  read -r p f s <<<"$(count_gtest "$(log_path asan)")"
  tally asan "$rc" "$p" "$f" "$s"
}

# A short run of every libFuzzer target (fuzz/run.sh); its last line is
# "N passed, N failed" over the targets.
run_fuzz() {
  local rc=0 p f
  if [ "${GKNN_SKIP_FUZZ:-0}" = 1 ]; then
    skip_stage fuzz 'GKNN_SKIP_FUZZ=1'
    return 0
  fi
  if ! command -v "${FUZZ_CXX:-clang++}" >/dev/null && [ "${GKNN_SKIP_APT:-0}" = 1 ]; then
    skip_stage fuzz 'no clang++ (packages clang, libclang-rt-14-dev)'
    return 0
  fi
  FUZZ_OUT=build/fuzz-test run_logged fuzz fuzz/run.sh -t "${GKNN_FUZZ_SECONDS:-20}" || rc=$?
  read -r p f <<<"$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$(log_path fuzz)" | tail -1)"
  sed -n 's/^fuzz [a-z_]*: .*crashes [1-9].*/fuzz: &/p' "$(log_path fuzz)" >>"$FAILED_LIST"
  tally fuzz "$rc" "${p:-0}" "${f:-0}"
}

build_extension() {
  [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && return 0
  step ext-build make -j"$JOBS" && step ext-build as_root make install
}

# The server: a throwaway cluster, or the one the environment names.
start_server() {
  if [ "${GKNN_USE_SERVER:-0}" = 1 ]; then
    step server cluster_psql -c 'SELECT version()'
  else
    GKNN_CLUSTER_LOG=$(realpath "$LOGS")/server.log
    export GKNN_CLUSTER_LOG
    # Not through `step`: the cluster must be started in this shell (its
    # trap and exports); its messages go to the log all the same.
    # shellcheck disable=SC2119 # no settings
    cluster_start_temp > >(tee -a "$(log_path server)") 2>&1 || {
      FAILED=$((FAILED + 1))
      SUMMARY+=("$(printf '%-10s FAILED, see %s' server: "$(log_path server)")")
      return 1
    }
  fi
  # Which device the SQL suites will use, for the record.
  cluster_psql -d postgres -qAt -c "LOAD 'gknn'" \
    -c "SELECT 'gknn.device = ' || current_setting('gknn.device')" | tee -a "$(log_path server)" || true
}

# The suite's options as the Makefile gives them to PGXS's pg_regress.
makefile_var() { sed -n "s/^$1 *= *//p" Makefile; }

# pg_regress_direct [TEST...]: the tests named, or every file of sql/.
pg_regress_direct() {
  local pgxs bindir tests opts
  pgxs=$(dirname "$(pg_config --pgxs)")/../..
  bindir=$(pg_config --bindir)
  read -r -a opts <<<"$(makefile_var REGRESS_OPTS)"
  # As the Makefile's $(sort ...) orders them: bytewise.
  if (($# > 0)); then
    tests=("$@")
  else
    mapfile -t tests < <(printf '%s\n' sql/*.sql | LC_ALL=C sort | sed 's|^sql/||; s|\.sql$||')
  fi
  "$pgxs/src/test/regress/pg_regress" --inputdir=./ --bindir="$bindir" \
    --dbname=contrib_regression "${opts[@]}" "${tests[@]}"
}

# pg_regress (PostgreSQL 15) prints "test NAME ... ok   12 ms" (or
# "... FAILED", "... failed (ignored)"), parallel groups indent "NAME ... ok";
# newer versions print TAP lines "ok 1 - NAME" / "not ok 1 - NAME".
count_pg_regress() {
  awk -v failed_list="$FAILED_LIST" "$NOTE_FAILED"'
       / \.\.\. +ok( |$)/ || /^ok [0-9]+ +[-+] / {p++}
       / \.\.\. +(FAILED|failed)/ || /^not ok [0-9]+ +[-+] / {f++; note_failed($0)}
       END { print p+0, f+0 }' "$1"
}

# run_pg_regress [STAGE TEST...]: every file of sql/ (stage pg_regress), or
# the tests named under another stage's name.
run_pg_regress() {
  local stage=${1:-pg_regress} rc=0 log p f
  (($# == 0)) || shift
  log=$(log_path "$stage")
  rm -f regression.diffs regression.out
  if [ "${GKNN_PG_REGRESS:-make}" = make ] && command -v make >/dev/null; then
    run_logged "$stage" make installcheck ${1:+REGRESS="$*"} || rc=$?
  else
    run_logged "$stage" pg_regress_direct "$@" || rc=$?
  fi
  if [ -s regression.diffs ]; then
    cp regression.diffs "$LOGS/$stage.diffs"
    echo "== regression.diffs (also $LOGS/$stage.diffs)"
    cat regression.diffs
  fi
  read -r p f <<<"$(count_pg_regress "$log")"
  tally "$stage" "$rc" "$p" "$f"
}

# pg_prove -v echoes each file's TAP stream. Top-level "ok"/"not ok" lines are
# the assertions ("not ok ... # TODO" is an expected failure, counted as
# passed); indented lines belong to subtests, summed in their parent line.
count_pgtap() {
  awk -v failed_list="$FAILED_LIST" "$NOTE_FAILED"'
       /^ok / {p++}
       /^not ok / { if ($0 ~ /# *TODO/) p++; else { f++; note_failed($0) } }
       END { print p+0, f+0 }' "$1"
}

# run_pgtap [STAGE FILE...]: every file of regress/pgtap (stage pgtap), or
# the files named under another stage's name.
run_pgtap() {
  local stage=${1:-pgtap} rc=0 files p f
  (($# == 0)) || shift
  files=("$@")
  ((${#files[@]} > 0)) || files=(regress/pgtap/*.sql)
  if ! step "$stage-setup" cluster_create_db gknn_pgtap pgtap gknn; then
    skip_stage "$stage" 'no database'
    return 0
  fi
  run_logged "$stage" pg_prove -v --psql-bin "$(command -v "$GKNN_PG_BIN/psql" || command -v psql)" \
    -d gknn_pgtap "${files[@]}" || rc=$?
  read -r p f <<<"$(count_pgtap "$(log_path "$stage")")"
  tally "$stage" "$rc" "$p" "$f"
}

# run_tap STAGE SCRIPT [ARGS...]: a TAP script against the server, with
# the cluster's psql and pgbench (GKNN_PSQL, GKNN_PGBENCH; more environment
# may prefix the call). Its lines count like pgTAP's; a run that prints
# "1..0 # SKIP why" is a stage not run.
run_tap() {
  local stage=$1 rc=0 p f log
  shift
  log=$(log_path "$stage")
  GKNN_PSQL=$(command -v "$GKNN_PG_BIN/psql" || command -v psql) \
    GKNN_PGBENCH=$(command -v "$GKNN_PG_BIN/pgbench" || command -v pgbench) \
    run_logged "$stage" "$@" || rc=$?
  read -r p f <<<"$(count_pgtap "$log")"
  if grep -q '^1\.\.0 # SKIP' "$log"; then
    skip_stage "$stage" "$(sed -n 's/^1\.\.0 # SKIP //p' "$log")"
  else
    tally "$stage" "$rc" "$p" "$f"
  fi
}

# run_sql_fuzz STAGE BATCHES: random hostile SQL (fixed seed); TAP lines
# count like pgTAP's. It reads the server log for crashes from its own start
# on, so it runs before a stage kills backends on purpose, or after one
# has recovered.
run_sql_fuzz() {
  GKNN_SERVER_LOG=$(cluster_log_file) GKNN_FUZZ_BATCHES=$2 run_tap "$1" regress/sql-fuzz.sh
}

# bench/: the load generator's unit tests, then (with a server) its live
# check; one stage. TAP lines of the live check count like pgTAP's.
run_bench_tests() {
  local have_server=$1 rc=0 p f s p2 f2
  if [ "${GKNN_SKIP_BUILD:-0}" != 1 ] || [ ! -x build/bench/gknn_loadgen_tests ]; then
    if ! step bench-build cmake -S bench -B build/bench -DCMAKE_BUILD_TYPE=Release ||
      ! step bench-build cmake --build build/bench -j"$JOBS"; then
      skip_stage bench 'build failed'
      return 0
    fi
  fi
  run_logged bench build/bench/gknn_loadgen_tests || rc=$?
  read -r p f s <<<"$(count_gtest "$(log_path bench)")"
  if [ "$have_server" = 1 ]; then
    GKNN_PSQL=$(command -v "$GKNN_PG_BIN/psql" || command -v psql) \
      run_logged bench-live bench/tests/loadgen-live.sh build/bench || rc=$?
    read -r p2 f2 <<<"$(count_pgtap "$(log_path bench-live)")"
    p=$((p + p2))
    f=$((f + f2))
  fi
  tally bench "$rc" "$p" "$f" "$s"
}

# The GPU service (regress/service-live.sh, TAP): on a cluster of its own with
# gknn preloaded and the service on the CPU (gknn.service = cpu), or on the
# server given (GKNN_USE_SERVER=1), which must preload gknn.
run_service_live() {
  if [ "${GKNN_USE_SERVER:-0}" != 1 ]; then
    GKNN_CLUSTER_LOG=$(realpath "$LOGS")/server-service.log
    # shellcheck disable=SC2119
    cluster_start_temp shared_preload_libraries=gknn gknn.service=cpu > >(tee -a "$(log_path service)") 2>&1 || {
      tally service 1 0 1
      return 0
    }
  fi
  # Images kept fresh by deltas (before service-live.sh, which crashes the
  # service on purpose).
  run_tap service-delta regress/service-delta.sh
  run_tap service regress/service-live.sh
  # gpu_graph searches through the service (after service-live.sh: it too
  # kills the service, and waits for the server to recover).
  run_tap service-graph regress/service-graph.sh
  # The same with the ring served on the CPU (gknn.service_cpu_ring): the
  # backends' side of the GPU service's resident kernel (claims, waits,
  # abandons, the stop's drain) where there is no GPU.
  run_tap service-graph-ring env GKNN_SERVICE_CPU_RING=1 regress/service-graph.sh
  # GpuTopK through the service while the table changes, then its own
  # suite (after service-graph.sh: it too kills the service, and waits for
  # the server to recover).
  run_tap service-topk-dml regress/service-topk-dml.sh
  run_tap service-topk regress/service-topk.sh
  # The gpu_ivfpq, gpu_graph and GpuTopK SQL suites again, with gknn
  # preloaded: builds (gpu_ivfpq's), searches and GpuTopK's ranking then go
  # through the service and must give what they give without it.
  run_pg_regress regress-svc ivfpq_build_same ivfpq_ddl ivfpq_delta ivfpq_maint ivfpq_search ivfpq_vacuum_full_page \
    graph_ddl graph_maint graph_search topk_cache topk_parallel topk_plan
  run_pgtap pgtap-svc regress/pgtap/50_topk_equivalence.sql regress/pgtap/60_ivfpq.sql
  # Index scans through the service, fuzzed (after service-live.sh, whose
  # crash of the service has been recovered from by then).
  run_sql_fuzz fuzz-svc 12
  [ "${GKNN_USE_SERVER:-0}" = 1 ] || cluster_stop
}

run_sql_suites() {
  if [ -n "${GKNN_DEVICE:-}" ]; then
    export PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c gknn.device=$GKNN_DEVICE"
  fi
  if ! start_server; then
    skip_stage pg_regress 'no server'
    skip_stage pgtap 'no server'
    skip_stage sql-fuzz 'no server'
    skip_stage dump 'no server'
    skip_stage ivfpq-recall 'no server'
    skip_stage graph-recall 'no server'
    skip_stage graph-live 'no server'
    skip_stage ivfpq-live 'no server'
    run_bench_tests 0
    return 0
  fi
  run_pg_regress
  run_pgtap
  run_sql_fuzz sql-fuzz 30
  # pg_dump / pg_restore round trips.
  GKNN_PG_BIN=$GKNN_PG_BIN run_tap dump regress/dump-restore.sh
  run_bench_tests 1
  # gpu_ivfpq's and gpu_graph's recall on Fashion-MNIST (Debian's
  # dataset-fashion-mnist), skipped without the dataset.
  run_tap ivfpq-recall regress/ivfpq-recall.sh
  timed graph-recall run_tap graph-recall regress/graph-recall.sh
  # gpu_ivfpq, then gpu_graph, under concurrent sessions and a backend crash.
  run_tap ivfpq-live regress/ivfpq-live.sh
  run_tap graph-live regress/graph-live.sh
  cluster_stop
  run_service_live
}

main() {
  rm -rf "$LOGS"
  mkdir -p "$LOGS"
  if ! install_prerequisites; then
    skip_stage all 'missing packages'
  else
    run_tap report bench/tests/report_check.py
    run_tap host-cpu bench/tests/host_cpu_check.py
    if build_core_tests; then run_core_tests; else skip_stage core 'build failed'; fi
    timed asan run_asan_tests
    timed fuzz run_fuzz
    if build_extension; then run_sql_suites; else
      skip_stage pg_regress 'extension build failed'
      skip_stage pgtap 'extension build failed'
      skip_stage sql-fuzz 'extension build failed'
      run_bench_tests 0
    fi
  fi
  echo
  printf '%s\n' "${SUMMARY[@]}"
  ((${#TIMES[@]} == 0)) || echo "times: $(IFS=','; echo "${TIMES[*]}" | sed 's/,/, /g')"
  if ((FAILED > 0)); then
    # (|| true: grep finding nothing must not end the run)
    printf '%s\n' "${SUMMARY[@]}" | grep -v -E ' 0 failed|not run:' | sed 's/^/failed stage: /' || true
    [ ! -s "$FAILED_LIST" ] || head -20 "$FAILED_LIST" | sed 's/^/failed: /'
  fi
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
}

main "$@"
