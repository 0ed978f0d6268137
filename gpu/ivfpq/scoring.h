// The arithmetic of IVF-PQ search, shared by search_cpu and the GPU kernels
// (built without FMA contraction), so both produce the same float bits.
//
// Keys are "smaller is better" floats: the coarse key of a list is the
// squared L2 distance to its centroid (L2, cosine) or -q.c (inner product);
// a candidate's key is its PQ-estimated distance in SQL units.
#pragma once

#include <cmath>
#include <cstdint>

#include "gknn/distance.h"

namespace gknn::ivfpq {

GKNN_HD float coarse_key(Metric metric, const float* query, const float* centroid, int dim) {
  return metric == Metric::InnerProduct ? -inner_product(query, centroid, dim)
                                        : l2_squared_distance(query, centroid, dim);
}

// The vector the LUT of a (query, list) is built from, element i: the
// residual q - c for L2 (the codes encode x - c), the query itself for inner
// product (q.x = q.c + q.(x - c), and q.c is the coarse key).
GKNN_HD float lut_input(Metric metric, float q_i, float c_i) {
  return metric == Metric::InnerProduct ? q_i : q_i - c_i;
}

// LUT entry of sub-space j, codeword c: `v_j` is sub-vector j of lut_input.
GKNN_HD float lut_entry(Metric metric, const float* v_j, const float* codeword, int dsub) {
  return metric == Metric::InnerProduct ? inner_product(v_j, codeword, dsub)
                                        : l2_squared_distance(v_j, codeword, dsub);
}

// SQL units from the LUT sum (summed over j = 0..m-1 in order, fp32) and the
// list's coarse key: L2 distance; cosine distance 1 - cos = d^2 / 2 on unit
// vectors; negative inner product -(q.c + sum).
GKNN_HD float pq_distance(Metric metric, float coarse, float sum) {
  switch (metric) {
    case Metric::InnerProduct:
      return -(-coarse + sum);
    case Metric::Cosine:
      return sum * 0.5f;
    default:
      return static_cast<float>(std::sqrt(static_cast<double>(sum)));
  }
}

// A query's candidates lie in one row: probe p's list fills columns
// [starts[p], starts[p+1]), so column order is (probe rank, position in the
// list), the contract's tie order. The probe holding column `col`
// (col < starts[probes]): the last p with starts[p] <= col.
GKNN_HD int probe_of(const std::int64_t* starts, int probes, std::int64_t col) {
  int lo = 0, hi = probes;  // starts[lo] <= col < starts[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (starts[mid] <= col)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace gknn::ivfpq
