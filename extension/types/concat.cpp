// || for vector and halfvec: the elements of the left operand followed by
// those of the right, within the type's dimension limit.
#include "halfvec.h"
#include "vector.h"

extern "C" {

PG_FUNCTION_INFO_V1(vector_concat);
Datum vector_concat(PG_FUNCTION_ARGS) {
  Vector* a = PG_GETARG_VECTOR_P(0);
  Vector* b = PG_GETARG_VECTOR_P(1);
  int dim = a->dim + b->dim;
  CheckDim(dim);
  Vector* result = InitVector(dim);
  memcpy(result->x, a->x, sizeof(float) * a->dim);
  memcpy(result->x + a->dim, b->x, sizeof(float) * b->dim);
  PG_RETURN_VECTOR_P(result);
}

PG_FUNCTION_INFO_V1(halfvec_concat);
Datum halfvec_concat(PG_FUNCTION_ARGS) {
  HalfVector* a = PG_GETARG_HALFVEC_P(0);
  HalfVector* b = PG_GETARG_HALFVEC_P(1);
  int dim = a->dim + b->dim;
  HalfvecCheckDim(dim);
  HalfVector* result = InitHalfVector(dim);
  memcpy(result->x, a->x, sizeof(half) * a->dim);
  memcpy(result->x + a->dim, b->x, sizeof(half) * b->dim);
  PG_RETURN_HALFVEC_P(result);
}

}  // extern "C"
