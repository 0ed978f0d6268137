// Casts between vector and SQL arrays: integer[], real[], double precision[]
// and numeric[] to vector (assignment), vector to real[] (implicit).
#include "array_cast.h"
#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

extern "C" {

PG_FUNCTION_INFO_V1(array_to_vector);
Datum array_to_vector(PG_FUNCTION_ARGS) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  const ArrayElements a = array_elements(array);
  const int n = a.n;
  CheckDim(n);
  CheckExpectedDim(typmod, n);

  Vector* result = InitVector(n);
  for (int i = 0; i < n; ++i) {
    result->x[i] = array_element_to_float(a.elems[i], a.type);
    CheckElement(result->x[i]);
  }
  pfree(a.elems);
  PG_RETURN_VECTOR_P(result);
}

PG_FUNCTION_INFO_V1(vector_to_float4);
Datum vector_to_float4(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * v->dim));
  for (int i = 0; i < v->dim; ++i) elems[i] = Float4GetDatum(v->x[i]);
  ArrayType* result = construct_array(elems, v->dim, FLOAT4OID, sizeof(float4), true, TYPALIGN_INT);
  pfree(elems);
  PG_RETURN_POINTER(result);
}

}  // extern "C"
