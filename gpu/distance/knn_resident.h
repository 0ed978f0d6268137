// Exact kNN over a base that is already in device memory (a resident
// image's vectors), for the library's own callers: the algorithms of
// gknn/knn.h without the upload of the base. Not a public header.
//
// `req.base` is a device pointer on `device` (n x dim floats, row-major);
// queries and results are host memory, as in gknn/knn.h. Results are those
// of exact_knn_cpu over the same rows: ids are row numbers, ties by row.
// The public exact_knn_gpu_* functions upload the base and call these.
#pragma once

#include <cstdint>
#include <functional>

#include "distance/pad_results.h"
#include "gknn/knn.h"
#include "runtime/cuda_check.h"

namespace gknn {

// The base's half of the GEMM path (augmented rows, |y|^2 and the largest
// of them), made once for a resident base that is searched many times
// instead of in every call: a resident image keeps one. Made on the
// current device, which must be `device`.
struct GemmBase {
  GemmBase(const float* base, std::int64_t n, int dim, Metric metric, int device);
  std::size_t bytes() const;
  const float* base;  // the rows it was made from (a device pointer)
  Metric metric;
  int dim;
  std::int64_t n;
  DeviceBuffer<float> aug;
  DeviceBuffer<double> sq;
  double y_max_sq = 0.0;
};

// The GEMM path's base half, made only when the GEMM path is taken (a
// resident image makes its GemmBase on first use and keeps it).
using GemmBaseSource = std::function<const GemmBase*()>;

// The algorithm choose_knn (gknn/plan.h) picks for the shape; the GEMM path
// uses what `prepared` gives when it was made from req.base for req.metric.
// Results are row numbers, or with `row_ids` (a device array on `device`,
// one id per base row) those rows' ids, mapped on the device.
void exact_knn_resident(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                        const GemmBaseSource& prepared = {}, const std::int64_t* row_ids = nullptr);
void exact_knn_resident_gemm(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                             const GemmBase* prepared = nullptr, const std::int64_t* row_ids = nullptr);
void exact_knn_resident_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                              const std::int64_t* row_ids = nullptr);
// A caller's own keys for the scan's passes, for L2 only: query q's key of
// a row is the float sum of squares as distance() sums it (the bits of
// group_l2_squared), or +inf for a row the caller has shown to be farther
// than the query's k-th best (so that at least k rows keep a finite key
// wherever any row is ruled out). prepare() runs once for each group of up
// to kSharedConstants queries (device copies) before that group's passes;
// keys() fills a pass's matrix: rows [first, first + rows) of the base,
// query q's key of row first + p at matrix[q * rows + p]. Both queue work on
// `s` only. (ivfpq's pruned exact search: exact_pruned_cuda.cu.)
class ScanKeys {
 public:
  virtual ~ScanKeys() = default;
  virtual void prepare(const float* queries, std::int64_t nq, cudaStream_t s) = 0;
  virtual void keys(const float* queries, std::int64_t nq, std::int64_t first, std::int64_t rows,
                    float* matrix, cudaStream_t s) = 0;
};

// With `keys` (req.metric L2, else Error(InvalidArgument)) the passes'
// matrices are the caller's instead of the scan kernel's.
void exact_knn_resident_scan(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                             const std::int64_t* row_ids = nullptr, ScanKeys* keys = nullptr);
void exact_knn_resident_bruteforce(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                                   const std::int64_t* row_ids = nullptr);

// ids[i] = row_ids[ids[i]] for the n entries of a device array on `s`
// (padding, -1, stays).
void map_rows_async(std::int64_t* ids, std::int64_t n, const std::int64_t* row_ids, cudaStream_t s);

// The public functions: req.base (host) uploaded to `device`, then
// `resident` over it. Where there is no work (no base row, query or k) the
// request goes through unchanged: the resident functions then only write
// padding, and read no base row.
template <typename Fn>
void with_uploaded_base(const KnnRequest& req, int device, Fn&& resident) {
  validate(req);
  if (req.n == 0 || req.nq == 0 || req.k == 0) return resident(req);
  GKNN_CUDA(cudaSetDevice(device));
  DeviceBuffer<float> d_base(req.n * req.dim);
  GKNN_CUDA(cudaMemcpy(d_base.get(), req.base, sizeof(float) * req.n * req.dim, cudaMemcpyHostToDevice));
  KnnRequest r = req;
  r.base = d_base.get();
  resident(r);
}

}  // namespace gknn
