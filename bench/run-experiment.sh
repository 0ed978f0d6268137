#!/usr/bin/env bash
# One benchmark experiment end to end (the one command):
#
#   bench/run-experiment.sh bench/experiments/fashion-mnist.json [run_experiment.py options]
#
# installs what it needs (apt), builds and installs gknn if the server lacks
# it, builds the bench tools (build/bench), starts a throwaway PostgreSQL
# cluster (regress/cluster.sh) with the experiment's server_settings, fetches
# and converts the dataset once (bench/data/, with exact ground truth), loads
# it by binary COPY, runs every engine the server supports with gknn-loadgen,
# and writes bench/results/<experiment>-<device>-<date>.{json,md,png}.
#
# Options after the file go to bench/run_experiment.py, e.g. --queries 1000
# (fewer query vectors and ground truth rows: a faster CPU run),
# --duration 5, --clients 1,2,4, --date 2026-11-21, --device-label NAME.
#
# Environment:
#   GKNN_USE_SERVER=1   use the running server named by PGHOST/PGPORT/PGUSER
#                       (e.g. the packed PostgreSQL on the GPU host) instead
#                       of a throwaway cluster
#   GKNN_SKIP_APT=1     install no packages
#   GKNN_SKIP_BUILD=1   use build/bench (and the installed gknn) as they are
#   GKNN_BENCH_JOBS=N   parallel build jobs (default: nproc)
#   GKNN_PYTHON=PATH    the python3 for the runner and plots (default: Debian's)
#   GKNN_BENCH_PG_TREE=DIR  copy the PostgreSQL server tree into DIR and install
#                       this checkout's gknn there (make install DESTDIR=DIR),
#                       leaving the system's installation alone: the results
#                       are then this checkout's, whatever else is installed
#                       (a shared machine). DIR must be readable by the server's
#                       user (e.g. under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
. regress/cluster.sh

EXPERIMENT=${1:?usage: bench/run-experiment.sh EXPERIMENT.json [options]}
shift
JOBS=${GKNN_BENCH_JOBS:-$(nproc)}
LOGS=build/bench-logs
mkdir -p "$LOGS"

# The experiment file's field, as a shell word list (python3 is required anyway).
experiment_field() {
  python3 -c 'import json, sys
v = json.load(open(sys.argv[1])).get(sys.argv[2], "")
print(" ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else v)' "$EXPERIMENT" "$1"
}

install_packages() {
  [ "${GKNN_SKIP_APT:-0}" = 1 ] && return 0
  local pkgs=(postgresql-15 postgresql-server-dev-15 libpq-dev cmake g++ make python3 python3-matplotlib)
  case "$(experiment_field dataset)" in
    fashion-mnist) pkgs+=(dataset-fashion-mnist) ;;
    glove-100) command -v npm >/dev/null || pkgs+=(npm) ;;
  esac
  ensure_packages "${pkgs[@]}"
}

# A private copy of the server's bin, lib and share directories (the server
# finds lib and share relative to its binary) with this checkout's gknn.
private_tree() {
  local tree=$1 d
  make -j"$JOBS" >"$LOGS/make.log" 2>&1 || { tail -n 40 "$LOGS/make.log"; return 1; }
  for d in "$(pg_config --bindir)" "$(pg_config --pkglibdir)" "$(pg_config --sharedir)"; do
    [ -d "$tree$d" ] && continue
    mkdir -p "$tree$(dirname "$d")"
    cp -a "$d" "$tree$(dirname "$d")/"
  done
  make install DESTDIR="$tree" >>"$LOGS/make.log" 2>&1 || { tail -n 20 "$LOGS/make.log"; return 1; }
  chmod -R a+rX "$tree"
  GKNN_PG_BIN=$tree$(pg_config --bindir)
  echo "bench: this checkout's gknn in the private server tree $tree"
}

# gknn into the server (unless it has it), gknn's core library for the
# ground-truth tool, and the bench tools.
build() {
  [ -z "${GKNN_BENCH_PG_TREE:-}" ] || private_tree "$(realpath -m "$GKNN_BENCH_PG_TREE")"
  [ "${GKNN_SKIP_BUILD:-0}" = 1 ] && return 0
  if [ "${GKNN_USE_SERVER:-0}" != 1 ] && [ -z "${GKNN_BENCH_PG_TREE:-}" ] &&
    [ ! -f "$(pg_config --sharedir)/extension/gknn.control" ]; then
    echo "bench: building and installing gknn (make; make install)"
    make -j"$JOBS" >"$LOGS/make.log" 2>&1 || { tail -n 40 "$LOGS/make.log"; return 1; }
    as_root make install >>"$LOGS/make.log" 2>&1 || { tail -n 20 "$LOGS/make.log"; return 1; }
  fi
  if [ ! -f build/cmake/gpu/libgknn_core.a ]; then
    echo "bench: building gknn's core library (CUDA; several minutes on a small machine)"
    { cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release && cmake --build build/cmake --target gknn_core -j"$JOBS"; } \
      >"$LOGS/core.log" 2>&1 || { tail -n 40 "$LOGS/core.log"; return 1; }
  fi
  { cmake -S bench -B build/bench -DCMAKE_BUILD_TYPE=Release -DGKNN_BENCH_TESTS=OFF &&
    cmake --build build/bench -j"$JOBS"; } >"$LOGS/bench-build.log" 2>&1 ||
    { tail -n 40 "$LOGS/bench-build.log"; return 1; }
}

start_server() {
  if [ "${GKNN_USE_SERVER:-0}" = 1 ]; then
    echo "bench: using the server at ${PGHOST:-default}:${PGPORT:-5432} as ${PGUSER:-$(id -un)}"
    return 0
  fi
  local settings
  read -r -a settings <<<"$(experiment_field server_settings)"
  cluster_start_temp "${settings[@]}"
}

main() {
  install_packages
  build
  start_server
  # Debian's python3 first: python3-matplotlib is installed for it (a python3
  # earlier on PATH, e.g. pyenv's, would not see it). GKNN_PYTHON overrides
  # (the GPU host's matplotlib is in its own environment).
  local python=python3
  [ -x /usr/bin/python3 ] && python=/usr/bin/python3
  python=${GKNN_PYTHON:-$python}
  GKNN_PSQL=$(command -v "$GKNN_PG_BIN/psql" || command -v psql) "$python" bench/run_experiment.py "$EXPERIMENT" "$@"
}

main "$@"
