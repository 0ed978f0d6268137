// The vectors an image stores for its exact distances, one accessor per
// element type, and the exact distance of a stored row to a query (host and
// device: the CPU references and the CUDA kernels run this code). Not a
// public header.
//
//   FloatRows  vector:  dim floats per row
//   HalfRows   halfvec: dim binary16 values (uint16 bits) per row, widened
//              exactly, so the distance is the halfvec operator's
//   BitRows    bit:     ceil(dim / 8) bytes per row, the first element in the
//              most significant bit (PostgreSQL's bit layout); the exact
//              distance is the Hamming distance (the <~> operator), whatever
//              the metric: the quantizer of a bit index is L2 over the 0/1
//              values, whose squared distance is the Hamming distance.
//
// Queries are floats whatever the rows (a half's float value, 0/1 for bits:
// an element is set where the query's value is not 0).
#pragma once

#include <cstdint>

#include "gknn/distance.h"

namespace gknn::ivfpq {

struct FloatRows {
  const float* base;
};
struct HalfRows {
  const std::uint16_t* base;
};
struct BitRows {
  const std::uint8_t* base;
};

GKNN_HD std::int64_t bit_row_bytes(int dim) { return (std::int64_t(dim) + 7) / 8; }

GKNN_HD double row_distance(Metric metric, FloatRows rows, std::int64_t r, const float* query, int dim) {
  return distance(metric, rows.base + r * dim, query, dim);
}
GKNN_HD double row_distance(Metric metric, HalfRows rows, std::int64_t r, const float* query, int dim) {
  return distance(metric, rows.base + r * dim, query, dim);
}
GKNN_HD double row_distance(Metric, BitRows rows, std::int64_t r, const float* query, int dim) {
  return bit_hamming_distance(rows.base + r * bit_row_bytes(dim), query, dim);
}

}  // namespace gknn::ivfpq
