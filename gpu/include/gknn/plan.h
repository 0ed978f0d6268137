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

// Measured crossover over a base already on the device
// (bench/results/knn-resident-H200-2026-11-28.md, two H200s, k = 10: the
// kernels alone, as a resident image's exact search runs them): the fused
// kernel takes 0.37-0.68x the GEMM path's time for one query, 0.52-0.95x at
// 8, 0.76-1.28x at 16 (1M x 128 crosses at 16-24 queries, 60,000 x 784 at
// 8-12), 1.23-2.11x at 32 and 2.17-3.39x at 64. 12 is between the two. (The
// earlier crossover at ~100 queries, knn-chooser-H200-2026-11-21.md, timed
// both with the base's upload, which took most of either call.)
constexpr std::int64_t kFusedMaxQueries = 12;
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
