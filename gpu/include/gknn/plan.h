// Which algorithm runs a request: the one place where gknn chooses between
// its kernels, from the shape of the work (n, k, nq, d) and what the host
// has (cuBLAS). Thresholds are measured on the GPU host by bench/kernels
// (gknn_bench_knn sweep, gknn_bench_select) and recorded in bench/results/;
// each constant names the result it comes from.
//
// Inside one algorithm, shape-dependent tuning stays with the kernel (the
// rows selection's warps-per-row and parts-per-row plan, the bitonic run
// length), but the choice *between* algorithms is made here.
#pragma once

#include <cstdint>

#include "gknn/distance.h"

namespace gknn {

enum class KnnAlgo {
  Scan,        // each row read once for up to 16 queries, distance matrix, batched k-select
  Fused,       // distance + k-select in one kernel, no distance matrix
  Gemm,        // cuBLAS GEMM tiles + batched k-select + certified re-rank
  BruteForce,  // distance matrix + segmented sort: the baseline, any shape
};

enum class TopkAlgo {
  Bitonic,       // sampled threshold, streaming filter, bitonic top-k (k <= 1024)
  SampleSelect,  // sample splitters, bucket counts, recursion (any k)
};

struct KnnChoice {
  KnnAlgo algo;
  const char* reason;  // for EXPLAIN and logs
};

struct TopkChoice {
  TopkAlgo algo;
  const char* reason;
};

// Queries up to which the scan (each row read once for up to 16 queries, a
// distance matrix, batched selection) takes a request, from the kernels'
// times over a base already on the device (as a resident image's exact
// search runs them; bench/results/knn-resident-scan-H200-2026-11-28.md, k =
// 10): 0.27-0.98x the GEMM path's time up to 32 queries, 1.30-1.79x at 64 and
// 128; 0.30-0.87x the fused kernel's at every count. Above it the GEMM path,
// or where that cannot run (L1, no cuBLAS, k + margin above 2048) the fused
// kernel, whose warps each keep a query instead of a matrix per 16 queries.
constexpr std::int64_t kScanMaxQueries = 32;
// The scan holds a query in shared memory (96 KB): up to 24,576 dimensions.
constexpr int kScanMaxDim = 24576;
// The fused kernel's queue holds up to 2048 words, the GEMM path's candidate
// list k + max(32, k / 2) up to 2048 and its re-rank 4096.
constexpr int kFusedMaxK = 2048;

// have_cublas: cuBLAS loaded; fused_fits: the fused kernel's shared memory
// for (dim, k) fits the device (exact_knn_gpu_fused_fits).
KnnChoice choose_knn(std::int64_t n, std::int64_t nq, int dim, int k, Metric metric, bool have_cublas,
                     bool fused_fits);
// Bitonic top-k covers k <= 1024 (bench/results/select-topk-*.md: 16-19x a
// sort at 2^29, 2.5-3.8x a radix select); SampleSelect takes larger k.
TopkChoice choose_topk(std::int64_t n, std::int64_t k);

const char* algo_name(KnnAlgo a);
const char* algo_name(TopkAlgo a);

}  // namespace gknn
