// Casts of halfvec, as pgvector declares them: vector -> halfvec (implicit),
// halfvec -> vector and halfvec -> real[] (assignment), integer[], real[],
// double precision[] and numeric[] -> halfvec (assignment).
#include <cmath>

#include "array_cast.h"
#include "halfvec.h"
#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

extern "C" {

PG_FUNCTION_INFO_V1(array_to_halfvec);
Datum array_to_halfvec(PG_FUNCTION_ARGS) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  const ArrayElements a = array_elements(array);
  const int n = a.n;
  HalfvecCheckDim(n);
  CheckExpectedDim(typmod, n);

  // Every element is converted (range errors first), then checked for NaN
  // and infinity, as pgvector orders its errors.
  HalfVector* result = InitHalfVector(n);
  for (int i = 0; i < n; ++i) result->x[i] = FloatToHalf(array_element_to_float(a.elems[i], a.type));
  pfree(a.elems);
  for (int i = 0; i < n; ++i) HalfvecCheckElement(result->x[i]);
  PG_RETURN_HALFVEC_P(result);
}

PG_FUNCTION_INFO_V1(halfvec_to_float4);
Datum halfvec_to_float4(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * v->dim));
  for (int i = 0; i < v->dim; ++i) elems[i] = Float4GetDatum(gknn::half_to_float(v->x[i]));
  ArrayType* result = construct_array(elems, v->dim, FLOAT4OID, sizeof(float4), true, TYPALIGN_INT);
  pfree(elems);
  PG_RETURN_POINTER(result);
}

// vector -> halfvec: each element rounded to the nearest half (ties to
// even); a finite element beyond +-65504 (rounding to infinity) is an error.
PG_FUNCTION_INFO_V1(vector_to_halfvec);
Datum vector_to_halfvec(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  HalfvecCheckDim(v->dim);
  CheckExpectedDim(typmod, v->dim);
  HalfVector* result = InitHalfVector(v->dim);
  for (int i = 0; i < v->dim; ++i) result->x[i] = FloatToHalf(v->x[i]);
  PG_RETURN_HALFVEC_P(result);
}

// halfvec -> vector: exact.
PG_FUNCTION_INFO_V1(halfvec_to_vector);
Datum halfvec_to_vector(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  CheckDim(v->dim);
  CheckExpectedDim(typmod, v->dim);
  Vector* result = InitVector(v->dim);
  for (int i = 0; i < v->dim; ++i) result->x[i] = gknn::half_to_float(v->x[i]);
  PG_RETURN_VECTOR_P(result);
}

}  // extern "C"
