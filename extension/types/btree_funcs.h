// The btree support and comparison functions of a varlena vector type
// (vector, halfvec, sparsevec): each type gives its ordering, one
// GKNN_BTREE_FUNCS line makes its _cmp, _lt, _le, _eq, _ne, _ge and _gt.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
}

namespace gknn_types {

// Arguments 0 and 1 detoasted, ordered by `Compare`, freed if copies.
template <typename T, int (*Compare)(const T*, const T*)>
int compare_args(FunctionCallInfo fcinfo) {
  T* a = reinterpret_cast<T*>(PG_DETOAST_DATUM(PG_GETARG_DATUM(0)));
  T* b = reinterpret_cast<T*>(PG_DETOAST_DATUM(PG_GETARG_DATUM(1)));
  int c = Compare(a, b);
  PG_FREE_IF_COPY(a, 0);
  PG_FREE_IF_COPY(b, 1);
  return c;
}

}  // namespace gknn_types

#define GKNN_BTREE_FUNC(name, result)               \
  extern "C" {                                      \
  PG_FUNCTION_INFO_V1(name);                        \
  Datum name(PG_FUNCTION_ARGS) { return (result); } \
  }

// prefix: the SQL functions' prefix; T, compare: the type and its ordering.
#define GKNN_BTREE_FUNCS(prefix, T, compare)                                                      \
  GKNN_BTREE_FUNC(prefix##_cmp, Int32GetDatum((gknn_types::compare_args<T, compare>(fcinfo))))    \
  GKNN_BTREE_FUNC(prefix##_lt, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) < 0))  \
  GKNN_BTREE_FUNC(prefix##_le, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) <= 0)) \
  GKNN_BTREE_FUNC(prefix##_eq, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) == 0)) \
  GKNN_BTREE_FUNC(prefix##_ne, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) != 0)) \
  GKNN_BTREE_FUNC(prefix##_ge, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) >= 0)) \
  GKNN_BTREE_FUNC(prefix##_gt, BoolGetDatum((gknn_types::compare_args<T, compare>(fcinfo)) > 0))
