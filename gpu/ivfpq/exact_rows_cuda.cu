// Exact distances over resident vectors whose elements are not floats
// (binary16, bit strings; exact_rows.h). The re-rank's candidates get one
// thread each; the exact search ranks every row by brute force (the exact
// kNN code of gknn/knn.h takes float rows): per batch of queries, one
// thread per (query, row) computes row_distance (stored_rows.h: the CPU
// reference's code, built without FMA contraction, so its bits), and the
// project's row selection keeps the k best by (distance, row). Rows are
// resident in id order, so ties by row are ties by id: search_exact_cpu's
// results.
#include <algorithm>
#include <cstdint>

#include "gknn/error.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
#include "ivfpq/exact_rows.h"
#include "ivfpq/stored_rows.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;
// Distances per batch (8 bytes each): 2^26 of them, 512 MiB at most.
constexpr std::int64_t kBatchDistances = std::int64_t(1) << 26;
constexpr std::int64_t kMaxBatchRows = 65535;

template <typename Rows>
__global__ void all_distances(Rows rows, std::int64_t n, int dim, Metric metric, const float* queries,
                              std::int64_t nq, double* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nq * n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = canonical_score(row_distance(metric, rows, i % n, queries + (i / n) * dim, dim));
}

// The re-rank's candidates: rank ~0 is padding (NaN).
template <typename Rows>
__global__ void rank_distances(const std::uint64_t* ranks, std::int64_t rows, int count, Rows stored,
                               const float* queries, int dim, Metric metric, double* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t r = ranks[i];
    out[i] = r == ~std::uint64_t(0) ? __longlong_as_double(0x7ff8000000000000LL)
                                    : canonical_score(row_distance(metric, stored, std::int64_t(r),
                                                                   queries + (i / count) * dim, dim));
  }
}

// Selected rows -> ids; padding (a column past the rows) -> id -1, NaN.
__global__ void rows_to_results(const double* keys, const std::uint32_t* cols, std::int64_t count,
                                std::int64_t n, const std::int64_t* ranked_ids, std::int64_t* ids,
                                double* distances) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const bool real = cols[i] < n;
    ids[i] = real ? ranked_ids[cols[i]] : -1;
    distances[i] = real ? keys[i] : __longlong_as_double(0x7ff8000000000000LL);
  }
}

template <typename Rows>
void exact_rows(Rows rows, std::int64_t n, int dim, Metric metric, const std::int64_t* ranked_ids,
                const float* queries, std::int64_t nq, int k, std::int64_t* ids, double* distances,
                cudaStream_t s) {
  if (n == 0) return pad_results(ids, distances, nq * k);
  const std::int64_t batch = std::clamp<std::int64_t>(kBatchDistances / n, 1, kMaxBatchRows);
  for (std::int64_t q0 = 0; q0 < nq; q0 += batch) {
    const std::int64_t m = std::min(batch, nq - q0);
    AsyncBuffer<float> q(m * dim, s);
    upload_async(q.get(), queries + q0 * dim, sizeof(float) * m * dim, 0, s);
    AsyncBuffer<double> dist(m * n, s), keys(m * k, s), out_dist(m * k, s);
    AsyncBuffer<std::uint32_t> cols(m * k, s);
    AsyncBuffer<std::int64_t> out_ids(m * k, s);
    all_distances<<<grid_for(m * n, kThreads), kThreads, 0, s>>>(rows, n, dim, metric, q.get(), m,
                                                                 dist.get());
    GKNN_CUDA(cudaGetLastError());
    select_best(dist.get(), m, n, k, keys.get(), cols.get(), s);
    rows_to_results<<<grid_for(m * k, kThreads), kThreads, 0, s>>>(keys.get(), cols.get(), m * k, n,
                                                                   ranked_ids, out_ids.get(), out_dist.get());
    GKNN_CUDA(cudaGetLastError());
    download_and_wait(ids + q0 * k, out_ids.get(), sizeof(std::int64_t) * m * k, distances + q0 * k,
                      out_dist.get(), sizeof(double) * m * k, 1, s);
  }
}

// Calls fn(rows) with the packed rows' accessor.
template <typename Fn>
void with_packed(VectorElement element, const void* packed, Fn&& fn) {
  if (element == VectorElement::Float16) return fn(HalfRows{static_cast<const std::uint16_t*>(packed)});
  if (element == VectorElement::Bit) return fn(BitRows{static_cast<const std::uint8_t*>(packed)});
  throw Error(ErrorCode::InvalidArgument, "ivfpq: float rows are not packed rows");
}

}  // namespace

void packed_rank_distances(VectorElement element, const void* packed, const std::uint64_t* ranks,
                           std::int64_t rows, int count, const float* queries, int dim, Metric metric,
                           double* out, cudaStream_t s) {
  const std::int64_t n = rows * count;
  with_packed(element, packed, [&](auto stored) {
    rank_distances<<<grid_for(n, kThreads), kThreads, 0, s>>>(ranks, rows, count, stored, queries, dim,
                                                              metric, out);
  });
  GKNN_CUDA(cudaGetLastError());
}

void packed_exact_search(VectorElement element, const void* packed, std::int64_t n, int dim, Metric metric,
                         const std::int64_t* ranked_ids, const float* queries, std::int64_t nq, int k,
                         std::int64_t* ids, double* distances, cudaStream_t s) {
  with_packed(element, packed, [&](auto stored) {
    exact_rows(stored, n, dim, metric, ranked_ids, queries, nq, k, ids, distances, s);
  });
}

}  // namespace gknn::ivfpq
