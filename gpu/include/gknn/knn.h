// Exact k-nearest-neighbour search, batched: nq queries against n base
// vectors, each row of results ordered by (distance, id) with NaN last.
// Shaped as a batch request so a later GPU service can take many at once.
#pragma once

#include <cstdint>

#include "gknn/distance.h"

namespace gknn {

// Arithmetic of the GEMM that proposes candidates (L2, inner product and
// cosine); the candidates are re-ranked with the exact float32 distances, so
// results are the same in every mode, only the speed differs.
enum class GemmPrecision { Fp32, Tf32, Bf16 };

struct KnnRequest {
  const float* base = nullptr;  // n x dim, row-major, host memory
  std::int64_t n = 0;
  const float* queries = nullptr;  // nq x dim, row-major, host memory
  std::int64_t nq = 0;
  int dim = 0;
  int k = 0;
  Metric metric = Metric::L2;
  GemmPrecision precision = GemmPrecision::Fp32;
};

// Outputs are nq x k, row-major. A row with fewer than k base vectors is
// padded with id -1 and distance NaN. Distances are the SQL operator values.
void exact_knn_cpu(const KnnRequest& req, std::int64_t* ids, double* distances);
// The GPU path: the algorithm choose_knn (gknn/plan.h) picks for the shape.
void exact_knn_gpu(const KnnRequest& req, int device, std::int64_t* ids, double* distances);
// cuBLAS GEMM on augmented rows + k-select + certified exact re-rank (L2, inner
// product, cosine; falls back to brute force where it cannot run).
void exact_knn_gpu_gemm(const KnnRequest& req, int device, std::int64_t* ids, double* distances);
// Whether the GEMM path takes this shape (a dot-product metric, a candidate
// list of k plus a margin that the batched selection and the re-rank hold, a
// base several times that list); otherwise exact_knn_gpu_gemm runs brute force.
bool exact_knn_gpu_gemm_fits(std::int64_t n, int k, Metric metric);
// Distance and k-selection fused in one kernel (k <= 2048; small dimensions).
void exact_knn_gpu_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances);
// Whether the fused kernel's shared memory for (dim, k) fits the device.
bool exact_knn_gpu_fused_fits(int dim, int k, int device);
// Few queries over a large base: each row read once for up to 16 queries
// (the CPU's distance bits), a distance matrix, batched k-selection (k <= 2048).
void exact_knn_gpu_scan(const KnnRequest& req, int device, std::int64_t* ids, double* distances);
// Whether the scan takes (dim, k): its selection holds k, its shared memory
// one query of dim floats (kScanMaxDim, gknn/plan.h).
bool exact_knn_gpu_scan_fits(int dim, int k);
// Distance kernel + segmented sort: the exact baseline and the fallback.
void exact_knn_gpu_bruteforce(const KnnRequest& req, int device, std::int64_t* ids, double* distances);

// Throws Error(InvalidArgument) for inconsistent sizes.
void validate(const KnnRequest& req);

}  // namespace gknn
