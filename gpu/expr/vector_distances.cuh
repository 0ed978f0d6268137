// GpuTopK's vector distances, computed before the interpreter runs. In
// row_words each thread evaluates one row, so a VecDist read the row's whole
// vector alone: 32 rows' vectors, 512 bytes apart for 128 dimensions, per warp
// load, 0.23 G rows/s for 1M x 128 (bench/results/expr-topk-H200-2026-11-27.md).
// Here eight threads share a row: thread l sums the elements l, l + 8, ... in
// order, which is exactly lane l of distance()'s eight-lane sum
// (gknn/distance.h), and three shuffles add the lanes in combine_lanes' order,
// so every distance has the bits the CPU computes. The interpreter still
// checks NULLs and dimensions (its errors, in scan order), then reads the
// distance instead of computing it (ColumnView::dist).
#pragma once

#include <cstdint>
#include <vector>

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

constexpr int kDistanceLanes = detail::kLanes;  // threads per row
static_assert(kDistanceLanes == 8, "the shuffles below add eight lanes as combine_lanes does");

// combine_lanes' ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)), on lane 0
// of each group of eight (float addition commutes exactly).
__device__ __forceinline__ float combine_lanes_shfl(float a) {
  a = a + __shfl_xor_sync(0xffffffffu, a, 4);
  a = a + __shfl_xor_sync(0xffffffffu, a, 1);
  return a + __shfl_xor_sync(0xffffffffu, a, 2);
}

// METRIC: gknn::Metric, or interp::kMetricPositiveIp.
template <int METRIC>
__global__ void vector_distances(const __grid_constant__ DistancesLaunch l) {
  constexpr int kRowsPerBlock = 256 / kDistanceLanes;
  const int lane = threadIdx.x % kDistanceLanes;
  const std::int64_t batch = blockIdx.x / l.blocks_per_batch;
  const std::int64_t row =
      (blockIdx.x % l.blocks_per_batch) * std::int64_t(kRowsPerBlock) + threadIdx.x / kDistanceLanes;
  const BatchView& b = l.views[batch];
  const ColumnView& c = b.column[l.column];
  // Every thread reaches the shuffles; rows the interpreter will not read
  // (past the batch, NULL, another dimension) sum nothing.
  const bool live = row < l.stride && row < b.n && !(c.nulls && c.nulls[row]) && c.dims[row] == l.qdim;
  float s = 0, na = 0, nb = 0;
  if (live) {
    const float* x = static_cast<const float*>(c.data) + row * static_cast<std::int64_t>(c.dim);
    for (int i = lane; i < l.qdim; i += kDistanceLanes) {
      const float a = x[i], q = l.query[i];
      if (METRIC == int(Metric::L2)) {
        s += detail::SquaredDiff{}(a, q);
      } else if (METRIC == int(Metric::L1)) {
        s += detail::AbsDiff{}(a, q);
      } else {
        s += detail::Product{}(a, q);
        if (METRIC == int(Metric::Cosine)) {
          na += detail::Product{}(a, a);
          nb += detail::Product{}(q, q);
        }
      }
    }
  }
  s = combine_lanes_shfl(s);
  if (METRIC == int(Metric::Cosine)) {
    na = combine_lanes_shfl(na);
    nb = combine_lanes_shfl(nb);
  }
  if (!live || lane != 0) return;
  double d;
  if (METRIC == int(Metric::L2))
    d = sqrt(static_cast<double>(s));
  else if (METRIC == int(Metric::InnerProduct))
    d = -static_cast<double>(s);
  else if (METRIC == int(Metric::Cosine))
    d = cosine_from_sums(s, na, nb);
  else
    d = static_cast<double>(s);  // L1, positive inner product
  l.out[batch * l.stride + row] = d;
}

// Fills out[j * stride + r] for row r of views[j] (device), j < nbatches.
inline void launch_vector_distances(const DistanceJob& job, const float* d_vectors, const BatchView* views,
                                    std::int64_t nbatches, std::int64_t stride, double* out,
                                    cudaStream_t stream) {
  constexpr int kThreads = 256, kRows = kThreads / kDistanceLanes;
  const int per_batch = static_cast<int>((stride + kRows - 1) / kRows);
  const DistancesLaunch l{views, stride, per_batch, job.column, d_vectors + job.query_at, job.qdim, out};
  const unsigned grid = static_cast<unsigned>(per_batch * nbatches);
  switch (job.metric) {
    case int(Metric::L2):
      vector_distances<int(Metric::L2)><<<grid, kThreads, 0, stream>>>(l);
      break;
    case int(Metric::InnerProduct):
      vector_distances<int(Metric::InnerProduct)><<<grid, kThreads, 0, stream>>>(l);
      break;
    case int(Metric::Cosine):
      vector_distances<int(Metric::Cosine)><<<grid, kThreads, 0, stream>>>(l);
      break;
    case int(Metric::L1):
      vector_distances<int(Metric::L1)><<<grid, kThreads, 0, stream>>>(l);
      break;
    case interp::kMetricPositiveIp:
      vector_distances<interp::kMetricPositiveIp><<<grid, kThreads, 0, stream>>>(l);
      break;
  }
  GKNN_CUDA(cudaGetLastError());
}

}  // namespace gknn::expr
