// The per-row arithmetic of training and encoding, shared by the CPU
// reference and the GPU kernels (built without FMA contraction), so that a
// CPU-built and a GPU-built index agree bit for bit.
#pragma once

#include "gknn/distance.h"

namespace gknn::ivfpq {

// Whether centroid `i` at squared distance `d` beats the best so far (`bd`,
// `bi`). An index < 0 is "none", which every centroid beats (the GPU's warps
// that got no centroid hold it). A strict total order (a number before NaN, then
// distance, then lower index), so the nearest centroid does not depend on
// the order candidates are compared in: a GPU can split the centroids over
// threads and still agree with the CPU's scan. It is the order of exact kNN
// with k = 1 (score_less on sqrt(double(d))), since sqrt is monotone and
// distinct floats stay distinct through it.
GKNN_HD bool nearer(float d, int i, float bd, int bi) {
  if (i < 0 || bi < 0) return bi < 0 && i >= 0;
  const bool dn = d != d, bn = bd != bd;
  if (dn != bn) return bn;
  if (!dn && d != bd) return d < bd;
  return i < bi;
}

// Scales a row to unit length in place (a zero row stays zero): cosine's
// preparation of every vector.
GKNN_HD void normalize_row(float* row, int dim) {
  const double len = norm(row, dim);
  if (len > 0)
    for (int d = 0; d < dim; ++d) row[d] = static_cast<float>(row[d] / len);
}

}  // namespace gknn::ivfpq
