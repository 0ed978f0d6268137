// IEEE 754 binary16 ("half") <-> binary32 conversion, for host and device.
//
// halfvec stores each element as the 16 bits of a binary16 value (pgvector's
// on-disk layout), so a half is a plain uint16_t here: no compiler half type,
// no intrinsics, the same bits on every platform. Conversions are exact
// integer arithmetic:
//   - half -> float is exact (every binary16 value is a binary32 value);
//   - float -> half rounds to nearest, ties to even (what F16C's vcvtps2ph
//     with rounding mode 0, _Float16 casts and CUDA's __float2half_rn do),
//     with overflow to infinity and gradual underflow to subnormals and zero.
// NaN stays NaN (quiet, sign and the high payload bits kept); callers that
// store halves reject NaN and infinity themselves.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GKNN_HALF_HD __host__ __device__ __forceinline__
#else
#define GKNN_HALF_HD inline
#endif

namespace gknn {

namespace half_detail {

GKNN_HALF_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

GKNN_HALF_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// q, the value truncated to a multiple of the last kept bit, plus one when
// the dropped bits `rest` (of `width` bits) are more than half, or exactly
// half and q is odd.
GKNN_HALF_HD uint32_t round_nearest_even(uint32_t q, uint32_t rest, int width) {
  uint32_t halfway = 1u << (width - 1);
  return q + ((rest > halfway || (rest == halfway && (q & 1u))) ? 1u : 0u);
}

}  // namespace half_detail

constexpr uint16_t kHalfSignMask = 0x8000;
constexpr uint16_t kHalfExpMask = 0x7c00;
constexpr uint16_t kHalfInfinity = 0x7c00;
constexpr float kHalfMax = 65504.0f;

GKNN_HALF_HD bool half_is_nan(uint16_t h) { return (h & 0x7fff) > kHalfExpMask; }
GKNN_HALF_HD bool half_is_inf(uint16_t h) { return (h & 0x7fff) == kHalfExpMask; }
GKNN_HALF_HD bool half_is_zero(uint16_t h) { return (h & 0x7fff) == 0; }

// Exact.
GKNN_HALF_HD float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & kHalfSignMask) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)  // infinity, or NaN made quiet with its payload kept
    return half_detail::bits_float(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  if (exp == 0) {
    if (mant == 0) return half_detail::bits_float(sign);
    // Subnormal: mant * 2^-24; normalise so bit 10 is the implicit one.
    int shift = 0;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      ++shift;
    }
    // Unbiased exponent -14 - shift; float bias 127.
    return half_detail::bits_float(sign | static_cast<uint32_t>(127 - 14 - shift) << 23 |
                                   ((mant & 0x3ffu) << 13));
  }
  return half_detail::bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

// Round to nearest, ties to even. Values of magnitude >= 65520 (halfway
// between 65504 and 2^16) become infinity; NaN stays NaN.
GKNN_HALF_HD uint16_t float_to_half(float f) {
  uint32_t x = half_detail::float_bits(f);
  uint32_t sign = (x >> 16) & kHalfSignMask;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // infinity or NaN
    if (mag == 0x7f800000u) return static_cast<uint16_t>(sign | kHalfInfinity);
    return static_cast<uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
  }
  if (mag >= 0x477ff000u)  // >= 65520: rounds past the largest half
    return static_cast<uint16_t>(sign | kHalfInfinity);
  if (mag >= 0x38800000u) {  // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15) in place, keep the top 10 mantissa
    // bits; a carry out of the mantissa correctly bumps the exponent.
    uint32_t q = (mag - 0x38000000u) >> 13;
    return static_cast<uint16_t>(sign | half_detail::round_nearest_even(q, mag & 0x1fffu, 13));
  }
  if (mag <= 0x33000000u)  // <= 2^-25: half the smallest subnormal or less, ties to 0
    return static_cast<uint16_t>(sign);
  // Subnormal half: the value in units of 2^-24. The float is mant * 2^(e-150)
  // with e in [102, 112], so the units are mant >> (126 - e), 14..24 bits dropped.
  uint32_t e = mag >> 23;
  uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
  int width = static_cast<int>(126 - e);
  uint32_t q = mant >> width;
  uint32_t rest = mant & ((1u << width) - 1u);
  // A carry to 0x400 is the smallest normal half, correctly encoded.
  return static_cast<uint16_t>(sign | half_detail::round_nearest_even(q, rest, width));
}

}  // namespace gknn
