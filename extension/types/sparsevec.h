// The sparsevec type: pgvector's on-disk and binary layout, so existing dumps,
// COPY BINARY files and client libraries work unchanged.
//
//   int32 varlena header, int32 dim, int32 nnz, int32 unused (0),
//   int32 indices[nnz] (0-based, strictly ascending), float4 values[nnz] (none 0)
//
// Text uses 1-based indices: '{1:1.5,3:2}/5'.
#pragma once

#include "pg.h"

#define SPARSEVEC_MAX_DIM 1000000000
#define SPARSEVEC_MAX_NNZ 16000

struct SparseVector {
  int32 vl_len_;  // varlena header (do not touch directly)
  int32 dim;      // number of dimensions
  int32 nnz;      // number of stored (non-zero) elements
  int32 unused;   // always 0
  int32 indices[FLEXIBLE_ARRAY_MEMBER];
  // float values[nnz] follow the indices
};

// nnz is at most SPARSEVEC_MAX_NNZ wherever a size is computed, so this
// cannot overflow.
inline Size SparsevecSize(int nnz) {
  return offsetof(SparseVector, indices) + (sizeof(int32) + sizeof(float)) * static_cast<Size>(nnz);
}
inline float* SparsevecValues(SparseVector* v) { return reinterpret_cast<float*>(v->indices + v->nnz); }
inline const float* SparsevecValues(const SparseVector* v) {
  return reinterpret_cast<const float*>(v->indices + v->nnz);
}

#define DatumGetSparseVector(d) (reinterpret_cast<SparseVector*>(PG_DETOAST_DATUM(d)))
#define PG_GETARG_SPARSEVEC_P(n) DatumGetSparseVector(PG_GETARG_DATUM(n))
#define PG_RETURN_SPARSEVEC_P(v) PG_RETURN_POINTER(v)

// A sparse vector of `dim` dimensions with room for `nnz` elements (zeroed),
// in the current memory context. Callers check nnz first.
SparseVector* InitSparseVector(int dim, int nnz);

// Errors with pgvector's wording and SQLSTATEs. (The typmod check is
// vector.h's CheckExpectedDim: the same message for every type.)
namespace svec {
void check_dim(int dim);                                        // 1..SPARSEVEC_MAX_DIM
void check_nnz(int nnz, int dim);                               // 0..SPARSEVEC_MAX_NNZ, at most dim
void check_index(const int32* indices, int i, int dim);         // in range, above indices[i - 1]
void check_element(float value);                                // no NaN or infinity
void check_dims(const SparseVector* a, const SparseVector* b);  // binary operators
}  // namespace svec
