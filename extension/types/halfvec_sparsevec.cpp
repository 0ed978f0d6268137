// Casts between halfvec and sparsevec, as pgvector declares them: halfvec ->
// sparsevec (implicit) keeps the non-zero elements' float values exactly;
// sparsevec -> halfvec (assignment) rounds each stored value to the nearest
// half, within halfvec's 16000 dimensions.
#include "halfvec.h"
#include "sparsevec.h"
#include "vector.h"

extern "C" {

PG_FUNCTION_INFO_V1(halfvec_to_sparsevec);
Datum halfvec_to_sparsevec(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  svec::check_dim(v->dim);
  CheckExpectedDim(PG_GETARG_INT32(1), v->dim);
  int nnz = 0;
  for (int i = 0; i < v->dim; ++i) nnz += !gknn::half_is_zero(v->x[i]);
  svec::check_nnz(nnz, v->dim);
  SparseVector* result = InitSparseVector(v->dim, nnz);
  float* values = SparsevecValues(result);
  for (int i = 0, j = 0; i < v->dim; ++i)
    if (!gknn::half_is_zero(v->x[i])) {
      result->indices[j] = i;
      values[j++] = gknn::half_to_float(v->x[i]);
    }
  PG_RETURN_SPARSEVEC_P(result);
}

PG_FUNCTION_INFO_V1(sparsevec_to_halfvec);
Datum sparsevec_to_halfvec(PG_FUNCTION_ARGS) {
  SparseVector* sv = PG_GETARG_SPARSEVEC_P(0);
  HalfvecCheckDim(sv->dim);
  CheckExpectedDim(PG_GETARG_INT32(1), sv->dim);
  const float* values = SparsevecValues(sv);
  HalfVector* result = InitHalfVector(sv->dim);
  for (int i = 0; i < sv->nnz; ++i) {
    if (sv->indices[i] < 0 || sv->indices[i] >= sv->dim) elog(ERROR, "sparsevec index out of bounds");
    result->x[sv->indices[i]] = FloatToHalf(values[i]);
  }
  PG_RETURN_HALFVEC_P(result);
}

}  // extern "C"
