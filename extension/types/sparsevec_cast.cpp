// Casts to and from sparsevec, as pgvector declares them: vector -> sparsevec
// (implicit), sparsevec -> vector (assignment), and integer[], real[],
// double precision[], numeric[] -> sparsevec (assignment). Zeros are dropped
// on the way in; the dimensions are checked against the target's limits and
// typmod.
#include "array_cast.h"
#include "sparsevec.h"
#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

namespace {

// A sparse vector of `dim` dimensions holding the non-zero ones of x[0..dim).
// NaN counts as non-zero here, so the element checks that follow see it.
SparseVector* from_dense(const float* x, int dim) {
  int nnz = 0;
  for (int i = 0; i < dim; ++i) nnz += x[i] != 0;
  svec::check_nnz(nnz, dim);
  SparseVector* result = InitSparseVector(dim, nnz);
  float* values = SparsevecValues(result);
  for (int i = 0, j = 0; i < dim; ++i)
    if (x[i] != 0) {
      result->indices[j] = i;
      values[j++] = x[i];
    }
  return result;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(vector_to_sparsevec);
Datum vector_to_sparsevec(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  svec::check_dim(v->dim);
  CheckExpectedDim(PG_GETARG_INT32(1), v->dim);
  PG_RETURN_SPARSEVEC_P(from_dense(v->x, v->dim));
}

// The dense vector must fit vector's limits (at most 16000 dimensions).
PG_FUNCTION_INFO_V1(sparsevec_to_vector);
Datum sparsevec_to_vector(PG_FUNCTION_ARGS) {
  SparseVector* sv = PG_GETARG_SPARSEVEC_P(0);
  CheckDim(sv->dim);
  CheckExpectedDim(PG_GETARG_INT32(1), sv->dim);
  const float* values = SparsevecValues(sv);
  Vector* result = InitVector(sv->dim);
  for (int i = 0; i < sv->nnz; ++i) {
    if (sv->indices[i] < 0 || sv->indices[i] >= sv->dim) elog(ERROR, "sparsevec index out of bounds");
    result->x[sv->indices[i]] = values[i];
  }
  PG_RETURN_VECTOR_P(result);
}

PG_FUNCTION_INFO_V1(array_to_sparsevec);
Datum array_to_sparsevec(PG_FUNCTION_ARGS) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  const ArrayElements a = array_elements(array);
  const int n = a.n;
  svec::check_dim(n);
  CheckExpectedDim(typmod, n);

  float* x = static_cast<float*>(palloc(sizeof(float) * n));
  for (int i = 0; i < n; ++i) x[i] = array_element_to_float(a.elems[i], a.type);
  pfree(a.elems);
  SparseVector* result = from_dense(x, n);
  pfree(x);
  const float* values = SparsevecValues(result);
  for (int i = 0; i < result->nnz; ++i) svec::check_element(values[i]);
  PG_RETURN_SPARSEVEC_P(result);
}

}  // extern "C"
