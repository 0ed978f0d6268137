// array_cast.h: what the array -> vector, halfvec and sparsevec casts share.
#include "array_cast.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
}

ArrayElements array_elements(ArrayType* array) {
  if (ARR_NDIM(array) > 1) ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("array must be 1-D")));
  if (array_contains_nulls(array))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("array must not contain nulls")));
  ArrayElements a;
  a.type = ARR_ELEMTYPE(array);
  int16 typlen;
  bool typbyval;
  char typalign;
  get_typlenbyvalalign(a.type, &typlen, &typbyval, &typalign);
  deconstruct_array(array, a.type, typlen, typbyval, typalign, &a.elems, nullptr, &a.n);
  return a;
}

float array_element_to_float(Datum d, Oid type) {
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
