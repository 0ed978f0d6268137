# shellcheck shell=bash
# Throwaway PostgreSQL clusters for the tests and the demo, plus the package
# check both need. Source this file; it only defines functions.
#
#   cluster_start DIR [SETTING=VALUE...]  start the cluster in DIR/pgdata (initdb
#                          first if needed); socket in DIR/sock; exports PGHOST,
#                          PGPORT, PGUSER=postgres, PGDATABASE=postgres; an EXIT
#                          trap (replacing any other) stops it when the shell
#                          exits
#   cluster_start_temp [SETTING=VALUE...]  the same in a fresh directory under
#                          $TMPDIR that cluster_stop removes
#   cluster_stop           stop it (idempotent); the server log is copied to
#                          $GKNN_CLUSTER_LOG first when that is set
#   cluster_log_file       the running cluster's server log (nothing when none)
#   cluster_create_db NAME [EXTENSION...]  (re)create database NAME with those
#                          extensions
#   ensure_packages PKG... apt-get install the Debian packages that are missing
#   as_root CMD...         run CMD as root (directly, or through sudo)
#   cluster_psql ARGS...   psql -X -v ON_ERROR_STOP=1 of the cluster's version
#
# GKNN_SERVER_PRELOAD="LIB..." starts the server with LD_PRELOAD=LIB... (and
# ASAN_OPTIONS, default detect_leaks=0:protect_shadow_gap=0): how the SQL
# suites run against a gknn.so built with AddressSanitizer
# (GKNN_SERVER_PRELOAD="$(regress/asan-preload.sh)").
#
# PostgreSQL refuses to run as root. Invoked as root, the server runs as the
# unprivileged user $GKNN_PG_OSUSER (created if missing); otherwise it runs as
# the invoking user. The server listens on its Unix socket only.

GKNN_PG_VERSION=${GKNN_PG_VERSION:-15}
# The server binaries: $GKNN_PG_BIN, else those of the pg_config on PATH when
# it is PostgreSQL $GKNN_PG_VERSION (a relocated private installation that
# `make install` also uses), else Debian's.
if [ -z "${GKNN_PG_BIN:-}" ] && command -v pg_config >/dev/null &&
  pg_config --version 2>/dev/null | grep -q "^PostgreSQL $GKNN_PG_VERSION\."; then
  GKNN_PG_BIN=$(pg_config --bindir)
fi
GKNN_PG_BIN=${GKNN_PG_BIN:-/usr/lib/postgresql/$GKNN_PG_VERSION/bin}
GKNN_PG_OSUSER=${GKNN_PG_OSUSER:-gknntest}
_cluster_dir=''      # the running cluster's directory; empty when none
_cluster_temp=0      # 1 when cluster_stop should remove $_cluster_dir
_cluster_sock=''     # the socket directory, when it is not $_cluster_dir/sock

# Run CMD as the server's OS user. From / so that a working directory the
# user cannot read (e.g. under /root) does not trouble initdb or postgres.
as_pg_user() {
  if ((EUID == 0)); then
    (cd / && runuser -u "$GKNN_PG_OSUSER" -- "$@")
  else
    (cd / && "$@")
  fi
}

as_root() {
  if ((EUID == 0)); then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "need root (or sudo) for: $*" >&2
    return 1
  fi
}

ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "installing: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

_cluster_ensure_os_user() {
  ((EUID == 0)) || return 0
  id "$GKNN_PG_OSUSER" >/dev/null 2>&1 && return 0
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$GKNN_PG_OSUSER"
}

# Make DIR (and what is in it) the server user's, and check that the user can
# reach it: a parent directory closed to others (e.g. /root) cannot be fixed
# here.
_cluster_own() {
  local dir=$1
  ((EUID == 0)) && chown -R "$GKNN_PG_OSUSER:" "$dir"
  if ! as_pg_user test -w "$dir"; then
    echo "cluster: $dir is not writable by the server's user $(as_pg_user id -un);" \
      "put it under a directory others can traverse" >&2
    return 1
  fi
}

# A port nothing listens on over TCP (the server uses the socket only, but a
# free port keeps the socket name from clashing with anything else too).
_cluster_free_port() {
  local p
  for ((p = 54320; p < 54420; p++)); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "cluster: no free port in 54320-54419" >&2
  return 1
}

