// The typmod input of vector, halfvec and sparsevec: one integer, the
// dimensions, between 1 and the type's limit (pgvector's errors).
#pragma once

#include "pg.h"

extern "C" {
#include "utils/array.h"
}

int32 dims_typmod_in(ArrayType* typmods, const char* type_name, int max_dim);
