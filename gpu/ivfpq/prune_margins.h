// The margins of the pruned exact search (exact_pruned_cpu.cpp says why
// each is needed), shared by its CPU reference and its GPU version. Not a
// public header.
#pragma once

#include <cmath>

namespace gknn::ivfpq {

// The operator's float sums err by less than (dim + 3) x 2^-24 relative
// (their square roots by half that): eight times that, and 1e-6 more.
inline double relative_margin(int dim) { return 1e-6 + 8.0 * (dim + 3) * std::ldexp(1.0, -24); }

// The double rounding of a centre distance or radius, relative to it.
inline double double_error(int dim) { return (dim + 4) * std::ldexp(1.0, -52); }

// The operator's distance's absolute error from float underflow, twice over.
inline double underflow_floor(int dim) { return std::sqrt(double(dim)) * std::ldexp(1.0, -74); }

// A lower bound of |a - b| from doubles a and b, each rounded (double_error).
inline double separation(double a, double b, double dd) { return std::abs(a - b) - dd * (a + b); }

}  // namespace gknn::ivfpq
