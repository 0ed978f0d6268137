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

#include <atomic>
#include <cstdint>
#include <type_traits>
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

// One element's term of a row's sum (s) and, for cosine, of the constant's
// norm (nb; the row's own norm is summed by the caller), in distance()'s
// operations. METRIC: gknn::Metric, or interp::kMetricPositiveIp.
template <int METRIC>
__device__ __forceinline__ void add_term(float a, float q, float& s, float& nb) {
  if (METRIC == int(Metric::L2)) {
    s += detail::SquaredDiff{}(a, q);
  } else if (METRIC == int(Metric::L1)) {
    s += detail::AbsDiff{}(a, q);
  } else {
    s += detail::Product{}(a, q);
    if (METRIC == int(Metric::Cosine)) nb += detail::Product{}(q, q);
  }
}

// The distance from the combined sums, as the operator returns it.
template <int METRIC>
__device__ __forceinline__ double finish_distance(float s, float na, float nb) {
  if (METRIC == int(Metric::L2)) return sqrt(static_cast<double>(s));
  if (METRIC == int(Metric::InnerProduct)) return -static_cast<double>(s);
  if (METRIC == int(Metric::Cosine)) return cosine_from_sums(s, na, nb);
  return static_cast<double>(s);  // L1, positive inner product
}

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
// to kSharedConstants constants, each summed in the lanes and order of the
// kernel above (the same bits). Query q's distance of position p lands at
// out[q * query_stride + p].
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
constexpr int kSharedConstants = 16;  // sums held per thread
constexpr int kLoadsAhead = 4;        // a row's elements each thread loads at once
constexpr std::size_t kConstantsSmemMax = std::size_t(96) << 10;  // shared memory a launch may take
// Rows each thread sums its lane of, by sums per thread (QT): two where
// that measured faster on the H200 (60,000 x 784: QT 4 86 -> 71 us, 16:
// 165 -> 140 us), one where the second row's sums cost more in occupancy
// than the shared constants' reads save (QT 1: 59 -> 89 us, 8: 93 -> 108).
__host__ __device__ constexpr int rows_per_thread(int qt) { return qt == 4 || qt == 16 ? 2 : 1; }

// QT: sums per thread (a power of two up to kSharedConstants, the fewest
// that hold nq: the sums are the work, the row's read is shared).
// Row stride of the constants in shared memory: element i's QT values side
// by side (one 16-byte load per four), padded so that the eight lanes of a
// row (elements i .. i + 7) hit distinct banks.
template <int QT>
__host__ __device__ constexpr int constants_stride() {
  return QT >= 4 ? QT + 4 : QT;
}
template <int QT>
std::size_t constants_smem(int qdim) {
  return std::size_t(qdim) * constants_stride<QT>() * sizeof(float);
}

// Blocks loop over the rows (32 * rows_per_thread(QT) at a time), so that
// each loads a chunk's constants into shared memory once for many rows.
// Each thread sums its lane for rows_per_thread(QT) rows (32 apart): one
// read of an element's constants from shared memory serves them all.
template <int METRIC, int QT>
__global__ void vector_distances_many(const __grid_constant__ DistancesManyLaunch l) {
  constexpr int R = rows_per_thread(QT), kGroups = 256 / kDistanceLanes, kRowsPerBlock = kGroups * R;
  constexpr int S = constants_stride<QT>();
  extern __shared__ __align__(16) float consts[];
  const int lane = threadIdx.x % kDistanceLanes;
  const std::int64_t positions = l.stride * l.nbatches;
  for (int q0 = 0; q0 < l.nq; q0 += QT) {
    __syncthreads();  // the previous chunk's constants are no longer read
    // A chunk's constants past nq repeat the last one (read, never written).
    for (int t = threadIdx.x; t < QT * l.qdim; t += blockDim.x) {
      const int j = t / l.qdim, i = t - j * l.qdim;
      consts[i * S + j] = l.queries[static_cast<std::int64_t>(min(q0 + j, l.nq - 1)) * l.qdim + i];
    }
    __syncthreads();
    for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < positions;
         base += std::int64_t(gridDim.x) * kRowsPerBlock) {
      std::int64_t batch[R], row[R];
      const float* x[R];
      bool live[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::int64_t p = base + threadIdx.x / kDistanceLanes + r * kGroups;
        batch[r] = p / l.stride;
        row[r] = p - batch[r] * l.stride;
        x[r] = p < positions ? live_vector(l.views[batch[r]], l.column, l.stride, row[r], l.qdim) : nullptr;
        live[r] = x[r] != nullptr;
        // A row the interpreter will not read sums the first constant
        // instead (qdim readable floats; never written): no branch below.
        if (!live[r]) x[r] = l.queries;
      }
      float s[R][QT], nb[R][QT], na[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        na[r] = 0;
#pragma unroll
        for (int j = 0; j < QT; ++j) s[r][j] = nb[r][j] = 0;
      }
      // One element's terms (a[r]: row r's value) for every constant of the chunk.
      auto add = [&](const float(&a)[R], int i) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (METRIC == int(Metric::Cosine)) na[r] += detail::Product{}(a[r], a[r]);
        const float* c = consts + i * S;
        if constexpr (QT >= 4) {
#pragma unroll
          for (int j = 0; j < QT; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(c + j);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              add_term<METRIC>(a[r], v.x, s[r][j], nb[r][j]);
              add_term<METRIC>(a[r], v.y, s[r][j + 1], nb[r][j + 1]);
              add_term<METRIC>(a[r], v.z, s[r][j + 2], nb[r][j + 2]);
              add_term<METRIC>(a[r], v.w, s[r][j + 3], nb[r][j + 3]);
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < QT; ++j) {
            const float cj = c[j];
#pragma unroll
            for (int r = 0; r < R; ++r) add_term<METRIC>(a[r], cj, s[r][j], nb[r][j]);
          }
        }
      };
      // kLoadsAhead of the lane's elements of each row loaded before any is
      // summed: one 4-byte load in flight per thread left the kernel waiting
      // on memory (ncu: 15-53 cycles per issued instruction). The lane still
      // adds its elements in order: the same bits.
      int i = lane;
      for (; i + (kLoadsAhead - 1) * kDistanceLanes < l.qdim; i += kLoadsAhead * kDistanceLanes) {
        float a[kLoadsAhead][R];
#pragma unroll
        for (int u = 0; u < kLoadsAhead; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) a[u][r] = __ldg(x[r] + i + u * kDistanceLanes);
#pragma unroll
        for (int u = 0; u < kLoadsAhead; ++u) add(a[u], i + u * kDistanceLanes);
      }
      for (; i < l.qdim; i += kDistanceLanes) {
        float a[R];
#pragma unroll
        for (int r = 0; r < R; ++r) a[r] = __ldg(x[r] + i);
        add(a, i);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float nar = METRIC == int(Metric::Cosine) ? combine_lanes_shfl(na[r]) : 0.0f;
#pragma unroll
        for (int j = 0; j < QT; ++j) {
          const float sj = combine_lanes_shfl(s[r][j]);
          const float nbj = METRIC == int(Metric::Cosine) ? combine_lanes_shfl(nb[r][j]) : 0.0f;
          if (live[r] && lane == 0 && q0 + j < l.nq)
            l.out[(q0 + j) * l.query_stride + batch[r] * l.stride + row[r]] =
                finish_distance<METRIC>(sj, nar, nbj);
        }
      }
    }
  }
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

