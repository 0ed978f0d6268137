#!/usr/bin/env bash
# Prints what LD_PRELOAD needs for a PostgreSQL server running a gknn.so
# built with GKNN_SANITIZE (README: "Sanitizers and fuzzing"): ASan's runtime
# (gcc's, the one gknn.so links) and a one-function library built here.
#
# Why the second one: PostgreSQL's binaries load libp11-kit (through gnutls),
# whose constructor runs before the preloaded runtime's and calls newlocale,
# which holds glibc's locale lock while it mallocs. ASan then initialises
# inside that malloc, looks up swift_demangle with dlsym, and the failed
# lookup's dlerror translates its message under the same lock: the server
# hangs at start (glibc 2.36, gcc 12 and clang 14 runtimes alike). With a
# swift_demangle defined the lookup succeeds and nothing waits.
set -euo pipefail
cd "$(dirname "$0")/.."
shim=build/asan-preload/libgknn_asan_swift.so
if [ ! -f "$shim" ]; then
  mkdir -p "$(dirname "$shim")"
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    '/* never demangles: the sanitizer then prints the name as it is */' \
    'char *swift_demangle(const char *n, size_t l, char *o, size_t *s, uint32_t f) {' \
    '  (void)n; (void)l; (void)o; (void)s; (void)f; return NULL; }' |
    gcc -shared -fPIC -x c - -o "$shim"
fi
echo "$(gcc -print-file-name=libasan.so) $(realpath "$shim")"
