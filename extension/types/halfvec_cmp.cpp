// Ordering of halfvecs for the btree opclass: element by element by value
// (so -0 equals 0), then a shorter halfvec before a longer one with the same
// prefix, as pgvector (and PostgreSQL's arrays) order them.
#include "halfvec.h"

namespace {

int compare(const HalfVector* a, const HalfVector* b) {
  int n = a->dim < b->dim ? a->dim : b->dim;
  for (int i = 0; i < n; ++i) {
    float x = gknn::half_to_float(a->x[i]);
    float y = gknn::half_to_float(b->x[i]);
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return (a->dim > b->dim) - (a->dim < b->dim);
}

int compare_args(FunctionCallInfo fcinfo) {
  HalfVector* a = PG_GETARG_HALFVEC_P(0);
  HalfVector* b = PG_GETARG_HALFVEC_P(1);
  int c = compare(a, b);
  PG_FREE_IF_COPY(a, 0);
  PG_FREE_IF_COPY(b, 1);
  return c;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(halfvec_cmp);
Datum halfvec_cmp(PG_FUNCTION_ARGS) { PG_RETURN_INT32(compare_args(fcinfo)); }
PG_FUNCTION_INFO_V1(halfvec_lt);
Datum halfvec_lt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) < 0); }
PG_FUNCTION_INFO_V1(halfvec_le);
Datum halfvec_le(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) <= 0); }
PG_FUNCTION_INFO_V1(halfvec_eq);
Datum halfvec_eq(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) == 0); }
PG_FUNCTION_INFO_V1(halfvec_ne);
Datum halfvec_ne(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) != 0); }
PG_FUNCTION_INFO_V1(halfvec_ge);
Datum halfvec_ge(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) >= 0); }
PG_FUNCTION_INFO_V1(halfvec_gt);
Datum halfvec_gt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(compare_args(fcinfo) > 0); }

}  // extern "C"
