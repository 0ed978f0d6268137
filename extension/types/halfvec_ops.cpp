// halfvec distances, norms, element-wise arithmetic, subvector and
// binary_quantize.
//
// Distances and norms are those of the elements converted to float (exact),
// computed by gknn/distance.h: accumulation in float as pgvector does for
// halfvec, in the project's fixed lane order, so d(a, b) on halfvecs equals
// d(a::vector, b::vector) bit for bit and a GPU kernel that widens halves
// to floats reproduces it. Arithmetic computes in float and rounds the
// result to the nearest half (ties to even), as pgvector does.
#include <cmath>

#include "gknn/distance.h"
#include "halfvec.h"

extern "C" {
#include "utils/float.h"
#include "utils/varbit.h"
}

namespace {

// The two halfvec arguments as floats, checked to have the same dimensions.
struct FloatPair {
  float* a;
  float* b;
  int dim;
};

FloatPair float_pair(FunctionCallInfo fcinfo) {
  HalfVector* a = PG_GETARG_HALFVEC_P(0);
  HalfVector* b = PG_GETARG_HALFVEC_P(1);
  HalfvecCheckDims(a, b);
  return FloatPair{HalfvecToFloats(a), HalfvecToFloats(b), a->dim};
}

void free_pair(FloatPair p) {
  pfree(p.a);
  pfree(p.b);
}

template <typename Op>
HalfVector* elementwise(const HalfVector* a, const HalfVector* b, Op op) {
  HalfvecCheckDims(a, b);
  HalfVector* result = InitHalfVector(a->dim);
  for (int i = 0; i < a->dim; ++i)
    result->x[i] = gknn::float_to_half(op(gknn::half_to_float(a->x[i]), gknn::half_to_float(b->x[i])));
  // Finite inputs must give a finite result.
  for (int i = 0; i < a->dim; ++i)
    if (gknn::half_is_inf(result->x[i])) float_overflow_error();
  return result;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(halfvec_l2_distance);
Datum halfvec_l2_distance(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = gknn::l2_distance(p.a, p.b, p.dim);
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

// Squared L2, cheaper where only the order matters (index support).
PG_FUNCTION_INFO_V1(halfvec_l2_squared_distance);
Datum halfvec_l2_squared_distance(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = static_cast<double>(gknn::l2_squared_distance(p.a, p.b, p.dim));
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

PG_FUNCTION_INFO_V1(halfvec_inner_product);
Datum halfvec_inner_product(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = static_cast<double>(gknn::inner_product(p.a, p.b, p.dim));
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

PG_FUNCTION_INFO_V1(halfvec_negative_inner_product);
Datum halfvec_negative_inner_product(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = gknn::distance(gknn::Metric::InnerProduct, p.a, p.b, p.dim);
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

// NaN when either vector has zero norm, as pgvector.
PG_FUNCTION_INFO_V1(halfvec_cosine_distance);
Datum halfvec_cosine_distance(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = gknn::cosine_distance(p.a, p.b, p.dim);
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

PG_FUNCTION_INFO_V1(halfvec_l1_distance);
Datum halfvec_l1_distance(PG_FUNCTION_ARGS) {
  FloatPair p = float_pair(fcinfo);
  double d = static_cast<double>(gknn::l1_distance(p.a, p.b, p.dim));
  free_pair(p);
  PG_RETURN_FLOAT8(d);
}

PG_FUNCTION_INFO_V1(halfvec_vector_dims);
Datum halfvec_vector_dims(PG_FUNCTION_ARGS) { PG_RETURN_INT32(PG_GETARG_HALFVEC_P(0)->dim); }

// Euclidean norm, accumulated in double.
PG_FUNCTION_INFO_V1(halfvec_l2_norm);
Datum halfvec_l2_norm(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  float* x = HalfvecToFloats(v);
  double norm = gknn::norm(x, v->dim);
  pfree(x);
  PG_RETURN_FLOAT8(norm);
}

// Unit vector in the same direction, each element x / |x| computed in
// double and rounded to float, then to half; the zero vector stays zero.
PG_FUNCTION_INFO_V1(halfvec_l2_normalize);
Datum halfvec_l2_normalize(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  float* x = HalfvecToFloats(v);
  double norm = gknn::norm(x, v->dim);
  HalfVector* result = InitHalfVector(v->dim);
  if (norm > 0) {
    for (int i = 0; i < v->dim; ++i) result->x[i] = gknn::float_to_half(static_cast<float>(x[i] / norm));
    for (int i = 0; i < v->dim; ++i)
      if (gknn::half_is_inf(result->x[i])) float_overflow_error();
  }
  pfree(x);
  PG_RETURN_HALFVEC_P(result);
}

// Elements start .. start + count - 1, 1-based and clamped like substring(),
// with pgvector's errors: count < 1, or nothing left after clamping.
PG_FUNCTION_INFO_V1(halfvec_subvector);
Datum halfvec_subvector(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  int64 start = PG_GETARG_INT32(1);
  int64 count = PG_GETARG_INT32(2);
  if (count < 1) HalfvecCheckDim(0);
  int64 end = start + count;  // exclusive; int64, so no overflow
  if (end > v->dim + 1) end = v->dim + 1;
  if (start < 1)
    start = 1;
  else if (start > v->dim)
    HalfvecCheckDim(0);
  int64 dim = end - start;
  if (dim < 1) HalfvecCheckDim(0);
  HalfVector* result = InitHalfVector(static_cast<int>(dim));
  memcpy(result->x, v->x + (start - 1), sizeof(half) * dim);
  PG_RETURN_HALFVEC_P(result);
}

PG_FUNCTION_INFO_V1(halfvec_add);
Datum halfvec_add(PG_FUNCTION_ARGS) {
  PG_RETURN_HALFVEC_P(
      elementwise(PG_GETARG_HALFVEC_P(0), PG_GETARG_HALFVEC_P(1), [](float a, float b) { return a + b; }));
}

PG_FUNCTION_INFO_V1(halfvec_sub);
Datum halfvec_sub(PG_FUNCTION_ARGS) {
  PG_RETURN_HALFVEC_P(
      elementwise(PG_GETARG_HALFVEC_P(0), PG_GETARG_HALFVEC_P(1), [](float a, float b) { return a - b; }));
}

// A product of non-zero elements that rounds to zero is an underflow error.
PG_FUNCTION_INFO_V1(halfvec_mul);
Datum halfvec_mul(PG_FUNCTION_ARGS) {
  HalfVector* a = PG_GETARG_HALFVEC_P(0);
  HalfVector* b = PG_GETARG_HALFVEC_P(1);
  HalfVector* result = elementwise(a, b, [](float x, float y) { return x * y; });
  for (int i = 0; i < result->dim; ++i)
    if (gknn::half_is_zero(result->x[i]) && !gknn::half_is_zero(a->x[i]) && !gknn::half_is_zero(b->x[i]))
      float_underflow_error();
  PG_RETURN_HALFVEC_P(result);
}

// One bit per element, set where the element is > 0, first element in the
// most significant bit of the first byte (bit(n)'s order).
PG_FUNCTION_INFO_V1(halfvec_binary_quantize);
Datum halfvec_binary_quantize(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  Size size = VARBITTOTALLEN(v->dim);
  VarBit* result = static_cast<VarBit*>(palloc0(size));
  SET_VARSIZE(result, size);
  VARBITLEN(result) = v->dim;
  bits8* bits = VARBITS(result);
  for (int i = 0; i < v->dim; ++i)
    if (gknn::half_to_float(v->x[i]) > 0) bits[i / 8] |= static_cast<bits8>(0x80 >> (i % 8));
  PG_RETURN_VARBIT_P(result);
}

}  // extern "C"