// Blocks for a vector_distances_many launch: as many as the SMs run at once
// with `smem` each, from the occupancy calculator (the blocks loop over the
// rows; one block more per SM than fit ran as a second, mostly idle wave:
// ncu, 1.2 waves). The kernel may take kConstantsSmemMax, set once per device
// (these calls cost more than a small launch); the SM count is the first
// device's (only the grid's size).
template <int METRIC, int QT>
std::int64_t distance_blocks(std::size_t smem, int threads) {
  auto kernel = vector_distances_many<METRIC, QT>;
  static const int sms = [] {
    int d = 0, n = 0;
    GKNN_CUDA(cudaGetDevice(&d));
    GKNN_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d));
    return n;
  }();
  static std::atomic<std::uint32_t> set_on{0};  // devices (bits) this kernel's attribute is set on
  int device = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  const std::uint32_t bit = 1u << (device & 31);
  if (!(set_on.load(std::memory_order_relaxed) & bit)) {
    GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kConstantsSmemMax)));
    set_on.fetch_or(bit);
  }
  int per_sm = 0;
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return std::max<std::int64_t>(1, std::int64_t(sms) * std::max(per_sm, 1));
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
  constexpr int kThreads = 256, kRows = kThreads / kDistanceLanes;
  const DistancesManyLaunch l{views, nbatches, stride, job.column,  d_queries,
                              nq,    job.qdim, out,    query_stride};
  // The most constants per pass whose chunk fits kConstantsSmemMax (one at
  // a time up to 16,000 dimensions).
  auto launch = [&](auto qt) {
    constexpr int QT = decltype(qt)::value;
    const std::size_t smem = constants_smem<QT>(job.qdim);
    const std::int64_t groups =
        (stride * nbatches + kRows * rows_per_thread(QT) - 1) / (kRows * rows_per_thread(QT));
    with_metric(job.metric, [&](auto m) {
      constexpr int M = decltype(m)::value;
      const std::int64_t grid = std::min<std::int64_t>(groups, distance_blocks<M, QT>(smem, kThreads));
      vector_distances_many<M, QT><<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(l);
    });
  };
  const std::size_t fits = kConstantsSmemMax;
  if (nq <= 1 || constants_smem<2>(job.qdim) > fits)
    launch(std::integral_constant<int, 1>{});
  else if (nq <= 2 || constants_smem<4>(job.qdim) > fits)
    launch(std::integral_constant<int, 2>{});
  else if (nq <= 4 || constants_smem<8>(job.qdim) > fits)
    launch(std::integral_constant<int, 4>{});
  else if (nq <= 8 || constants_smem<kSharedConstants>(job.qdim) > fits)
    launch(std::integral_constant<int, 8>{});
  else
    launch(std::integral_constant<int, kSharedConstants>{});
  GKNN_CUDA(cudaGetLastError());
}

}  // namespace gknn::expr
