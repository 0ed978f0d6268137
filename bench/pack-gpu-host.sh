#!/usr/bin/env bash
# Prepare .device/ for bench/gpu-check.sh on the GPU host (x86-64, no network,
# no PostgreSQL, no apt, perhaps no make or CMake). Run here after
# `make install`; then carry the repository with build/ and .device/ over.
#
#   bench/pack-gpu-host.sh
#   GKNN_PACK_CORE_BUILD=build/cmake90 bench/pack-gpu-host.sh
#
# With GKNN_PACK_CORE_BUILD, a core build already made there (for example
# `cmake -S . -B build/cmake90 -DCMAKE_CUDA_ARCHITECTURES=90-real
# -DCMAKE_BUILD_TYPE=Release`, a few minutes on 2 cores, and gknn.so linked
# with its library: `make GKNN_CORE_LIB=build/cmake90/gpu/libgknn_core.a`)
# is packed as it is: build/cmake's multi-architecture build takes 45
# minutes and more after a branch switch.
#
# .device/ then holds
#   pg-bundle.tar.gz   this machine's PostgreSQL with gknn and pgTAP installed
#                      (/work/shared/gpu-host/pack-postgres.sh; the bundle
#                      carries its own start-postgres.sh)
#   core-tests.txt     the GoogleTest binaries under the core build, one a line,
#                      relative to the repository root (run without ctest there)
#   bin/pg_prove, perl5/  pg_prove and the pure-Perl modules it loads beyond
#                      perl-base, the part of Perl every Debian/Ubuntu system has
#   requires.env       the newest glibc and libstdc++ symbol versions the packed
#                      binaries need, which gpu-check.sh compares with the host's
#   bench-tools.tar.xz the bench tools (build/bench: the load generator, its
#                      tests, the loader, synthetic data, ground truth),
#                      stripped and compressed: build/bench itself (8 MB)
#                      does not fit a call's 64 MiB beside the bundle;
#                      gpu-check.sh and gpu-host-bench.sh unpack it there
# (.device/data, the datasets gpu-host-bench.sh reads, is kept.)
set -euo pipefail
cd "$(dirname "$0")/.."
. regress/cluster.sh

DEV=.device
CORE_BUILD=${GKNN_PACK_CORE_BUILD:-build/cmake}
PACK_POSTGRES=${GKNN_PACK_POSTGRES:-/work/shared/gpu-host/pack-postgres.sh}

# The bundle is made from the installed tree: it must hold this build of gknn.
same() { cmp -s "$1" "$2" || { echo "$2 differs from $1: run make && make install first" >&2; return 1; }; }
check_installed() {
  local ext src
  ext=$(pg_config --sharedir)/extension
  same gknn.so "$(pg_config --pkglibdir)/gknn.so"
  same gknn.control "$ext/gknn.control"
  for src in extension/gknn--*.sql; do same "$src" "$ext/${src##*/}"; done
}

build_core_tests() {
  [ -z "${GKNN_PACK_CORE_BUILD:-}" ] || return 0  # packed as it is
  cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DGKNN_BUILD_TESTS=ON >/dev/null
  cmake --build build/cmake -j"$(nproc)"
}

# ctest knows which binaries are tests; the GPU host may have no ctest, and
# the repository may sit at another path there.
list_core_tests() {
  ctest --test-dir "$CORE_BUILD" -N -V | sed -n 's/^[0-9]*: Test command: \([^ ]*\).*/\1/p' |
    sort -u | xargs -r realpath --relative-to=. >"$DEV/core-tests.txt"
  [ -s "$DEV/core-tests.txt" ] || { echo "ctest lists no test binaries" >&2; return 1; }
}

BENCH_TOOLS=(gknn_loadgen_tests gknn-loadgen gknn-load gknn-synth gknn-groundtruth)
pack_bench_tools() {
  local t stage
  cmake -S bench -B build/bench -DCMAKE_BUILD_TYPE=Release -DGKNN_BENCH_TESTS=ON \
    -DGKNN_CORE_LIB="$PWD/$CORE_BUILD/gpu/libgknn_core.a" >/dev/null
  cmake --build build/bench -j"$(nproc)" >/dev/null
  stage=$(mktemp -d)
  for t in "${BENCH_TOOLS[@]}"; do strip -o "$stage/$t" "build/bench/$t"; done
  tar -C "$stage" -cJf "$DEV/bench-tools.tar.xz" "${BENCH_TOOLS[@]}"
  rm -rf "$stage"
}

pack_postgres() {
  # PGXS builds with -g: gknn.so's debug info (~11 MB) would leave a call's
  # 64 MiB no room for the tree and a core test binary beside the bundle.
  # Both copies lose it, so that check_installed still finds them the same.
  strip --strip-debug gknn.so "$(pg_config --pkglibdir)/gknn.so"
  GKNN_PACK_MODULES="$(pg_config --pkglibdir)/gknn.so" "$PACK_POSTGRES" "$DEV/pg-bundle.tar.gz"
}

