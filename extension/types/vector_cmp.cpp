// Ordering of vectors for the btree opclass: element by element, then a
// shorter vector before a longer one with the same prefix.
#include "vector.h"

namespace {

int compare(const Vector* a, const Vector* b) {
  int n = a->dim < b->dim ? a->dim : b->dim;
  for (int i = 0; i < n; ++i) {
    if (a->x[i] < b->x[i]) return -1;
    if (a->x[i] > b->x[i]) return 1;
  }
  return (a->dim > b->dim) - (a->dim < b->dim);
}

int compare_args(FunctionCallInfo fcinfo) {
  Vector* a = PG_GETARG_VECTOR_P(0);
  Vector* b = PG_GETARG_VECTOR_P(1);
  int c = compare(a, b);
  PG_FREE_IF_COPY(a, 0);
  PG_FREE_IF_COPY(b, 1);
  return c;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(vector_cmp);
Datum vector_cmp(PG_FUNCTION_ARGS) { PG_RETURN_INT32(compare_args(fcinfo)); }
PG_FUNCTION_INFO_V1(vector_lt);
Datum vector_lt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) < 0); }
PG_FUNCTION_INFO_V1(vector_le);
Datum vector_le(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) <= 0); }
PG_FUNCTION_INFO_V1(vector_eq);
Datum vector_eq(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) == 0); }
PG_FUNCTION_INFO_V1(vector_ne);
Datum vector_ne(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) != 0); }
PG_FUNCTION_INFO_V1(vector_ge);
Datum vector_ge(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) >= 0); }
PG_FUNCTION_INFO_V1(vector_gt);
Datum vector_gt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) > 0); }

}  // extern "C"
