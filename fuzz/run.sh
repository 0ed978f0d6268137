#!/usr/bin/env bash
# gknn's libFuzzer targets (`make fuzz`; a short run is a stage of `make test`).
#
#   fuzz/run.sh [-t SECONDS | -n RUNS] [-m] [TARGET...]
#
# Builds each target with clang (Debian's clang and libclang-rt-14-dev) under
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer into $FUZZ_OUT
# (default build/fuzz; `make test` uses build/fuzz-test),
# then runs them one at a time, each for SECONDS (default 60) or RUNS inputs,
# starting from its committed corpus fuzz/corpus/TARGET (read only) plus a
# scratch corpus $FUZZ_OUT/corpus/TARGET that keeps what earlier runs found.
# A crash, a sanitizer report, a leak, a timeout (10 s for one input) or an
# out-of-memory stops that target; its input is saved as
# $FUZZ_OUT/artifacts/TARGET/crash-* (replay: $FUZZ_OUT/TARGET FILE) and
# the script exits non-zero. -m merges the inputs that add coverage back into
# fuzz/corpus/TARGET (to commit; keep it small). One line per target:
#   fuzz TARGET: N runs in S s, corpus C files, crashes K
# and last "N passed, N failed" (a target that ran clean passes).
#
# Targets (the code users run, free of PostgreSQL headers):
#   vector_text   extension/types/vector_parse.cpp  vector_in's parser
#   vector_recv   extension/types/vector_parse.cpp  vector_recv's readers
#   expr_program  gpu/expr/program.cpp              GpuTopK's bytecode validator (+ the CPU interpreter)
#   ivfpq_pages   extension/ivfpq/ivfpq_format.cpp  the checks of every gpu_ivfpq page reader
#   graph_pages   extension/graph/graph_format.cpp  the checks of every gpu_graph page reader
set -uo pipefail
cd "$(dirname "$0")/.."

ALL=(vector_text vector_recv expr_program ivfpq_pages graph_pages)
CXX_FUZZ=${FUZZ_CXX:-clang++}
OUT=${FUZZ_OUT:-build/fuzz}
seconds=60
runs=''
merge=0
while getopts 't:n:m' opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    n) runs=$OPTARG ;;
    m) merge=1 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
((${#targets[@]})) || targets=("${ALL[@]}")

sources() {
  case $1 in
    vector_text | vector_recv) echo "-Iextension fuzz/$1_fuzz.cpp extension/types/vector_parse.cpp" ;;
    expr_program) echo "-Igpu/include -Igpu fuzz/$1_fuzz.cpp gpu/expr/program.cpp" ;;
    ivfpq_pages) echo "-Iextension fuzz/$1_fuzz.cpp extension/ivfpq/ivfpq_format.cpp" ;;
    graph_pages) echo "-Iextension fuzz/$1_fuzz.cpp extension/graph/graph_format.cpp" ;;
    *) return 1 ;;
  esac
}

build() {
  local t=$1 src
  src=$(sources "$t") || { echo "fuzz: no target $t" >&2; return 1; }
  # shellcheck disable=SC2086 # src is a list of words
  "$CXX_FUZZ" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -o "$OUT/$t" $src
}

passed=0
failed=0
mkdir -p "$OUT"
for t in "${targets[@]}"; do
  if ! build "$t"; then
    echo "fuzz $t: build failed"
    failed=$((failed + 1))
    continue
  fi
  rm -rf "$OUT/artifacts/$t"
  mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t" "fuzz/corpus/$t"
  limit=(-max_total_time="$seconds")
  [ -z "$runs" ] || limit=(-runs="$runs")
  log=$OUT/$t.log
  start=$(date +%s)
  "$OUT/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0 \
    -artifact_prefix="$OUT/artifacts/$t/" "$OUT/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  elapsed=$(($(date +%s) - start))
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "$OUT/artifacts/$t" -type f | wc -l)
  echo "fuzz $t: ${n:-0} runs in $elapsed s, corpus $(find "$OUT/corpus/$t" "fuzz/corpus/$t" -type f | wc -l) files, crashes $crashes"
  if ((rc != 0 || crashes > 0)); then
    failed=$((failed + 1))
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -20
    continue
  fi
  passed=$((passed + 1))
  if ((merge)); then
    "$OUT/$t" -merge=1 -print_funcs=0 "fuzz/corpus/$t" "$OUT/corpus/$t" >>"$log" 2>&1 &&
      echo "fuzz $t: fuzz/corpus/$t now $(find "fuzz/corpus/$t" -type f | wc -l) files"
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
