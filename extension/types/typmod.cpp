// typmod.h: vector(n), halfvec(n), sparsevec(n).
#include "typmod.h"

int32 dims_typmod_in(ArrayType* typmods, const char* type_name, int max_dim) {
  int n;
  int32* tl = ArrayGetIntegerTypmods(typmods, &n);
  if (n != 1) ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid type modifier")));
  if (*tl < 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("dimensions for type %s must be at least 1", type_name)));
  if (*tl > max_dim)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("dimensions for type %s cannot exceed %d", type_name, max_dim)));
  return *tl;
}
