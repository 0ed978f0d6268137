#!/usr/bin/env bash
# An A/B of a GPU service setting on the GPU host, in one call (about seven
# minutes): the fashion-mnist-service-ab experiment (gpu_graph ef 16 / 20,
# gpu_ivfpq refined and exact, 16 and 64 clients through the service, no
# pgvector) run A B A B, A the server as packed, B the server started with
# NAME=VALUE...: a name with a dot is a server setting (a GUC such as
# gknn.service_poll_us, given to postgres with -c), any other goes into its
# environment (an experiment's GKNN_* switch, read when the service starts).
# The alternation bounds the host's drift; one table of the four runs side by
# side (bench/service_ab_table.py).
#
#   [ROUNDS=2] bench/service-ab.sh OUT NAME=VALUE [NAME=VALUE...]
#
# ROUNDS=1 runs A B only (about four minutes: where device time is short;
# the host's drift then goes unbounded).
#
# Needs what bench/gpu-host-bench.sh needs (the bundle, the bench tools,
# .device/data/fashion-mnist). Writes OUT/service-ab.md, each run's log and
# result under OUT/A1 ... OUT/B2, and the table as
# bench/results/service-ab-<settings>-<device>-<date>.md.
set -uo pipefail
out=${1:?usage: service-ab.sh OUT NAME=VALUE...}
shift
[ $# -gt 0 ] || { echo "usage: $0 OUT NAME=VALUE..." >&2; exit 2; }
envs=() gucs=()
for s in "$@"; do
  [[ $s =~ ^[A-Za-z_][A-Za-z0-9_.]*=[^[:space:]]*$ ]] || { echo "not NAME=VALUE: $s" >&2; exit 2; }
  if [[ ${s%%=*} == *.* ]]; then gucs+=("$s"); else envs+=("$s"); fi
done
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
# The experiment file's clients, not gpu-host-bench.sh's default ones.
export RUN_OPTS=${RUN_OPTS:---queries 10000}
# The last arm's server (B: the setting on) must not serve later steps:
# gpu-host-bench.sh reuses a server while its marker is there.
trap 'rm -f /tmp/gknn-bench-server' EXIT
runs=()
rounds=${ROUNDS:-2}
[[ $rounds =~ ^[1-9]$ ]] || { echo "ROUNDS must be 1-9" >&2; exit 2; }
for round in $(seq 1 "$rounds"); do
  for arm in A B; do
    settings=(GKNN_SERVER_SETTINGS=)
    [ "$arm" = A ] || settings=(${envs[@]+"${envs[@]}"} "GKNN_SERVER_SETTINGS=${gucs[*]}")
    dir=$out/$arm$round
    # A fresh server, a fresh result (this is the GPU host's copy of the tree).
    rm -rf /tmp/gknn-bench-server "$dir" bench/results/fashion-mnist-service-ab-*
    env "${settings[@]}" bench/gpu-host-bench.sh "$dir" server fashion-mnist-service-ab
    # shellcheck disable=SC2012  # the step's own result file
    result=$(ls -t bench/results/fashion-mnist-service-ab-*.json 2>/dev/null | head -1)
    if ! grep -q '^step server: rc 0' "$dir/steps.txt" 2>/dev/null ||
      ! grep -q '^step fashion-mnist-service-ab: rc 0' "$dir/steps.txt" || [ -z "$result" ]; then
      echo "run $arm$round failed: $dir" >&2
      exit 1
    fi
    mv "$result" "$dir/result.json"
    runs+=("$arm$round=$dir/result.json")
  done
done
rm -f bench/results/fashion-mnist-service-ab-*
python3 bench/service_ab_table.py "$@" -- "${runs[@]}" >"$out/service-ab.md" || exit 1
device=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["environment"]["device"], end="")' "$out/A1/result.json" |
  tr -c 'A-Za-z0-9_-' '-')
tag=$(printf '%s' "$*" | tr -c 'A-Za-z0-9=_-' '-' | tr '=' '-')
cp "$out/service-ab.md" "bench/results/service-ab-$tag-$device-$(date +%F).md"
cat "$out/service-ab.md"
