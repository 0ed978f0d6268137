// Distances between bit strings (PostgreSQL's bit and varbit), as pgvector
// defines them: hamming_distance (<~>), the number of differing bits, and
// jaccard_distance (<%>), 1 - |a AND b| / |a OR b| (1 when no bit is set in
// both). The lengths must be equal.
#include <cstring>

#include "pg.h"

extern "C" {
#include "utils/varbit.h"
}

namespace {

// Bit counts over the bytes of two strings of equal length. PostgreSQL keeps
// the pad bits of the last byte zero, so whole bytes can be counted.
struct Counts {
  uint64 differ = 0;  // bits set in exactly one
  uint64 both = 0;    // bits set in both
  uint64 a = 0;       // bits set in a
  uint64 b = 0;       // bits set in b
};

Counts count_bits(const VarBit* a, const VarBit* b) {
  const unsigned char* ax = VARBITS(a);
  const unsigned char* bx = VARBITS(b);
  Size bytes = VARBITBYTES(a);
  Counts c;
  Size i = 0;
  for (; i + sizeof(uint64) <= bytes; i += sizeof(uint64)) {
    uint64 x, y;
    memcpy(&x, ax + i, sizeof x);  // varbit data is not 8-byte aligned
    memcpy(&y, bx + i, sizeof y);
    c.differ += __builtin_popcountll(x ^ y);
    c.both += __builtin_popcountll(x & y);
    c.a += __builtin_popcountll(x);
    c.b += __builtin_popcountll(y);
  }
  for (; i < bytes; ++i) {
    c.differ += __builtin_popcount(ax[i] ^ bx[i]);
    c.both += __builtin_popcount(ax[i] & bx[i]);
    c.a += __builtin_popcount(ax[i]);
    c.b += __builtin_popcount(bx[i]);
  }
  return c;
}

Counts bit_pair(FunctionCallInfo fcinfo) {
  VarBit* a = PG_GETARG_VARBIT_P(0);
  VarBit* b = PG_GETARG_VARBIT_P(1);
  if (VARBITLEN(a) != VARBITLEN(b))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("different bit lengths %u and %u", VARBITLEN(a), VARBITLEN(b))));
  return count_bits(a, b);
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(hamming_distance);
Datum hamming_distance(PG_FUNCTION_ARGS) { PG_RETURN_FLOAT8(static_cast<double>(bit_pair(fcinfo).differ)); }

PG_FUNCTION_INFO_V1(jaccard_distance);
Datum jaccard_distance(PG_FUNCTION_ARGS) {
  Counts c = bit_pair(fcinfo);
  if (c.both == 0) PG_RETURN_FLOAT8(1.0);
  PG_RETURN_FLOAT8(1 - static_cast<double>(c.both) / static_cast<double>(c.a + c.b - c.both));
}

}  // extern "C"
