// Casts of SQL arrays (integer[], real[], double precision[], numeric[]) to
// vector, halfvec and sparsevec, as pgvector declares them: the checks and
// element conversions the three share. Checks of the values (NaN, infinity,
// a type's range, its dimension limit and typmod) stay with each type.
#pragma once

#include "pg.h"

extern "C" {
#include "utils/array.h"
}

struct ArrayElements {
  Datum* elems;  // palloc'd
  Oid type;
  int n;
};

// The elements of `array` after pgvector's checks: one dimension, no NULL.
ArrayElements array_elements(ArrayType* array);

// An element as float4: integers and float8 through a C cast, numeric
// through numeric_float4 (its own range error beyond float4); another
// element type is an error.
float array_element_to_float(Datum d, Oid type);
