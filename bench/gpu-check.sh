#!/usr/bin/env bash
# On the GPU host: every test suite on the GPU path, from what
# bench/pack-gpu-host.sh put into .device/ (and build/ as built there).
#
#   bench/gpu-check.sh [LOG]      as root, from the repository root
#
# Starts the packed PostgreSQL (start-postgres.sh from the bundle), then runs
# regress/run-all.sh against it without apt or builds: the core GoogleTest
# binaries with GKNN_REQUIRE_GPU=1 (a GPU test that cannot run fails instead of
# skipping), pg_regress and pgTAP with gknn.device=gpu. Everything also goes
# to LOG (default build/gpu-check.log); the last line is "N passed, N failed".
#
# For a rehearsal on a machine without a GPU, GKNN_DEVICE=cpu
# GKNN_REQUIRE_GPU=0 override the two GPU settings.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=$PWD/.device
BUNDLE_DIR=/tmp/gknn-pg-bundle
PG_ENV=/tmp/gknn-pg.env   # written by start-postgres.sh

fail() {
  echo "gpu-check: $*"
  echo "0 passed, 1 failed"
  exit 1
}

# "2.35" >= "2.34"?
version_at_least() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

# Packed binaries built against a newer glibc / libstdc++ than the host's
# would fail later with obscure loader errors; say so plainly now.
check_runtime() {
  local GLIBC='' GLIBCXX='' have libstdcxx
  # shellcheck source=/dev/null
  . "$DEV/requires.env"
  have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  version_at_least "$have" "$GLIBC" || fail "host glibc $have, the packed binaries need $GLIBC"
  libstdcxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ { print $NF; exit }')
  have=$(grep -ao 'GLIBCXX_[0-9.]*[0-9]' "$libstdcxx" | sed 's/GLIBCXX_//' | sort -Vu | tail -n 1)
  version_at_least "$have" "$GLIBCXX" || fail "host libstdc++ has GLIBCXX $have, gknn needs $GLIBCXX"
  echo "glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}') (needs $GLIBC), libstdc++ GLIBCXX $have (needs $GLIBCXX)"
}

preflight() {
  ((EUID == 0)) || fail "run as root (start-postgres.sh runs the server as its own user)"
  local f
  for f in pg-bundle.tar.gz core-tests.txt requires.env bin/pg_prove perl5; do
    [ -e "$DEV/$f" ] || fail "$DEV/$f is missing: run bench/pack-gpu-host.sh before carrying the repository over"
  done
  while read -r f; do
    [ -x "$f" ] || fail "core test binary $f is missing (build/ must come along)"
  done <"$DEV/core-tests.txt"
  check_runtime
  echo "host: $(uname -n), $(uname -r)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  else
    echo "nvidia-smi not found"
  fi
  [ ! -f "$DEV/commit" ] || echo "packed from commit $(cat "$DEV/commit")"
}

# The server runs from a copy under /tmp: start-postgres.sh makes the
# bundle's directory the server user's library path, and the repository may
# sit where that user cannot read (e.g. under /root).
start_postgres() {
  rm -rf "$BUNDLE_DIR"
  mkdir -p "$BUNDLE_DIR"
  tar -xzf "$DEV/pg-bundle.tar.gz" -C "$BUNDLE_DIR"
  # start-postgres.sh reads its previous env file under `set -e` and exits
  # silently where there is none (the first start on a host).
  touch "$PG_ENV"
  # From the bundle's directory: the server user cannot enter every one.
  # With gknn preloaded: the GPU service serves the index searches
  # (GKNN_SERVICE=off tests the backends' own paths instead).
  local settings=(shared_preload_libraries=gknn "gknn.service=${GKNN_SERVICE:-gpu}")
  (cd "$BUNDLE_DIR" && ./start-postgres.sh /tmp/gknn-pgdata -- "${settings[@]}") ||
    fail "the packed PostgreSQL did not start"
  trap stop_postgres EXIT
  # PGBIN, and PATH, LD_LIBRARY_PATH, PGHOST, PGUSER, GKNN_PGDATA for it.
  # shellcheck source=/dev/null
  . "$BUNDLE_DIR/bundle.env"
  # shellcheck source=/dev/null
  . "$PG_ENV"
}

stop_postgres() {
  runuser -u gknnpg -- env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
    "$PGBIN/pg_ctl" -D "$GKNN_PGDATA" -m fast -w stop >/dev/null 2>&1 || true
}

run_tests() {
  env GKNN_SKIP_APT=1 GKNN_SKIP_BUILD=1 GKNN_USE_SERVER=1 GKNN_PG_BIN="$PGBIN" \
    GKNN_DEVICE="${GKNN_DEVICE:-gpu}" GKNN_REQUIRE_GPU="${GKNN_REQUIRE_GPU:-1}" \
    GKNN_CORE_RUNNER=gtest GKNN_CORE_TESTS="$DEV/core-tests.txt" GKNN_PG_REGRESS=direct \
    GKNN_FMNIST_DIR="${GKNN_FMNIST_DIR:-$DEV/data/fashion-mnist}" \
    PATH="$DEV/bin:$PATH" PERL5LIB="$DEV/perl5${PERL5LIB:+:$PERL5LIB}" \
    regress/run-all.sh
}

# The bench tools as pack-gpu-host.sh packed them (build/bench itself is
# too large to carry beside the bundle), where build/bench has none.
unpack_bench_tools() {
  [ -f "$DEV/bench-tools.tar.xz" ] && [ ! -x build/bench/gknn_loadgen_tests ] || return 0
  mkdir -p build/bench
  tar -xJf "$DEV/bench-tools.tar.xz" -C build/bench
}

main() {
  preflight
  unpack_bench_tools
  start_postgres
  run_tests
}

log=$(realpath -m "${1:-build/gpu-check.log}")
mkdir -p "$(dirname "$log")"
echo "gpu-check $(date -u +%FT%TZ), log $log" >"$log"
main 2>&1 | tee -a "$log"
