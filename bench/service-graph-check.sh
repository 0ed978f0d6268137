#!/usr/bin/env bash
# On the GPU host, the gpu_graph service stage alone (regress/service-graph.sh,
# TAP: the resident graph kernel and its ring among it) against the packed
# server started with the environment given (e.g. CUDA_VISIBLE_DEVICES=0):
# a minute or two instead of gpu-check.sh's whole suite.
#
#   bench/service-graph-check.sh OUT [NAME=VALUE...]   as root
set -uo pipefail
out=${1:?usage: service-graph-check.sh OUT [NAME=VALUE...]}
shift
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
bundle=/tmp/gknn-pg-bundle
rm -rf "$bundle" && mkdir -p "$bundle" && tar -xzf .device/pg-bundle.tar.gz -C "$bundle" || exit 1
touch /tmp/gknn-pg.env
(cd "$bundle" && env "$@" ./start-postgres.sh /tmp/gknn-pgdata -- shared_preload_libraries=gknn gknn.service=gpu) ||
  exit 1
# shellcheck source=/dev/null
. "$bundle/bundle.env"
# shellcheck source=/dev/null
. /tmp/gknn-pg.env
GKNN_PSQL=$PGBIN/psql GKNN_PGBENCH=$PGBIN/pgbench regress/service-graph.sh >"$out/service-graph.tap" 2>&1
rc=$?
echo "service-graph.sh rc $rc: $(grep -c '^ok' "$out/service-graph.tap") ok, $(grep -c '^not ok' "$out/service-graph.tap") not ok"
grep -E 'gknn|PANIC|FATAL|TRAP|terminated by signal' /tmp/gknn-pg.log | tail -200 >"$out/server-log.txt"
runuser -u gknnpg -- env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$PGBIN/pg_ctl" -D "$GKNN_PGDATA" -m fast -w stop >/dev/null 2>&1
exit $rc
