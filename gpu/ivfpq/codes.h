// PQ codes packed nbits at a time, little-endian: code j occupies bits
// [j*nbits, (j+1)*nbits) of an entry's byte string (gknn/ivfpq.h). One
// implementation for the CPU encoder, the CPU scan and the GPU scan kernel.
#pragma once

#include <cstdint>

#include "gknn/distance.h"  // GKNN_HD

namespace gknn::ivfpq {

// Code j of an entry. nbits <= 8, so a code spans at most two bytes; the
// second is read only when the code reaches into it, never past the entry.
GKNN_HD unsigned read_code(const std::uint8_t* code, int j, int nbits) {
  const int bit = j * nbits, byte = bit >> 3, shift = bit & 7;
  unsigned v = unsigned(code[byte]) >> shift;
  if (shift + nbits > 8) v |= unsigned(code[byte + 1]) << (8 - shift);
  return v & ((1u << nbits) - 1u);
}

// Stores code j (value < 2^nbits) into an entry whose bits for j are zero.
GKNN_HD void write_code(std::uint8_t* code, int j, int nbits, unsigned value) {
  const int bit = j * nbits, byte = bit >> 3, shift = bit & 7;
  code[byte] = std::uint8_t(code[byte] | (value << shift));
  if (shift + nbits > 8) code[byte + 1] = std::uint8_t(code[byte + 1] | (value >> (8 - shift)));
}

// One entry (code_size bytes) from its m codes, code j at sub[j * stride]
// (the nearest_cpu / GPU layout, one column per sub-space).
GKNN_HD void pack_codes(const std::int32_t* sub, std::int64_t stride, int m, int nbits, int code_size,
                        std::uint8_t* code) {
  for (int b = 0; b < code_size; ++b) code[b] = 0;
  for (int j = 0; j < m; ++j) write_code(code, j, nbits, unsigned(sub[j * stride]));
}

}  // namespace gknn::ivfpq
