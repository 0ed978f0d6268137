// GpuTopK's vector distances, computed before the interpreter runs. In
// row_words each thread evaluates one row, so a VecDist read the row's whole
// vector alone: 32 rows' vectors, 512 bytes apart for 128 dimensions, per warp
// load, 0.23 G rows/s for 1M x 128 (bench/results/expr-topk-H200-2026-11-27.md).
// Here eight threads share a row, in distance()'s eight lanes and order
// (distance/distances_many.cuh), so every distance has the bits the CPU
// computes. The interpreter still checks NULLs and dimensions (its errors, in
// scan order), then reads the distance instead of computing it
// (ColumnView::dist).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "distance/distances_many.cuh"
#include "expr/interp.cuh"
#include "gknn/distance.h"
#include "gknn/expr.h"
#include "runtime/cuda_check.h"

namespace gknn::expr {

// One vector column's distances to one constant: the first VecDist of the
// program on that column (others are computed by the interpreter).
struct DistanceJob {
  int column = 0;
  std::int32_t key = 0;       // interp::distance_key of the VecDist
  int metric = 0;             // in.type & 0x7f
  std::int64_t query_at = 0;  // offset of the constant in Program::vectors
  int qdim = 0;
};

inline std::vector<DistanceJob> distance_jobs(const Program& p) {
  std::vector<DistanceJob> jobs;
  for (const Instr& in : p.code) {
    if (in.op != Op::VecDist || p.const_nulls[in.aux]) continue;  // a NULL constant: every row NULL
    if ((in.type & 0x7f) > interp::kMetricPositiveIp) continue;   // none validate() lets through
    bool seen = false;
    for (const DistanceJob& j : jobs) seen = seen || j.column == in.arg;
    if (seen) continue;
    const std::int64_t packed = p.consts[in.aux].i;
    DistanceJob j;
    j.column = in.arg;
    j.key = interp::distance_key(in);
    j.metric = in.type & 0x7f;
    j.query_at = packed >> kVectorDimBits;
    j.qdim = static_cast<int>(packed & ((1 << kVectorDimBits) - 1));
    jobs.push_back(j);
  }
  return jobs;
}

struct DistancesLaunch {
  const BatchView* views;
  std::int64_t stride;  // positions per batch (row_words' numbering)
  int blocks_per_batch;
  int column;
  const float* query;  // device
  int qdim;
  double* out;  // at position batch * stride + row
};

// Whether the interpreter reads row `row`'s distance (a live row of the
// batch, not NULL, of the constant's dimension); the row's vector if so.
__device__ __forceinline__ const float* live_vector(const BatchView& b, int column, std::int64_t stride,
                                                    std::int64_t row, int qdim) {
  const ColumnView& c = b.column[column];
  const bool live = row < stride && row < b.n && !(c.nulls && c.nulls[row]) && c.dims[row] == qdim;
  return live ? static_cast<const float*>(c.data) + row * static_cast<std::int64_t>(c.dim) : nullptr;
}

template <int METRIC>
__global__ void vector_distances(const __grid_constant__ DistancesLaunch l) {
  constexpr int kRowsPerBlock = 256 / kDistanceLanes;
  const int lane = threadIdx.x % kDistanceLanes;
  const std::int64_t batch = blockIdx.x / l.blocks_per_batch;
  const std::int64_t row =
      (blockIdx.x % l.blocks_per_batch) * std::int64_t(kRowsPerBlock) + threadIdx.x / kDistanceLanes;
  // Every thread reaches the shuffles; rows the interpreter will not read
  // (past the batch, NULL, another dimension) sum nothing.
  const float* x = live_vector(l.views[batch], l.column, l.stride, row, l.qdim);
  float s = 0, na = 0, nb = 0;
  if (x)
    for (int i = lane; i < l.qdim; i += kDistanceLanes) {
      const float a = x[i];
      add_term<METRIC>(a, l.query[i], s, nb);
      if (METRIC == int(Metric::Cosine)) na += detail::Product{}(a, a);
    }
  s = combine_lanes_shfl(s);
  if (METRIC == int(Metric::Cosine)) {
    na = combine_lanes_shfl(na);
    nb = combine_lanes_shfl(nb);
  }
  if (x && lane == 0) l.out[batch * l.stride + row] = finish_distance<METRIC>(s, na, nb);
}

// Distances of one column to several constants of the same dimension and
// metric (programs ranked together): each row's vector is read once for up
// to kSharedConstants constants (distances_many, the same bits as the kernel
// above). Query q's distance of position p lands at out[q * query_stride + p].
struct DistancesManyLaunch {
  const BatchView* views;
  std::int64_t nbatches;
  std::int64_t stride;
  int column;
  const float* queries;  // nq constants of qdim floats, one after another (device)
  int nq, qdim;
  double* out;
  std::int64_t query_stride;
};

// distances_many's rows: the positions of the batches, a row where the
// interpreter will read its distance (live_vector).
template <int METRIC>
struct BatchRows {
  const DistancesManyLaunch& l;
  __device__ std::int64_t positions() const { return l.stride * l.nbatches; }
  __device__ const float* row(std::int64_t p) const {
    const std::int64_t batch = p / l.stride;
    return live_vector(l.views[batch], l.column, l.stride, p - batch * l.stride, l.qdim);
  }
  __device__ void store(std::int64_t p, int q, float s, float na, float nb) const {
    l.out[q * l.query_stride + p] = finish_distance<METRIC>(s, na, nb);
  }
};

template <int METRIC, int QT>
__global__ void __launch_bounds__(kDistanceThreads)
    vector_distances_many(const __grid_constant__ DistancesManyLaunch l) {
  distances_many<METRIC, QT>(BatchRows<METRIC>{l}, l.queries, l.nq, l.qdim);
}

// Calls f(std::integral_constant<int, METRIC>) for a DistanceJob's metric.
template <typename F>
void with_metric(int metric, F&& f) {
  switch (metric) {
    case int(Metric::L2):
      return f(std::integral_constant<int, int(Metric::L2)>{});
    case int(Metric::InnerProduct):
      return f(std::integral_constant<int, int(Metric::InnerProduct)>{});
    case int(Metric::Cosine):
      return f(std::integral_constant<int, int(Metric::Cosine)>{});
    case int(Metric::L1):
      return f(std::integral_constant<int, int(Metric::L1)>{});
    case interp::kMetricPositiveIp:
      return f(std::integral_constant<int, interp::kMetricPositiveIp>{});
  }
}

// Fills out[j * stride + r] for row r of views[j] (device), j < nbatches.
inline void launch_vector_distances(const DistanceJob& job, const float* d_vectors, const BatchView* views,
                                    std::int64_t nbatches, std::int64_t stride, double* out,
                                    cudaStream_t stream) {
  constexpr int kThreads = 256, kRows = kThreads / kDistanceLanes;
  const int per_batch = static_cast<int>((stride + kRows - 1) / kRows);
  const DistancesLaunch l{views, stride, per_batch, job.column, d_vectors + job.query_at, job.qdim, out};
  const unsigned grid = static_cast<unsigned>(per_batch * nbatches);
  with_metric(job.metric,
              [&](auto m) { vector_distances<decltype(m)::value><<<grid, kThreads, 0, stream>>>(l); });
  GKNN_CUDA(cudaGetLastError());
}

// The same for nq constants (d_queries: nq x job.qdim floats on the device):
// constant q's at out[q * query_stride + j * stride + r].
inline void launch_vector_distances_many(const DistanceJob& job, const float* d_queries, int nq,
                                         const BatchView* views, std::int64_t nbatches, std::int64_t stride,
                                         double* out, std::int64_t query_stride, cudaStream_t stream) {
  constexpr int kRows = kDistanceThreads / kDistanceLanes;
  const DistancesManyLaunch l{views, nbatches, stride, job.column,  d_queries,
                              nq,    job.qdim, out,    query_stride};
  with_queries_per_thread(nq, job.qdim, [&](auto qt) {
    constexpr int QT = decltype(qt)::value;
    const std::size_t smem = constants_smem<QT>(job.qdim);
    const std::int64_t groups =
        (stride * nbatches + kRows * rows_per_thread(QT) - 1) / (kRows * rows_per_thread(QT));
    with_metric(job.metric, [&](auto m) {
      constexpr int M = decltype(m)::value;
      const std::int64_t grid =
          std::min<std::int64_t>(groups, distance_blocks<vector_distances_many<M, QT>>(smem));
      vector_distances_many<M, QT><<<static_cast<unsigned>(grid), kDistanceThreads, smem, stream>>>(l);
    });
  });
  GKNN_CUDA(cudaGetLastError());
}

}  // namespace gknn::expr
