// The halfvec type: pgvector's on-disk and binary layout (IEEE binary16
// elements), so dumps, COPY BINARY files and client libraries written for
// pgvector work unchanged. Conversions live in gknn/half.h (no PostgreSQL),
// the same code the GPU will run.
#pragma once

#include "gknn/half.h"
#include "pg.h"

#define HALFVEC_MAX_DIM 16000

typedef uint16 half;  // the bits of an IEEE binary16 value

struct HalfVector {
  int32 vl_len_;  // varlena header (do not touch directly)
  int16 dim;      // number of elements
  int16 unused;   // always 0
  half x[FLEXIBLE_ARRAY_MEMBER];
};

#define HALFVEC_SIZE(dim) (offsetof(HalfVector, x) + sizeof(half) * (dim))
#define DatumGetHalfVector(d) (reinterpret_cast<HalfVector*>(PG_DETOAST_DATUM(d)))
#define PG_GETARG_HALFVEC_P(n) DatumGetHalfVector(PG_GETARG_DATUM(n))
#define PG_RETURN_HALFVEC_P(v) PG_RETURN_POINTER(v)

// A zeroed halfvec of `dim` elements in the current memory context.
HalfVector* InitHalfVector(int dim);

// Errors with pgvector's wording and SQLSTATEs (CheckExpectedDim, shared with
// vector, is in vector.h).
void HalfvecCheckDim(int dim);                                    // 1..HALFVEC_MAX_DIM
void HalfvecCheckElement(half value);                             // no NaN or infinity
void HalfvecCheckDims(const HalfVector* a, const HalfVector* b);  // binary operators

// float -> half, rounded to nearest even; a finite float beyond the half
// range is an error ("... is out of range for type halfvec", 22003).
half FloatToHalf(float value);

// The elements as floats (exact), in a palloc'd array: the distances and
// norms of halfvec are those of these floats, computed by gknn/distance.h.
float* HalfvecToFloats(const HalfVector* v);
