// Total order of (key, payload) pairs as one unsigned integer, for every
// selection kernel and its CPU reference.
//
// A key maps to "ordered bits": an unsigned integer of the key's width whose
// unsigned order is the SQL order of the keys (floats: NaN canonicalised
// above +inf, -0 folded into +0; signed integers: sign bit flipped). Largest
// selection inverts those bits, so every algorithm only ever looks for the
// smallest. Ordered bits and payload are packed into one word, key high and
// payload low, so ties resolve by payload with a single compare: a 64-bit
// word when both fit, else a 128-bit pair.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gknn/select.h"

#if defined(__CUDACC__)
#define GKNN_HDI __host__ __device__ __forceinline__
#else
#define GKNN_HDI inline
#endif

// Every (key, payload) pair the selection API is instantiated for, as an
// X-macro: X(Key, Payload) once per pair.
#define GKNN_FOR_EACH_KEY_PAYLOAD(X) \
  X(float, std::uint32_t)            \
  X(float, std::uint64_t)            \
  X(double, std::uint32_t)           \
  X(double, std::uint64_t)           \
  X(std::int32_t, std::uint32_t)     \
  X(std::int32_t, std::uint64_t)     \
  X(std::int64_t, std::uint32_t)     \
  X(std::int64_t, std::uint64_t)

namespace gknn::select {

template <typename T, typename F>
GKNN_HDI T bit_cast(F from) {
  static_assert(sizeof(T) == sizeof(F), "size mismatch");
  T to;
  std::memcpy(&to, &from, sizeof(T));
  return to;
}

template <typename Key>
struct KeyBits;

template <>
struct KeyBits<float> {
  using Bits = std::uint32_t;
  GKNN_HDI static Bits ordered(float k) {
    Bits b = bit_cast<Bits>(k);
    if (k != k) b = 0x7fc00000u;  // one NaN, above +inf
    if (k == 0.0f) b = 0;         // -0 == +0
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  GKNN_HDI static float key(Bits o) { return bit_cast<float>((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o); }
};

template <>
struct KeyBits<double> {
  using Bits = std::uint64_t;
  static constexpr Bits kSign = 0x8000000000000000ull;
  GKNN_HDI static Bits ordered(double k) {
    Bits b = bit_cast<Bits>(k);
    if (k != k) b = 0x7ff8000000000000ull;
    if (k == 0.0) b = 0;
    return (b & kSign) ? ~b : (b | kSign);
  }
  GKNN_HDI static double key(Bits o) { return bit_cast<double>((o & kSign) ? (o & ~kSign) : ~o); }
};

template <>
struct KeyBits<std::int32_t> {
  using Bits = std::uint32_t;
  GKNN_HDI static Bits ordered(std::int32_t k) { return static_cast<Bits>(k) ^ 0x80000000u; }
  GKNN_HDI static std::int32_t key(Bits o) { return static_cast<std::int32_t>(o ^ 0x80000000u); }
};

template <>
struct KeyBits<std::int64_t> {
  using Bits = std::uint64_t;
  GKNN_HDI static Bits ordered(std::int64_t k) { return static_cast<Bits>(k) ^ 0x8000000000000000ull; }
  GKNN_HDI static std::int64_t key(Bits o) { return static_cast<std::int64_t>(o ^ 0x8000000000000000ull); }
};

// A 128-bit word compared as (hi, lo).
struct U128 {
  std::uint64_t hi, lo;
  GKNN_HDI bool operator<(const U128& o) const { return hi < o.hi || (hi == o.hi && lo < o.lo); }
  GKNN_HDI bool operator==(const U128& o) const { return hi == o.hi && lo == o.lo; }
  GKNN_HDI bool operator<=(const U128& o) const { return !(o < *this); }
};

// The largest word: the padding sentinel, never ahead of a real element.
template <typename Word>
GKNN_HDI Word max_word();
template <>
GKNN_HDI std::uint64_t max_word<std::uint64_t>() {
  return ~0ull;
}
template <>
GKNN_HDI U128 max_word<U128>() {
  return U128{~0ull, ~0ull};
}

template <typename Key, typename Payload,
          bool kNarrow = (sizeof(Key) + sizeof(Payload) <= sizeof(std::uint64_t))>
struct Packing;

// Key and payload in one 64-bit word.
template <typename Key, typename Payload>
struct Packing<Key, Payload, true> {
  using Word = std::uint64_t;
  using Bits = typename KeyBits<Key>::Bits;
  static constexpr int kShift = 8 * sizeof(Payload);
  GKNN_HDI static Word pack(Key k, Payload p, bool largest) {
    Bits o = KeyBits<Key>::ordered(k);
    if (largest) o = ~o;
    return (static_cast<Word>(o) << kShift) | static_cast<Word>(p);
  }
  GKNN_HDI static Key key(Word w, bool largest) {
    Bits o = static_cast<Bits>(w >> kShift);
    return KeyBits<Key>::key(largest ? static_cast<Bits>(~o) : o);
  }
  GKNN_HDI static Payload payload(Word w) { return static_cast<Payload>(w); }
  GKNN_HDI static Word sentinel() { return max_word<Word>(); }
};

// Key and payload in a (hi, lo) pair.
template <typename Key, typename Payload>
struct Packing<Key, Payload, false> {
  using Word = U128;
  using Bits = typename KeyBits<Key>::Bits;
  GKNN_HDI static Word pack(Key k, Payload p, bool largest) {
    Bits o = KeyBits<Key>::ordered(k);
    if (largest) o = ~o;
    return Word{static_cast<std::uint64_t>(o), static_cast<std::uint64_t>(p)};
  }
  GKNN_HDI static Key key(Word w, bool largest) {
    Bits o = static_cast<Bits>(w.hi);
    return KeyBits<Key>::key(largest ? static_cast<Bits>(~o) : o);
  }
  GKNN_HDI static Payload payload(Word w) { return static_cast<Payload>(w.lo); }
  GKNN_HDI static Word sentinel() { return max_word<Word>(); }
};

}  // namespace gknn::select
