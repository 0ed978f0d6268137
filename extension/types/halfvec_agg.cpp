// avg(halfvec): transition state float8[] {count, sum_1, ..., sum_dim},
// accumulated in double; the combine function is vector_combine (the same
// state shape, as in pgvector). sum(halfvec) needs no code of its own:
// halfvec_add is its transition and combine function.
#include <cmath>

#include "halfvec.h"
#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/float.h"
}

namespace {

// The state array's elements, after checking its shape (a malformed state
// can only come from a direct call of the state functions).
float8* state_values(ArrayType* state, const char* caller, int* dim) {
  if (ARR_NDIM(state) != 1 || ARR_DIMS(state)[0] < 1 || ARR_HASNULL(state) ||
      ARR_ELEMTYPE(state) != FLOAT8OID)
    elog(ERROR, "%s: expected state array", caller);
  *dim = ARR_DIMS(state)[0] - 1;
  return reinterpret_cast<float8*>(ARR_DATA_PTR(state));
}

ArrayType* make_state(Datum* values, int dim) {
  return construct_array(values, dim + 1, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

}  // namespace

extern "C" {

// The first row fixes the dimensions; every later row must have them.
PG_FUNCTION_INFO_V1(halfvec_accum);
Datum halfvec_accum(PG_FUNCTION_ARGS) {
  int dim;
  float8* state = state_values(PG_GETARG_ARRAYTYPE_P(0), "halfvec_accum", &dim);
  HalfVector* v = PG_GETARG_HALFVEC_P(1);
  bool first = dim == 0;
  if (first)
    dim = v->dim;
  else
    CheckExpectedDim(dim, v->dim);

  Datum* next = static_cast<Datum*>(palloc(sizeof(Datum) * (dim + 1)));
  next[0] = Float8GetDatum(state[0] + 1.0);
  for (int i = 0; i < dim; ++i) {
    double x = gknn::half_to_float(v->x[i]);
    double sum = first ? x : state[i + 1] + x;
    if (std::isinf(sum)) float_overflow_error();
    next[i + 1] = Float8GetDatum(sum);
  }
  ArrayType* result = make_state(next, dim);
  pfree(next);
  PG_RETURN_ARRAYTYPE_P(result);
}

// NULL for no rows; each mean rounded to float, then to the nearest half
// (beyond the half range: out of range for type halfvec).
PG_FUNCTION_INFO_V1(halfvec_avg);
Datum halfvec_avg(PG_FUNCTION_ARGS) {
  int dim;
  float8* state = state_values(PG_GETARG_ARRAYTYPE_P(0), "halfvec_avg", &dim);
  double n = state[0];
  if (n == 0.0) PG_RETURN_NULL();
  HalfvecCheckDim(dim);
  HalfVector* result = InitHalfVector(dim);
  for (int i = 0; i < dim; ++i) {
    result->x[i] = FloatToHalf(static_cast<float>(state[i + 1] / n));
    HalfvecCheckElement(result->x[i]);
  }
  PG_RETURN_HALFVEC_P(result);
}

}  // extern "C"
