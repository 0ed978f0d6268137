// avg(vector): transition state is float8[] {count, sum_1, ..., sum_dim},
// accumulated in double and combinable across parallel workers. The initial
// state '{0}' has no dimension yet: the first vector gives it one. sum(vector)
// needs no code of its own: vector_add is its transition and combine function.
//
// The state functions are callable from SQL with any float8[], so every state
// is checked before use, as pgvector checks it (same messages and SQLSTATEs):
// a one-dimensional array of at least one element and no NULLs, a vector of
// the state's dimension, and 1 to VECTOR_MAX_DIM dimensions for any vector
// made from a state. The count must also be what an aggregate makes: a whole
// number >= 0 (pgvector does not check it; avg would divide by it).
#include <cmath>

#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/float.h"
}

namespace {

struct State {
  const float8* values;  // values[0] is the count, values[1..dim] the sums
  int dim;               // 0: no vector accumulated yet
};

State check_state(ArrayType* array, const char* caller) {
  if (ARR_NDIM(array) != 1 || ARR_DIMS(array)[0] < 1 || ARR_HASNULL(array) ||
      ARR_ELEMTYPE(array) != FLOAT8OID)
    elog(ERROR, "%s: expected state array", caller);
  const float8* values = reinterpret_cast<const float8*>(ARR_DATA_PTR(array));
  const float8 count = values[0];
  if (!(count >= 0) || std::isinf(count) || count != std::floor(count))
    elog(ERROR, "%s: expected state array", caller);
  return State{values, ARR_DIMS(array)[0] - 1};
}

// A state of `dim` dimensions: values[0] = count, sums filled by the caller.
float8* new_state(int dim) { return static_cast<float8*>(palloc(sizeof(float8) * (dim + 1))); }

ArrayType* make_state(const float8* values, int dim) {
  Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * (dim + 1)));
  for (int i = 0; i <= dim; ++i) elems[i] = Float8GetDatum(values[i]);
  ArrayType* result =
      construct_array(elems, dim + 1, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
  pfree(elems);
  return result;
}

// A running sum may not become infinite (22003, as pgvector).
float8 add_sums(float8 a, float8 b) {
  float8 sum = a + b;
  if (std::isinf(sum)) float_overflow_error();
  return sum;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(vector_accum);
Datum vector_accum(PG_FUNCTION_ARGS) {
  State s = check_state(PG_GETARG_ARRAYTYPE_P(0), "vector_accum");
  Vector* v = PG_GETARG_VECTOR_P(1);
  CheckDim(v->dim);  // a stored vector older gknn versions could make
  const bool first = s.dim == 0;
  if (!first) CheckExpectedDim(s.dim, v->dim);

  float8* next = new_state(v->dim);
  next[0] = s.values[0] + 1;
  for (int i = 0; i < v->dim; ++i) next[i + 1] = first ? v->x[i] : add_sums(s.values[i + 1], v->x[i]);
  PG_RETURN_POINTER(make_state(next, v->dim));
}

PG_FUNCTION_INFO_V1(vector_combine);
Datum vector_combine(PG_FUNCTION_ARGS) {
  State a = check_state(PG_GETARG_ARRAYTYPE_P(0), "vector_combine");
  State b = check_state(PG_GETARG_ARRAYTYPE_P(1), "vector_combine");
  // A state with no dimension adds only its count.
  const int dim = a.dim > 0 ? a.dim : b.dim;
  if (dim > 0) CheckDim(dim);
  if (a.dim > 0 && b.dim > 0) CheckExpectedDim(a.dim, b.dim);

  float8* sum = new_state(dim);
  sum[0] = a.values[0] + b.values[0];
  for (int i = 1; i <= dim; ++i) {
    if (a.dim == 0)
      sum[i] = b.values[i];
    else if (b.dim == 0)
      sum[i] = a.values[i];
    else
      sum[i] = add_sums(a.values[i], b.values[i]);
  }
  PG_RETURN_POINTER(make_state(sum, dim));
}

PG_FUNCTION_INFO_V1(vector_avg);
Datum vector_avg(PG_FUNCTION_ARGS) {
  State s = check_state(PG_GETARG_ARRAYTYPE_P(0), "vector_avg");
  const float8 count = s.values[0];
  if (count == 0) PG_RETURN_NULL();    // no rows: SQL's avg is NULL
  Vector* result = InitVector(s.dim);  // CheckDim: 1..VECTOR_MAX_DIM
  for (int i = 0; i < s.dim; ++i) {
    result->x[i] = static_cast<float>(s.values[i + 1] / count);
    CheckElement(result->x[i]);
  }
  PG_RETURN_VECTOR_P(result);
}

}  // extern "C"
