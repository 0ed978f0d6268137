// Distances, norms and element-wise arithmetic. Distances come from the
// core library (gknn/distance.h), the same code the GPU kernels and their CPU
// references run, so a SQL operator and a GPU scan agree on every value.
#include <cmath>
#include <climits>

#include "gknn/distance.h"
#include "vector.h"

namespace {

void overflow_error() {
  ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("value out of range: overflow")));
}

// Finite inputs must give a finite result.
void check_overflow(const Vector* result) {
  for (int i = 0; i < result->dim; ++i)
    if (std::isinf(result->x[i])) overflow_error();
}

template <typename Op>
Vector* elementwise(FunctionCallInfo fcinfo, Op op) {
  Vector* a = PG_GETARG_VECTOR_P(0);
  Vector* b = PG_GETARG_VECTOR_P(1);
  CheckDims(a, b);
  Vector* result = InitVector(a->dim);
  for (int i = 0; i < a->dim; ++i) result->x[i] = op(a->x[i], b->x[i]);
  check_overflow(result);
  return result;
}

// The two vector arguments, checked to have the same dimensions.
struct Pair {
  Vector* a;
  Vector* b;
};
Pair vector_pair(FunctionCallInfo fcinfo) {
  Pair p{PG_GETARG_VECTOR_P(0), PG_GETARG_VECTOR_P(1)};
  CheckDims(p.a, p.b);
  return p;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(l2_distance);
Datum l2_distance(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(gknn::l2_distance(p.a->x, p.b->x, p.a->dim));
}

// Squared L2, cheaper where only the order matters (index support).
PG_FUNCTION_INFO_V1(vector_l2_squared_distance);
Datum vector_l2_squared_distance(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(gknn::l2_squared_distance(p.a->x, p.b->x, p.a->dim)));
}

PG_FUNCTION_INFO_V1(inner_product);
Datum inner_product(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(gknn::inner_product(p.a->x, p.b->x, p.a->dim)));
}

PG_FUNCTION_INFO_V1(vector_negative_inner_product);
Datum vector_negative_inner_product(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(gknn::distance(gknn::Metric::InnerProduct, p.a->x, p.b->x, p.a->dim));
}

PG_FUNCTION_INFO_V1(cosine_distance);
Datum cosine_distance(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(gknn::cosine_distance(p.a->x, p.b->x, p.a->dim));
}

PG_FUNCTION_INFO_V1(l1_distance);
Datum l1_distance(PG_FUNCTION_ARGS) {
  Pair p = vector_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(gknn::l1_distance(p.a->x, p.b->x, p.a->dim)));
}

PG_FUNCTION_INFO_V1(vector_dims);
Datum vector_dims(PG_FUNCTION_ARGS) { PG_RETURN_INT32(PG_GETARG_VECTOR_P(0)->dim); }

PG_FUNCTION_INFO_V1(vector_norm);
Datum vector_norm(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  PG_RETURN_FLOAT8(gknn::norm(v->x, v->dim));
}

// Unit vector in the same direction; the zero vector stays zero.
PG_FUNCTION_INFO_V1(l2_normalize);
Datum l2_normalize(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  Vector* result = InitVector(v->dim);
  double norm = gknn::norm(v->x, v->dim);
  if (norm > 0) {
    for (int i = 0; i < v->dim; ++i) result->x[i] = static_cast<float>(v->x[i] / norm);
    check_overflow(result);
  }
  PG_RETURN_VECTOR_P(result);
}

// Elements start .. start + count - 1 (1-based, clamped like substring()).
PG_FUNCTION_INFO_V1(subvector);
Datum subvector(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  int64 start = PG_GETARG_INT32(1);
  int64 end = start + static_cast<int64>(PG_GETARG_INT32(2));  // exclusive; no int32 overflow
  if (start < 1) start = 1;
  if (end > v->dim + 1) end = v->dim + 1;
  if (end <= start)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("vector must have at least 1 dimension")));
  int dim = static_cast<int>(end - start);
  Vector* result = InitVector(dim);
  memcpy(result->x, v->x + (start - 1), sizeof(float) * dim);
  PG_RETURN_VECTOR_P(result);
}

PG_FUNCTION_INFO_V1(vector_add);
Datum vector_add(PG_FUNCTION_ARGS) {
  PG_RETURN_VECTOR_P(elementwise(fcinfo, [](float a, float b) { return a + b; }));
}

PG_FUNCTION_INFO_V1(vector_sub);
Datum vector_sub(PG_FUNCTION_ARGS) {
  PG_RETURN_VECTOR_P(elementwise(fcinfo, [](float a, float b) { return a - b; }));
}

PG_FUNCTION_INFO_V1(vector_mul);
Datum vector_mul(PG_FUNCTION_ARGS) {
  Vector* a = PG_GETARG_VECTOR_P(0);
  Vector* b = PG_GETARG_VECTOR_P(1);
  Vector* result = elementwise(fcinfo, [](float x, float y) { return x * y; });
  for (int i = 0; i < result->dim; ++i)
    if (result->x[i] == 0.0f && a->x[i] != 0.0f && b->x[i] != 0.0f)
      ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("value out of range: underflow")));
  PG_RETURN_VECTOR_P(result);
}

}  // extern "C"
