#!/usr/bin/env bash
# Every kernel benchmark of issue 3 in one run, on the GPU host:
#   7a/7c gknn_bench_select 29      one-array top-k, k sweep and input distributions
#   7b    gknn_bench_rows 10000     batched rows (the Faiss paper's Fig 3)
#   7d    gknn_bench_knn            exact kNN 1M x 128, 10000 queries, k = 100
#         gknn_bench_knn sweep      the chooser's fused-vs-GEMM measurement
#         gknn_bench_expr_topk      GpuTopK over kept batches (the table cache's ranking), 10M rows
# Each prints its table last and writes bench/results/<name>-<device>-<date>.md.
#
#   bench/kernels/run.sh [BIN_DIR=build/cmake/bench/kernels]
# On the GPU host, where libcublas.so.13 is not on the loader's path, set
# GKNN_CUBLAS to its full path.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/cmake/bench/kernels}
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ /-/g')
date=$(date -u +%F)
out=bench/results
mkdir -p "$out"
rc=0
"$bin/gknn_bench_select" 29 "$out/select-topk-$device-$date.md" || rc=1
"$bin/gknn_bench_rows" 10000 "$out/select-rows-$device-$date.md" || rc=1
"$bin/gknn_bench_knn" 1000000 10000 "$out/knn-exact-$device-$date.md" || rc=1
"$bin/gknn_bench_knn" sweep "$out/knn-chooser-$device-$date.md" || rc=1
"$bin/gknn_bench_expr_topk" 10000000 5 "$out/expr-topk-kept-$device-$date.md" || rc=1
exit $rc
