// The margins of the pruned exact search (exact_pruned_cpu.cpp says why
// each is needed) and its list order, shared by its CPU reference and its
// GPU version (exact_pruned_cuda.cu: the bounds' tests run in its kernels,
// hence GKNN_HD). Not a public header.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gknn/distance.h"  // GKNN_HD

namespace gknn::ivfpq {

// The operator's float sums err by less than (dim + 3) x 2^-24 relative
// (their square roots by half that): eight times that, and 1e-6 more.
inline double relative_margin(int dim) { return 1e-6 + 8.0 * (dim + 3) * std::ldexp(1.0, -24); }

// The double rounding of a centre distance or radius, relative to it.
inline double double_error(int dim) { return (dim + 4) * std::ldexp(1.0, -52); }

// The operator's distance's absolute error from float underflow, twice over.
inline double underflow_floor(int dim) { return std::sqrt(double(dim)) * std::ldexp(1.0, -74); }

// A lower bound of |a - b| from doubles a and b, each rounded (double_error).
GKNN_HD double separation(double a, double b, double dd) { return fabs(a - b) - dd * (a + b); }

// A lower bound of a list's nearest entry from the query's distance to its
// centroid and its radius (doubles, each rounded: double_error).
GKNN_HD double list_bound(double centre, double radius, double dd) {
  return centre - radius - dd * (centre + radius);
}

// The lists in the order they are read: NaN bounds first (always read),
// then ascending; ties by list.
inline void order_lists(const double* bound, std::vector<int>& order) {
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const bool na = std::isnan(bound[a]), nb = std::isnan(bound[b]);
    if (na != nb) return na;
    if (!na && bound[a] != bound[b]) return bound[a] < bound[b];
    return a < b;
  });
}

}  // namespace gknn::ivfpq
