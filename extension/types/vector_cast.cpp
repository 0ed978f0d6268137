// Casts between vector and SQL arrays: integer[], real[], double precision[]
// and numeric[] to vector (assignment), vector to real[] (implicit).
#include "vector.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

namespace {

float element_to_float(Datum d, Oid type) {
  switch (type) {
    case INT4OID:
      return static_cast<float>(DatumGetInt32(d));
    case FLOAT4OID:
      return DatumGetFloat4(d);
    case FLOAT8OID:
      return static_cast<float>(DatumGetFloat8(d));
    case NUMERICOID:
      return DatumGetFloat4(DirectFunctionCall1(numeric_float4, d));
    default:
      ereport(ERROR,
              (errcode(ERRCODE_DATA_EXCEPTION), errmsg("unsupported array type %s", format_type_be(type))));
  }
  pg_unreachable();
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(array_to_vector);
Datum array_to_vector(PG_FUNCTION_ARGS) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(0);
  int32 typmod = PG_GETARG_INT32(1);
  if (ARR_NDIM(array) > 1) ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("array must be 1-D")));
  if (array_contains_nulls(array))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("array must not contain nulls")));

  Oid type = ARR_ELEMTYPE(array);
  int16 typlen;
  bool typbyval;
  char typalign;
  get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
  Datum* elems;
  int n;
  deconstruct_array(array, type, typlen, typbyval, typalign, &elems, nullptr, &n);
  CheckDim(n);
  CheckExpectedDim(typmod, n);

  Vector* result = InitVector(n);
  for (int i = 0; i < n; ++i) {
    result->x[i] = element_to_float(elems[i], type);
    CheckElement(result->x[i]);
  }
  pfree(elems);
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