# pg_prove against the throwaway cluster: with the modules it loads recorded
# (with_inc_dump), or with @INC cut down to perl-base and .device/perl5
# (as_bare_perl), which is all a host with only perl-base offers.
run_pg_prove() { "$@" --psql-bin "$GKNN_PG_BIN/psql" -d gknn_pgtap regress/pgtap/*.sql; }
with_inc_dump() {
  mkdir -p "$DEV/incdump"
  # shellcheck disable=SC2016 # Perl code, for Perl to expand
  printf '%s\n' 'package GknnIncDump; END { print STDERR "GKNN_INC\t$_\t$INC{$_}\n" for sort keys %INC } 1;' \
    >"$DEV/incdump/GknnIncDump.pm"
  PERL5LIB=$DEV/incdump PERL5OPT=-MGknnIncDump "$@" || true
  rm -rf "$DEV/incdump"
}
as_bare_perl() {
  local script=$1
  shift
  perl -e 'BEGIN { @INC = (shift, grep { m{/perl-base$} } @INC) } $0 = shift; do $0; die $@ if $@' \
    "$PWD/$DEV/perl5" "$PWD/$script" "$@"
}

# Perl's architecture-independent library directories: modules there are pure
# Perl and portable; XS modules (archlib) must come from the host's perl.
pure_perl_dirs() { perl -MConfig -e 'print "$_\n" for grep { $_ } @Config{qw(privlib vendorlib sitelib)}'; }

copy_perl_modules() {
  local loaded pm path dir dirs harness
  mapfile -t dirs < <(pure_perl_dirs)
  # Whether the tests pass does not matter here, only what was loaded.
  loaded=$(with_inc_dump run_pg_prove pg_prove 2>&1 >/dev/null | sed -n 's/^GKNN_INC\t//p')
  [ -n "$loaded" ] || { echo "pg_prove loaded no modules?" >&2; return 1; }
  while IFS=$'\t' read -r pm path; do
    for dir in "${dirs[@]}"; do
      if [ "$path" = "$dir/$pm" ]; then install -D -m 644 "$path" "$DEV/perl5/$pm"; fi
    done
  done <<<"$loaded"
  # The rest of Test::Harness too: modules it loads only on paths this run
  # did not take (other formatters, --state, parallel runs).
  harness=$(awk -F'\t' '$1 == "TAP/Harness.pm" { sub(/\/TAP\/Harness\.pm$/, "", $2); print $2 }' <<<"$loaded")
  (cd "$harness" && find TAP App/Prove App/Prove.pm -name '*.pm') | while read -r pm; do
    install -D -m 644 "$harness/$pm" "$DEV/perl5/$pm"
  done
  install -D -m 755 "$(command -v pg_prove)" "$DEV/bin/pg_prove"
}

pack_pg_prove() {
  local out
  # shellcheck disable=SC2119 # no settings
  cluster_start_temp >/dev/null
  cluster_create_db gknn_pgtap pgtap gknn
  copy_perl_modules
  # The copy must do on perl-base alone: pg_prove must get as far as its
  # summary (whether the tests pass is not the question here).
  echo "pg_prove with only perl-base and $DEV/perl5:"
  out=$(run_pg_prove as_bare_perl "$DEV/bin/pg_prove" 2>&1) || true
  echo "$out"
  cluster_stop
  if ! grep -q '^Result: ' <<<"$out" || grep -q "Can't locate" <<<"$out"; then
    echo "pg_prove does not run from $DEV/perl5" >&2
    return 1
  fi
}

# Newest versioned glibc / libstdc++ symbol ($1: GLIBC or GLIBCXX) that the
# packed binaries import.
newest_symbol() {
  local prefix=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9.]*" | sed "s/^${prefix}_//" | sort -Vu | tail -n 1
}
record_requirements() {
  local bins
  mapfile -t bins < <(cat "$DEV/core-tests.txt"; echo "$(pg_config --pkglibdir)/gknn.so"
    find "$(pg_config --bindir)" -type f; for t in "${BENCH_TOOLS[@]}"; do echo "build/bench/$t"; done)
  printf 'GLIBC=%s\nGLIBCXX=%s\n' "$(newest_symbol GLIBC "${bins[@]}")" \
    "$(newest_symbol GLIBCXX "${bins[@]}")" >"$DEV/requires.env"
}

main() {
  # Everything packed before goes; the datasets copied by hand into
  # .device/data (bench/gpu-host-bench.sh) stay.
  mkdir -p "$DEV"
  find "$DEV" -mindepth 1 -maxdepth 1 ! -name data -exec rm -rf {} +
  check_installed
  build_core_tests
  list_core_tests
  pack_bench_tools
  pack_postgres
  pack_pg_prove
  record_requirements
  git rev-parse HEAD >"$DEV/commit" 2>/dev/null || rm -f "$DEV/commit"
  echo "packed into $DEV/:"
  (cd "$DEV" && du -sh -- *)
  cat "$DEV/core-tests.txt" "$DEV/requires.env"
}

main "$@"
