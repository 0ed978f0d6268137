// gpu_ivfpq: operator classes and the element types of the values they index.
#include "ivfpq_element.h"

#include <cstring>

#include "types/halfvec.h"
#include "types/vector.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
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
};

}  // namespace

IvfpqOpclass ivfpq_index_opclass(Relation index) {
  Oid proc = index_getprocid(index, 1, 1);
  if (!OidIsValid(proc))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
                    errmsg("gpu_ivfpq operator class of index \"%s\" has no distance function (support 1)",
                           RelationGetRelationName(index))));
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
  if (!HeapTupleIsValid(tup)) elog(ERROR, "cache lookup failed for function %u", proc);
  bool isnull;
  Datum src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
  char* symbol = isnull ? pstrdup("") : TextDatumGetCString(src);
  ReleaseSysCache(tup);
  for (const KnownDistance& k : kKnown)
    if (strcmp(symbol, k.symbol) == 0) return IvfpqOpclass{k.metric, k.element};
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("gpu_ivfpq does not support the distance function \"%s\" of index \"%s\"", symbol,
                         RelationGetRelationName(index)),
                  errhint("Use vector_l2_ops, vector_ip_ops, vector_cosine_ops, halfvec_l2_ops, "
                          "halfvec_ip_ops or halfvec_cosine_ops.")));
  pg_unreachable();
}

const char* ivfpq_element_type_name(IvfpqElement element) {
  return element == kIvfpqFloat16 ? "halfvec" : "vector";
}

IvfpqValue ivfpq_value(IvfpqElement element, Datum datum) {
  if (element == kIvfpqFloat16) {
    const HalfVector* h = DatumGetHalfVector(datum);
    return IvfpqValue{h->dim, h->x};
  }
  const Vector* v = DatumGetVector(datum);
  return IvfpqValue{v->dim, v->x};
}

void ivfpq_value_floats(IvfpqElement element, const IvfpqValue& v, float* out) {
  if (element == kIvfpqFloat16) {
    const auto* h = static_cast<const uint16*>(v.elements);
    for (int i = 0; i < v.dim; ++i) out[i] = gknn::half_to_float(h[i]);
    return;
  }
  memcpy(out, v.elements, sizeof(float) * v.dim);
}

double ivfpq_value_distance(gknn::Metric metric, IvfpqElement element, const IvfpqValue& v,
                            const float* query) {
  if (element == kIvfpqFloat16)
    return gknn::distance(metric, static_cast<const uint16*>(v.elements), query, v.dim);
  return gknn::distance(metric, static_cast<const float*>(v.elements), query, v.dim);
}
