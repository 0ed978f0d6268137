// Distances of many rows to several queries (up to kSharedConstants at a
// time) with each row read from memory once for all of them: the body shared
// by GpuTopK's ranked programs (expr/vector_distances.cuh, rows in batches)
// and the exact kNN scan over a resident base (distance/knn_scan.cu).
//
// Eight threads share a row: thread l sums the elements l, l + 8, ... in
// order, which is exactly lane l of distance()'s eight-lane sum
// (gknn/distance.h), and three shuffles add the lanes in combine_lanes' order,
// so every distance has the bits the CPU computes (the library is built
// without FMA contraction).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "gknn/distance.h"
#include "runtime/cuda_check.h"

namespace gknn {

constexpr int kDistanceLanes = detail::kLanes;  // threads per row
static_assert(kDistanceLanes == 8, "the shuffles below add eight lanes as combine_lanes does");

// combine_lanes' ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)), on lane 0
// of each group of eight (float addition commutes exactly).
__device__ __forceinline__ float combine_lanes_shfl(float a) {
  a = a + __shfl_xor_sync(0xffffffffu, a, 4);
  a = a + __shfl_xor_sync(0xffffffffu, a, 1);
  return a + __shfl_xor_sync(0xffffffffu, a, 2);
}

// One element's term of a row's sum (s) and, for cosine, of the query's
// norm (nb; the row's own norm is summed by the caller), in distance()'s
// operations. METRIC: gknn::Metric, or a caller's own code for another
// product metric (GpuTopK's positive inner product).
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

constexpr int kSharedConstants = 16;  // sums held per thread
constexpr int kLoadsAhead = 4;        // a row's elements each thread loads at once (LA below)
constexpr std::size_t kConstantsSmemMax = std::size_t(96) << 10;  // shared memory a launch may take
// Rows each thread sums its lane of, by sums per thread (QT): two where
// that measured faster on the H200 (60,000 x 784: QT 4 86 -> 71 us, 16:
// 165 -> 140 us), one where the second row's sums cost more in occupancy
// than the shared constants' reads save (QT 1: 59 -> 89 us, 8: 93 -> 108).
__host__ __device__ constexpr int rows_per_thread(int qt) { return qt == 4 || qt == 16 ? 2 : 1; }

// QT: sums per thread (a power of two up to kSharedConstants, the fewest
// that hold nq: the sums are the work, the row's read is shared).
// Row stride of the queries in shared memory: element i's QT values side
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

// Calls f(std::integral_constant<int, QT>) for the fewest sums per thread
// that hold nq queries and whose chunk fits kConstantsSmemMax (one query at
// a time above 12,288 dimensions; none fits above 24,576).
template <typename F>
void with_queries_per_thread(int nq, int qdim, F&& f) {
  const std::size_t fits = kConstantsSmemMax;
  if (nq <= 1 || constants_smem<2>(qdim) > fits) return f(std::integral_constant<int, 1>{});
  if (nq <= 2 || constants_smem<4>(qdim) > fits) return f(std::integral_constant<int, 2>{});
  if (nq <= 4 || constants_smem<8>(qdim) > fits) return f(std::integral_constant<int, 4>{});
  if (nq <= 8 || constants_smem<kSharedConstants>(qdim) > fits) return f(std::integral_constant<int, 8>{});
  return f(std::integral_constant<int, kSharedConstants>{});
}

constexpr int kDistanceThreads = 256;  // a block of the kernels below

// The body of a kernel of 256 threads: rows.positions() positions, position
// p's row rows.row(p) (nullptr: nothing to compute there), its sums for
// query q handed to rows.store(p, q, s, na, nb) (na, nb: cosine's norms).
// The queries (nq x qdim floats, device) are taken QT at a time into
// dynamic shared memory of constants_smem<QT>(qdim) bytes. Blocks loop over
// the rows (32 * rows_per_thread(QT) at a time), so that each loads a chunk's
// queries into shared memory once for many rows; each thread sums its lane
// for rows_per_thread(QT) rows (32 apart): one read of an element's queries
// from shared memory serves them all. LA: elements of a row each thread
// loads before it sums any.
template <int METRIC, int QT, typename Rows, int LA = kLoadsAhead>
__device__ __forceinline__ void distances_many(const Rows& rows, const float* queries, int nq, int qdim) {
  constexpr int R = rows_per_thread(QT), kGroups = kDistanceThreads / kDistanceLanes,
                kRowsPerBlock = kGroups * R;
  constexpr int S = constants_stride<QT>();
  extern __shared__ __align__(16) float distances_many_consts[];
  float* consts = distances_many_consts;
  const int lane = threadIdx.x % kDistanceLanes;
  const std::int64_t positions = rows.positions();
  for (int q0 = 0; q0 < nq; q0 += QT) {
    __syncthreads();  // the previous chunk's queries are no longer read
    // A chunk's queries past nq repeat the last one (read, never stored).
    for (int t = threadIdx.x; t < QT * qdim; t += blockDim.x) {
      const int j = t / qdim, i = t - j * qdim;
      consts[i * S + j] = queries[static_cast<std::int64_t>(min(q0 + j, nq - 1)) * qdim + i];
    }
    __syncthreads();
    for (std::int64_t base = std::int64_t(blockIdx.x) * kRowsPerBlock; base < positions;
         base += std::int64_t(gridDim.x) * kRowsPerBlock) {
      std::int64_t p[R];
      const float* x[R];
      bool live[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        p[r] = base + threadIdx.x / kDistanceLanes + r * kGroups;
        x[r] = p[r] < positions ? rows.row(p[r]) : nullptr;
        live[r] = x[r] != nullptr;
        // A row with nothing to compute sums the first query instead (qdim
        // readable floats; never stored): no branch below.
        if (!live[r]) x[r] = queries;
      }
      float s[R][QT], nb[R][QT], na[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        na[r] = 0;
#pragma unroll
        for (int j = 0; j < QT; ++j) s[r][j] = nb[r][j] = 0;
      }
      // One element's terms (a[r]: row r's value) for every query of the chunk.
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
      // LA of the lane's elements of each row loaded before any is summed:
      // one 4-byte load in flight per thread left the kernel waiting on
      // memory (ncu: 15-53 cycles per issued instruction). The lane still
      // adds its elements in order: the same bits.
      int i = lane;
      for (; i + (LA - 1) * kDistanceLanes < qdim; i += LA * kDistanceLanes) {
        float a[LA][R];
#pragma unroll
        for (int u = 0; u < LA; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) a[u][r] = __ldg(x[r] + i + u * kDistanceLanes);
#pragma unroll
        for (int u = 0; u < LA; ++u) add(a[u], i + u * kDistanceLanes);
      }
      for (; i < qdim; i += kDistanceLanes) {
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
          if (live[r] && lane == 0 && q0 + j < nq) rows.store(p[r], q0 + j, sj, nar, nbj);
        }
      }
    }
  }
}

// Blocks for a launch of KERNEL (a kernel of kDistanceThreads threads whose
// body is distances_many): as many as the SMs run at once with `smem` each,
// from the occupancy calculator (the blocks loop over the rows; one block
// more per SM than fit ran as a second, mostly idle wave: ncu, 1.2 waves).
// The kernel may take kConstantsSmemMax, set once per device (these calls
// cost more than a small launch); the SM count is the first device's (only
// the grid's size).
template <auto KERNEL>
std::int64_t distance_blocks(std::size_t smem) {
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
    GKNN_CUDA(
        cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kConstantsSmemMax)));
    set_on.fetch_or(bit);
  }
  int per_sm = 0;
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, KERNEL, kDistanceThreads, smem));
  return std::max<std::int64_t>(1, std::int64_t(sms) * std::max(per_sm, 1));
}

}  // namespace gknn
