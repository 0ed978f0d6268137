// gknn::distance computed by eight threads together, with the same bits.
//
// distance.h sums in eight interleaved lanes (lane l takes elements l, l+8,
// l+16, ... in order, the tail too) combined in the fixed tree
// ((0+4)+(1+5))+((2+6)+(3+7)). Here thread l of an aligned group of eight
// in a warp is lane l: it sums its elements in the same order, and three
// shuffles combine the lanes in the same tree (float addition is
// commutative, so a+b and b+a have the same bits). Built, as the whole
// library, without FMA contraction. Every thread of the group gets the
// result. A thread per candidate runs the dimension loop alone; a group of
// eight reads each row in 32-byte pieces and has an eighth of the loop.
#pragma once

#include <cuda_runtime.h>

#include "gknn/distance.h"

namespace gknn {

constexpr int kGroupLanes = 8;

// The group's shuffle mask: its own eight lanes of the warp.
__device__ __forceinline__ unsigned group_mask() { return 0xffu << (threadIdx.x & 24u); }

// Elements a lane loads before it adds any: a row's loads go out
// kLaneChunk at a time, not one after another (at 784 dimensions a lane's
// 98 dependent round trips to memory were most of a graph step's and a
// refine's time). The additions keep their order: the same bits.
constexpr int kLaneChunk = 16;

template <typename Op>
__device__ __forceinline__ float group_lane_sum(const float* a, const float* b, int n, Op op, int lane) {
  float acc = 0.0f;
  for (int base = lane; base < n; base += kLaneChunk * kGroupLanes) {
    float x[kLaneChunk], y[kLaneChunk];
#pragma unroll
    for (int j = 0; j < kLaneChunk; ++j) {
      const int i = base + j * kGroupLanes;
      x[j] = i < n ? a[i] : 0.0f;
      y[j] = i < n ? b[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kLaneChunk; ++j)
      if (base + j * kGroupLanes < n) acc += op(x[j], y[j]);
  }
  const unsigned mask = group_mask();
  acc += __shfl_xor_sync(mask, acc, 4, kGroupLanes);  // s_l = acc_l + acc_{l+4}
  acc += __shfl_xor_sync(mask, acc, 1, kGroupLanes);  // s_0 + s_1, s_2 + s_3
  acc += __shfl_xor_sync(mask, acc, 2, kGroupLanes);  // (s_0 + s_1) + (s_2 + s_3)
  return acc;
}

__device__ __forceinline__ float group_l2_squared(const float* a, const float* b, int n, int lane) {
  return group_lane_sum(a, b, n, detail::SquaredDiff{}, lane);
}

__device__ __forceinline__ float group_inner_product(const float* a, const float* b, int n, int lane) {
  return group_lane_sum(a, b, n, detail::Product{}, lane);
}

// distance(metric, a, b, n), term for term.
__device__ __forceinline__ double group_distance(Metric metric, const float* a, const float* b, int n,
                                                 int lane) {
  switch (metric) {
    case Metric::L2:
      return sqrt(static_cast<double>(group_l2_squared(a, b, n, lane)));
    case Metric::InnerProduct:
      return -static_cast<double>(group_inner_product(a, b, n, lane));
    case Metric::Cosine: {
      const float dot = group_inner_product(a, b, n, lane);
      const float na = group_inner_product(a, a, n, lane);
      const float nb = group_inner_product(b, b, n, lane);
      if (na == 0.0f || nb == 0.0f) return __longlong_as_double(0x7ff8000000000000LL);
      double similarity = static_cast<double>(dot) / sqrt(static_cast<double>(na) * nb);
      if (similarity > 1.0) similarity = 1.0;
      if (similarity < -1.0) similarity = -1.0;
      return 1.0 - similarity;
    }
    case Metric::L1:
      return static_cast<double>(group_lane_sum(a, b, n, detail::AbsDiff{}, lane));
  }
  return __longlong_as_double(0x7ff8000000000000LL);
}

}  // namespace gknn
