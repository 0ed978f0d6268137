// The padding of a kNN result row (gknn/knn.h, gknn/ivfpq.h, gknn/graph.h):
// a slot with no row is id -1, distance NaN. Not a public header; host code
// only, no CUDA.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gknn/distance.h"

namespace gknn {

// Every one of `count` result slots empty: what the GPU paths write first,
// so that a row with fewer than k base vectors keeps its padding, and what
// the CPU paths write after their last row.
inline void pad_results(std::int64_t* ids, double* distances, std::int64_t count) {
  std::fill(ids, ids + count, std::int64_t(-1));
  std::fill(distances, distances + count, canonical_score(NAN));
}

}  // namespace gknn