# Unix socket paths are limited to 107 bytes; a deep DIR gets a socket
# directory under $TMPDIR instead.
_cluster_socket_dir() {
  local dir=$1
  if ((${#dir} + 20 < 100)); then
    echo "$dir/sock"
  else
    _cluster_sock=$(mktemp -d "${TMPDIR:-/tmp}/gknn-sock.XXXXXX")
    echo "$_cluster_sock"
  fi
}

_cluster_init() {
  local data=$1
  [ -f "$data/PG_VERSION" ] && return 0
  as_pg_user "$GKNN_PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 \
    --locale=C --no-sync >"$data.initdb.log" 2>&1 || {
    cat "$data.initdb.log" >&2
    return 1
  }
}

cluster_start() {
  local dir opts s sock port
  dir=$(realpath -m "$1")
  shift
  [ -x "$GKNN_PG_BIN/pg_ctl" ] || { echo "cluster: no PostgreSQL in $GKNN_PG_BIN" >&2; return 1; }
  _cluster_ensure_os_user
  mkdir -p "$dir/pgdata"
  chmod 700 "$dir/pgdata"
  sock=$(_cluster_socket_dir "$dir")
  mkdir -p "$sock"
  _cluster_own "$dir"
  [ -z "$_cluster_sock" ] || _cluster_own "$_cluster_sock"
  _cluster_init "$dir/pgdata"
  # A server left running by an interrupted earlier run is stopped first.
  as_pg_user "$GKNN_PG_BIN/pg_ctl" -D "$dir/pgdata" status >/dev/null 2>&1 &&
    as_pg_user "$GKNN_PG_BIN/pg_ctl" -D "$dir/pgdata" -m fast -w stop >/dev/null
  port=$(_cluster_free_port)
  # pg_ctl -o takes one string that the shell it starts splits again, hence
  # printf %q (settings are plain NAME=VALUE words).
  opts="-p $port -k $(printf '%q' "$sock") -c listen_addresses=''"
  for s in "$@"; do opts+=" -c $(printf '%q' "$s")"; done
  _cluster_dir=$dir
  trap cluster_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # GKNN_SERVER_PRELOAD="LIB...": the server (only) runs with them preloaded,
  # e.g. ASan's runtime under a gknn.so built with GKNN_SANITIZE (README).
  local preload=()
  [ -z "${GKNN_SERVER_PRELOAD:-}" ] ||
    preload=(env LD_PRELOAD="$GKNN_SERVER_PRELOAD"
      ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:protect_shadow_gap=0}")
  if ! as_pg_user "${preload[@]}" "$GKNN_PG_BIN/pg_ctl" -D "$dir/pgdata" -l "$dir/server.log" -w -t 60 \
    -o "$opts" start >/dev/null; then
    tail -n 30 "$dir/server.log" >&2
    return 1
  fi
  export PGHOST=$sock PGPORT=$port PGUSER=postgres PGDATABASE=postgres
  echo "PostgreSQL $("$GKNN_PG_BIN/postgres" -V | awk '{print $3}') running, socket $sock port $port, log $dir/server.log"
}

cluster_start_temp() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gknn-pg.XXXXXX")
  chmod 755 "$dir"
  _cluster_temp=1
  cluster_start "$dir" "$@"
}

cluster_stop() {
  [ -n "$_cluster_dir" ] || return 0
  local dir=$_cluster_dir
  _cluster_dir=''
  as_pg_user "$GKNN_PG_BIN/pg_ctl" -D "$dir/pgdata" -m fast -w -s stop >/dev/null 2>&1 || true
  [ -z "${GKNN_CLUSTER_LOG:-}" ] || cp "$dir/server.log" "$GKNN_CLUSTER_LOG" 2>/dev/null || true
  [ -z "$_cluster_sock" ] || rm -rf "$_cluster_sock"
  ((_cluster_temp == 0)) || rm -rf "$dir"
  _cluster_sock=''
  _cluster_temp=0
}

cluster_log_file() {
  [ -z "$_cluster_dir" ] || echo "$_cluster_dir/server.log"
}

# psql of the cluster's own version (Debian's /usr/bin/psql is a wrapper that
# picks one; a GPU host has only the packed one).
cluster_psql() {
  if [ -x "$GKNN_PG_BIN/psql" ]; then
    "$GKNN_PG_BIN/psql" -X -v ON_ERROR_STOP=1 "$@"
  else
    psql -X -v ON_ERROR_STOP=1 "$@"
  fi
}

cluster_create_db() {
  local db=$1 ext
  shift
  cluster_psql -q -d postgres -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS \"$db\"" -c "CREATE DATABASE \"$db\""
  for ext in "$@"; do
    cluster_psql -q -d "$db" -c "CREATE EXTENSION \"$ext\""
  done
}
