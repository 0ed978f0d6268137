// gpu_ivfpq: what an index's entries are made of. The operator class names
// the metric and the element type (vector: float; halfvec: binary16; bit:
// bit strings, bit_hamming_ops); the quantizer always works on floats
// (halves widened exactly, bits as 0 and 1 under L2, whose square is the
// Hamming distance), while the vectors an index stores for its exact re-rank
// keep the column's own elements, so they take the room they take in the
// table and their distances are the SQL operator's, bit for bit.
#pragma once

#include "gknn/distance.h"
#include "ivfpq_format.h"
#include "pg.h"

extern "C" {
#include "utils/rel.h"
}

struct IvfpqOpclass {
  gknn::Metric metric;
  IvfpqElement element;
};
// From the index's operator class (its support function 1).
IvfpqOpclass ivfpq_index_opclass(Relation index);
// The element type's SQL name, for messages.
const char* ivfpq_element_type_name(IvfpqElement element);
// ERROR 22000 naming two different dimensions as the type's operators do
// ("different vector dimensions 3 and 4", "different bit lengths 8 and 16").
[[noreturn]] void ivfpq_dimension_mismatch(IvfpqElement element, int a, int b);

// A non-NULL value of the index's type, detoasted into the current memory
// context: its dimension (as stored; not checked) and its elements as stored.
struct IvfpqValue {
  int dim;
  const void* elements;  // float, uint16 (binary16 bits) or the bit string's bytes
};
IvfpqValue ivfpq_value(IvfpqElement element, Datum datum);
// The elements as floats (dim of them): what is trained on, encoded and searched.
void ivfpq_value_floats(IvfpqElement element, const IvfpqValue& v, float* out);

// The SQL operator's value between a stored value and a query given as the
// floats of its elements (exact: a half's float is the half).
double ivfpq_value_distance(gknn::Metric metric, IvfpqElement element, const IvfpqValue& v,
                            const float* query);
