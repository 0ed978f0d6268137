// avg(vector): transition state is float8[] {count, sum_1, ..., sum_dim},
// accumulated in double and combinable across parallel workers. sum(vector)
// needs no code of its own: vector_add is its transition and combine function.
#include <cmath>

#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
}

namespace {

// The state array's elements; the state is never NULL ('{0}' initially).
float8* state_values(ArrayType* state, int* n) {
  if (ARR_NDIM(state) != 1 || ARR_HASNULL(state) || ARR_ELEMTYPE(state) != FLOAT8OID ||
      ARR_DIMS(state)[0] < 1)
    elog(ERROR, "avg(vector): expected a float8[] state array");
  *n = ARR_DIMS(state)[0];
  return reinterpret_cast<float8*>(ARR_DATA_PTR(state));
}

ArrayType* make_state(const float8* values, int n) {
  Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * n));
  for (int i = 0; i < n; ++i) elems[i] = Float8GetDatum(values[i]);
  ArrayType* result = construct_array(elems, n, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
  pfree(elems);
  return result;
}

void check_state_dims(int state_dim, int dim) {
  if (state_dim != dim)
    ereport(ERROR,
            (errcode(ERRCODE_DATA_EXCEPTION), errmsg("expected %d dimensions, not %d", state_dim, dim)));
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(vector_accum);
Datum vector_accum(PG_FUNCTION_ARGS) {
  int n;
  float8* state = state_values(PG_GETARG_ARRAYTYPE_P(0), &n);
  Vector* v = PG_GETARG_VECTOR_P(1);
  bool first = state[0] == 0;
  if (!first) check_state_dims(n - 1, v->dim);

  float8* next = static_cast<float8*>(palloc(sizeof(float8) * (v->dim + 1)));
  next[0] = state[0] + 1;
  for (int i = 0; i < v->dim; ++i) next[i + 1] = (first ? 0.0 : state[i + 1]) + v->x[i];
  PG_RETURN_POINTER(make_state(next, v->dim + 1));
}

PG_FUNCTION_INFO_V1(vector_combine);
Datum vector_combine(PG_FUNCTION_ARGS) {
  int n1, n2;
  ArrayType* a1 = PG_GETARG_ARRAYTYPE_P(0);
  ArrayType* a2 = PG_GETARG_ARRAYTYPE_P(1);
  float8* s1 = state_values(a1, &n1);
  float8* s2 = state_values(a2, &n2);
  if (s1[0] == 0) PG_RETURN_POINTER(make_state(s2, n2));
  if (s2[0] == 0) PG_RETURN_POINTER(make_state(s1, n1));
  check_state_dims(n1 - 1, n2 - 1);
  float8* sum = static_cast<float8*>(palloc(sizeof(float8) * n1));
  for (int i = 0; i < n1; ++i) sum[i] = s1[i] + s2[i];
  PG_RETURN_POINTER(make_state(sum, n1));
}

PG_FUNCTION_INFO_V1(vector_avg);
Datum vector_avg(PG_FUNCTION_ARGS) {
  int n;
  float8* state = state_values(PG_GETARG_ARRAYTYPE_P(0), &n);
  if (state[0] == 0) PG_RETURN_NULL();  // no rows
  Vector* result = InitVector(n - 1);
  for (int i = 0; i < n - 1; ++i) {
    result->x[i] = static_cast<float>(state[i + 1] / state[0]);
    if (std::isinf(result->x[i]))
      ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("value out of range: overflow")));
  }
  PG_RETURN_VECTOR_P(result);
}

}  // extern "C"
