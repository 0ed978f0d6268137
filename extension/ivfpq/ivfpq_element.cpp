// gpu_ivfpq: operator classes and the element types of the values they index.
#include "ivfpq_element.h"

#include <cstring>

#include "am/am_opclass.h"
#include "types/halfvec.h"
#include "types/vector.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/varbit.h"
}

namespace {

// Support function 1 of each operator class, by its C symbol (the install
// script's; a function of another library cannot be a gpu_ivfpq distance).
struct KnownDistance {
  const char* symbol;
  gknn::Metric metric;
  IvfpqElement element;
};
constexpr KnownDistance kKnown[] = {
    {"l2_distance", gknn::Metric::L2, kIvfpqFloat32},
    {"vector_l2_squared_distance", gknn::Metric::L2, kIvfpqFloat32},
    {"vector_negative_inner_product", gknn::Metric::InnerProduct, kIvfpqFloat32},
    {"cosine_distance", gknn::Metric::Cosine, kIvfpqFloat32},
    {"halfvec_l2_distance", gknn::Metric::L2, kIvfpqFloat16},
    {"halfvec_l2_squared_distance", gknn::Metric::L2, kIvfpqFloat16},
    {"halfvec_negative_inner_product", gknn::Metric::InnerProduct, kIvfpqFloat16},
    {"halfvec_cosine_distance", gknn::Metric::Cosine, kIvfpqFloat16},
    // bit_hamming_ops: L2 over the 0/1 values, whose square is the Hamming distance
    {"hamming_distance", gknn::Metric::L2, kIvfpqBit},
};

}  // namespace

IvfpqOpclass ivfpq_index_opclass(Relation index) {
  char* symbol = am_distance_symbol(index, "gpu_ivfpq");
  for (const KnownDistance& k : kKnown)
    if (strcmp(symbol, k.symbol) == 0) return IvfpqOpclass{k.metric, k.element};
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("gpu_ivfpq does not support the distance function \"%s\" of index \"%s\"", symbol,
                         RelationGetRelationName(index)),
                  errhint("Use vector_l2_ops, vector_ip_ops, vector_cosine_ops, halfvec_l2_ops, "
                          "halfvec_ip_ops, halfvec_cosine_ops or bit_hamming_ops.")));
  pg_unreachable();
}

const char* ivfpq_element_type_name(IvfpqElement element) {
  return element == kIvfpqBit ? "bit" : element == kIvfpqFloat16 ? "halfvec" : "vector";
}

void ivfpq_dimension_mismatch(IvfpqElement element, int a, int b) {
  if (element == kIvfpqBit)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("different bit lengths %d and %d", a, b)));
  ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                  errmsg("different %s dimensions %d and %d", ivfpq_element_type_name(element), a, b)));
  pg_unreachable();
}

IvfpqValue ivfpq_value(IvfpqElement element, Datum datum) {
  if (element == kIvfpqBit) {
    VarBit* b = DatumGetVarBitP(datum);
    return IvfpqValue{VARBITLEN(b), VARBITS(b)};
  }
  if (element == kIvfpqFloat16) {
    const HalfVector* h = DatumGetHalfVector(datum);
    return IvfpqValue{h->dim, h->x};
  }
  const Vector* v = DatumGetVector(datum);
  return IvfpqValue{v->dim, v->x};
}

void ivfpq_value_floats(IvfpqElement element, const IvfpqValue& v, float* out) {
  if (element == kIvfpqBit) {
    const auto* bits = static_cast<const uint8*>(v.elements);
    for (int i = 0; i < v.dim; ++i) out[i] = static_cast<float>((bits[i >> 3] >> (7 - (i & 7))) & 1);
    return;
  }
  if (element == kIvfpqFloat16) {
    const auto* h = static_cast<const uint16*>(v.elements);
    for (int i = 0; i < v.dim; ++i) out[i] = gknn::half_to_float(h[i]);
    return;
  }
  memcpy(out, v.elements, sizeof(float) * v.dim);
}

double ivfpq_value_distance(gknn::Metric metric, IvfpqElement element, const IvfpqValue& v,
                            const float* query) {
  if (element == kIvfpqBit)
    return gknn::bit_hamming_distance(static_cast<const uint8*>(v.elements), query, v.dim);
  if (element == kIvfpqFloat16)
    return gknn::distance(metric, static_cast<const uint16*>(v.elements), query, v.dim);
  return gknn::distance(metric, static_cast<const float*>(v.elements), query, v.dim);
}
