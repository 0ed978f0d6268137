// The vector type: pgvector's on-disk and binary layout, so existing dumps,
// COPY BINARY files and client libraries work unchanged.
#pragma once

#include "pg.h"

#define VECTOR_MAX_DIM 16000

struct Vector {
  int32 vl_len_;  // varlena header (do not touch directly)
  int16 dim;      // number of elements
  int16 unused;   // always 0
  float x[FLEXIBLE_ARRAY_MEMBER];
};

#define VECTOR_SIZE(dim) (offsetof(Vector, x) + sizeof(float) * (dim))
#define DatumGetVector(d) (reinterpret_cast<Vector*>(PG_DETOAST_DATUM(d)))
#define PG_GETARG_VECTOR_P(n) DatumGetVector(PG_GETARG_DATUM(n))
#define PG_RETURN_VECTOR_P(v) PG_RETURN_POINTER(v)

// A zeroed vector of `dim` elements in the current memory context; ERROR
// (CheckDim) unless 1 <= dim <= VECTOR_MAX_DIM.
Vector* InitVector(int dim);

// Errors with pgvector's wording and SQLSTATEs.
void CheckDim(int dim);                            // 1..VECTOR_MAX_DIM
void CheckExpectedDim(int32 typmod, int dim);      // vector(n) columns
void CheckElement(float value);                    // no NaN or infinity
void CheckDims(const Vector* a, const Vector* b);  // binary operators
