// binary_quantize(vector) -> bit: one bit per element, 1 where the element is
// above 0, first element in the first (most significant) bit, as pgvector
// quantizes. The result is an ordinary bit string, so expression indexes
// such as (binary_quantize(emb)::bit(1536)) and the bit distance operators
// apply to it. (binary_quantize(halfvec) comes with the halfvec type.)
#include "vector.h"

extern "C" {
#include "utils/varbit.h"
}

extern "C" {

PG_FUNCTION_INFO_V1(binary_quantize);
Datum binary_quantize(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  Size size = VARBITTOTALLEN(v->dim);
  VarBit* result = static_cast<VarBit*>(palloc0(size));  // pad bits stay 0
  SET_VARSIZE(result, size);
  VARBITLEN(result) = v->dim;
  unsigned char* bits = VARBITS(result);
  for (int i = 0; i < v->dim; ++i)
    if (v->x[i] > 0) bits[i / BITS_PER_BYTE] |= static_cast<unsigned char>(0x80 >> (i % BITS_PER_BYTE));
  PG_RETURN_VARBIT_P(result);
}

}  // extern "C"
