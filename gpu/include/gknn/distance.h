// Vector distances: the one implementation used by the SQL operators, the CPU
// reference and the GPU kernels (it compiles for host and device).
//
// Float sums run in eight interleaved lanes combined in a fixed tree. The
// order is part of the contract: it lets the host compiler vectorise without
// -ffast-math, and a GPU thread that runs the same code (built without FMA
// contraction) produces the same bits, so CPU and GPU results compare equal.
//
// Elements are float (vector) or std::uint16_t, the bits of a binary16 value
// (halfvec). A half is widened to float exactly before any arithmetic, so a
// distance over halves is the distance over their float values, bit for bit:
// what the halfvec SQL operators compute (they widen, then call these), and
// what a kernel reading halves from GPU memory computes.
#pragma once

#include <cmath>
#include <cstdint>

#include "gknn/half.h"

#if defined(__CUDACC__)
#define GKNN_HD __host__ __device__ __forceinline__
#else
#define GKNN_HD inline
#endif
#if defined(__CUDACC__)
#define GKNN_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define GKNN_UNROLL _Pragma("GCC unroll 8")
#else
#define GKNN_UNROLL
#endif

namespace gknn {

// Distance functions, numbered as in the SQL API and kernels.
enum class Metric : int {
  L2 = 0,            // <->  sqrt(sum (a-b)^2)
  InnerProduct = 1,  // <#>  -(a . b)
  Cosine = 2,        // <=>  1 - a.b / (|a||b|)
  L1 = 3,            // <+>  sum |a-b|
};

namespace detail {

constexpr int kLanes = 8;

struct SquaredDiff {
  GKNN_HD float operator()(float a, float b) const {
    float d = a - b;
    return d * d;
  }
};
struct Product {
  GKNN_HD float operator()(float a, float b) const { return a * b; }
};
struct AbsDiff {
  GKNN_HD float operator()(float a, float b) const { return std::fabs(a - b); }
};

template <typename T>
GKNN_HD T combine_lanes(const T (&acc)[kLanes]) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// An element's value as a float: exact for both element types.
GKNN_HD float widen(float x) { return x; }
GKNN_HD float widen(std::uint16_t h) { return half_to_float(h); }

template <typename A, typename B, typename Op>
GKNN_HD float lane_sum(const A* a, const B* b, int n, Op op) {
  float acc[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    GKNN_UNROLL
    for (int l = 0; l < kLanes; ++l) acc[l] += op(widen(a[i + l]), widen(b[i + l]));
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += op(widen(a[i]), widen(b[i]));
  return combine_lanes(acc);
}

}  // namespace detail

// A and B: float or std::uint16_t (binary16 bits), in any combination.
template <typename A, typename B>
GKNN_HD float l2_squared_distance(const A* a, const B* b, int n) {
  return detail::lane_sum(a, b, n, detail::SquaredDiff{});
}

template <typename A, typename B>
GKNN_HD float inner_product(const A* a, const B* b, int n) {
  return detail::lane_sum(a, b, n, detail::Product{});
}

template <typename A, typename B>
GKNN_HD float l1_distance(const A* a, const B* b, int n) {
  return detail::lane_sum(a, b, n, detail::AbsDiff{});
}

template <typename A, typename B>
GKNN_HD double l2_distance(const A* a, const B* b, int n) {
  return std::sqrt(static_cast<double>(l2_squared_distance(a, b, n)));
}

// Euclidean norm accumulated in double (vector_norm()).
GKNN_HD double norm(const float* a, int n) {
  double acc[detail::kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + detail::kLanes <= n; i += detail::kLanes) {
    GKNN_UNROLL
    for (int l = 0; l < detail::kLanes; ++l) acc[l] += static_cast<double>(a[i + l]) * a[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += static_cast<double>(a[i]) * a[i];
  return std::sqrt(detail::combine_lanes(acc));
}

// 1 - cosine similarity; NaN when either vector has zero norm (as pgvector).
// From the three sums (a.b, a.a, b.b), so that a kernel that sums a row's
// lanes on several threads (gpu/expr/vector_distances.cuh) ends the same way.
GKNN_HD double cosine_from_sums(float dot, float na, float nb) {
  if (na == 0.0f || nb == 0.0f) return NAN;
  double similarity = static_cast<double>(dot) / std::sqrt(static_cast<double>(na) * nb);
  // Rounding can push |similarity| slightly past 1.
  if (similarity > 1.0) similarity = 1.0;
  if (similarity < -1.0) similarity = -1.0;
  return 1.0 - similarity;
}

template <typename A, typename B>
GKNN_HD double cosine_distance(const A* a, const B* b, int n) {
  return cosine_from_sums(inner_product(a, b, n), inner_product(a, a, n), inner_product(b, b, n));
}

// The value of the SQL operator for a metric, as ORDER BY sees it.
template <typename A, typename B>
GKNN_HD double distance(Metric metric, const A* a, const B* b, int n) {
  switch (metric) {
    case Metric::L2:
      return l2_distance(a, b, n);
    case Metric::InnerProduct:
      return -static_cast<double>(inner_product(a, b, n));
    case Metric::Cosine:
      return cosine_distance(a, b, n);
    case Metric::L1:
      return static_cast<double>(l1_distance(a, b, n));
  }
  return NAN;
}

// The Hamming distance between a bit string (PostgreSQL's layout: ceil(n/8)
// bytes, the first element in the most significant bit) and a query given
// as n floats, an element set where the float is not 0: the <~> operator's
// value when the query holds a bit string's 0/1 values.
GKNN_HD double bit_hamming_distance(const std::uint8_t* bits, const float* query, int n) {
  int differ = 0;
  for (int i = 0; i < n; ++i) {
    const bool set = (bits[i >> 3] >> (7 - (i & 7))) & 1;
    differ += set != (query[i] != 0.0f);
  }
  return double(differ);
}

// Canonical sort key of a distance: one NaN (above every number, as
// PostgreSQL orders float8) and one zero, so that sorting by bits, by
// comparison, on the CPU or on the GPU all agree, ties then broken by id.
GKNN_HD double canonical_score(double s) {
  if (s != s) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(0x7ff8000000000000LL);
#else
    return __builtin_nan("");  // positive quiet NaN
#endif
  }
  return s == 0.0 ? 0.0 : s;
}

// Strict order of (score, id) pairs used by every k-selection: ascending
// score, NaN last, ties by ascending id.
GKNN_HD bool score_less(double sa, int64_t ia, double sb, int64_t ib) {
  bool na = sa != sa, nb = sb != sb;
  if (na != nb) return nb;
  if (!na && sa != sb) return sa < sb;
  return ia < ib;
}

}  // namespace gknn
