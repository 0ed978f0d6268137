// Odd-size sorting and merging networks on lane-stride register arrays (the
// Faiss paper, §4.1, Algorithms 1 and 2), for WarpSelect / BlockSelect.
//
// A lane-stride array of N "registers" holds 32 N elements: element i lives in
// register i / 32 of lane i % 32. Register indices are template constants, so
// after inlining the whole array stays in registers. Compare-swaps between
// registers (strides that are multiples of 32) happen within a lane; strides
// below 32 are warp-shuffle butterflies; the inverted first stage of a merge
// pairs register a of one array with register b of the other, lanes reversed.
//
// Every array length here is a multiple of 32 but need not be a power of two
// (a thread queue of 3 registers is a 96-element array): merge-odd pads
// conceptually with dummies that never move, and the comparators that would
// touch them are left out. Sub-arrays are split on register boundaries, which
// keeps every stride >= 32 in-lane.
//
// The recursion is written once against a "Net" policy that says how to do
// the five primitive steps. The device policy (WarpNet, in warp_select.cuh)
// does them with shuffles; HostNet below emulates a warp with 32-element
// vectors, so the networks are unit-tested on the CPU.
#pragma once

#include <cstdint>

#include "key_order.cuh"

#if defined(__CUDACC__)
#define GKNN_UNROLL _Pragma("unroll")
#define GKNN_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#define GKNN_UNROLL
#define GKNN_NO_EXEC_CHECK
#endif

namespace gknn::rowsel {

constexpr int kWarpSize = 32;

// Largest power of two strictly below n (n >= 2).
constexpr int pow2_below(int n) {
  int h = 1;
  while (h * 2 < n) h *= 2;
  return h;
}

// ---- words -----------------------------------------------------------------
// A word is a (key, column) pair compared as one value. 32-bit keys pack with
// a 32-bit column into a uint64 (key high); 64-bit keys use W96. Either way
// the key part is the key's ordered bits, already inverted for Largest, so
// the networks only ever look for the smallest.
struct alignas(16) W96 {
  std::uint64_t key;
  std::uint32_t col;
  std::uint32_t pad;
};

// Branch-free: these sit in the innermost loops of the networks.
GKNN_HDI bool wless(std::uint64_t a, std::uint64_t b) { return a < b; }
GKNN_HDI bool wless(const W96& a, const W96& b) {
  return (a.key < b.key) | ((a.key == b.key) & (a.col < b.col));
}
GKNN_HDI bool wequal(std::uint64_t a, std::uint64_t b) { return a == b; }
GKNN_HDI bool wequal(const W96& a, const W96& b) { return (a.key == b.key) & (a.col == b.col); }
// c ? a : b, field by field (a select of struct references would take their
// addresses and push them to local memory).
GKNN_HDI std::uint64_t wsel(bool c, std::uint64_t a, std::uint64_t b) { return c ? a : b; }
GKNN_HDI W96 wsel(bool c, const W96& a, const W96& b) { return W96{c ? a.key : b.key, c ? a.col : b.col, 0}; }

template <typename W>
struct WordTraits;

template <>
struct WordTraits<std::uint64_t> {
  using KeyBits = std::uint32_t;
  GKNN_HDI static std::uint64_t make(KeyBits ob, std::uint32_t col) {
    return (std::uint64_t(ob) << 32) | col;
  }
  GKNN_HDI static KeyBits key(std::uint64_t w) { return KeyBits(w >> 32); }
  GKNN_HDI static std::uint32_t col(std::uint64_t w) { return std::uint32_t(w); }
  GKNN_HDI static std::uint64_t sentinel() { return ~std::uint64_t(0); }
  // A radius shared between warps (an atomicMin'ed uint64), exact here.
  GKNN_HDI static std::uint64_t to_shared(std::uint64_t w) { return w; }
  GKNN_HDI static std::uint64_t from_shared(std::uint64_t s) { return s; }
};

template <>
struct WordTraits<W96> {
  using KeyBits = std::uint64_t;
  GKNN_HDI static W96 make(KeyBits ob, std::uint32_t col) { return W96{ob, col, 0}; }
  GKNN_HDI static KeyBits key(const W96& w) { return w.key; }
  GKNN_HDI static std::uint32_t col(const W96& w) { return w.col; }
  GKNN_HDI static W96 sentinel() { return W96{~std::uint64_t(0), ~std::uint32_t(0), 0}; }
  // Only the key is shared; read back as (key, max column), which is never
  // below the exact word, so the shared radius stays conservative.
  GKNN_HDI static std::uint64_t to_shared(const W96& w) { return w.key; }
  GKNN_HDI static W96 from_shared(std::uint64_t s) { return W96{s, ~std::uint32_t(0), 0}; }
};

// ---- the networks, generic over the Net policy ----------------------------
// Net::cs(a, b)            in-lane compare-swap: a = min, b = max
// Net::butterfly(a, j)     partner lane ^ j; the lower lane keeps the min
// Net::butterfly_rev(a, s) partner lane ^ (s - 1) (reversal inside blocks of
//                          s lanes); the lower half keeps the min
// Net::cs_rev(l, r)        l[lane] against r[31 - lane]: l = min, r = max
// Net::cs_rev_low(l, r)    the same, only l kept
// Arr is a register array (Reg[N]) or any type with operator[](int) -> Reg&.

// merge-odd-continue on registers [A, A + N): sorts a sequence that the
// inverted first stage left bitonic; Left says where the padding would be.
GKNN_NO_EXEC_CHECK
template <class Net, int A, int N, bool Left, class Arr>
GKNN_HDI void merge_continue(Arr& x) {
  if constexpr (N == 1) {
    GKNN_UNROLL
    for (int j = kWarpSize / 2; j >= 1; j >>= 1) Net::butterfly(x[A], j);
  } else {
    constexpr int H = pow2_below(N);
    GKNN_UNROLL
    for (int i = 0; i < N - H; ++i) Net::cs(x[A + i], x[A + i + H]);
    if constexpr (Left) {
      merge_continue<Net, A, N - H, true>(x);
      merge_continue<Net, A + N - H, H, false>(x);
    } else {
      merge_continue<Net, A, H, true>(x);
      merge_continue<Net, A + H, N - H, false>(x);
    }
  }
}

// merge-odd: [A, A + NL) and [A + NL, A + NL + NR), each sorted ascending,
// into one sorted array of NL + NR registers.
GKNN_NO_EXEC_CHECK
template <class Net, int A, int NL, int NR, class Arr>
GKNN_HDI void merge_odd(Arr& x) {
  constexpr int M = NL < NR ? NL : NR;
  GKNN_UNROLL
  for (int q = 0; q < M; ++q) Net::cs_rev(x[A + NL - 1 - q], x[A + NL + q]);  // inverted first stage
  merge_continue<Net, A, NL, true>(x);
  merge_continue<Net, A + NL, NR, false>(x);
}

// sort-odd on registers [A, A + N): ascending in lane-stride order.
GKNN_NO_EXEC_CHECK
template <class Net, int A, int N, class Arr>
GKNN_HDI void sort_odd(Arr& x) {
  if constexpr (N == 1) {
    // Within one register: sort-odd at element level, i.e. for blocks of
    // s = 2, 4, ..., 32 lanes an inverted stage then butterflies.
    GKNN_UNROLL
    for (int s = 2; s <= kWarpSize; s <<= 1) {
      Net::butterfly_rev(x[A], s);
      GKNN_UNROLL
      for (int j = s / 4; j >= 1; j >>= 1) Net::butterfly(x[A], j);
    }
  } else {
    constexpr int NL = N / 2;
    sort_odd<Net, A, NL>(x);
    sort_odd<Net, A + NL, N - NL>(x);
    merge_odd<Net, A, NL, N - NL>(x);
  }
}

// Merge a sorted array b (NB registers) into the sorted queue w (NW
// registers), keeping only the 32 NW smallest in w, sorted. b is left in an
// unspecified state. (merge-odd whose right half is discarded.)
GKNN_NO_EXEC_CHECK
template <class Net, int NW, int NB, class ArrW, class ArrB>
GKNN_HDI void merge_into(ArrW& w, ArrB& b) {
  constexpr int M = NW < NB ? NW : NB;
  GKNN_UNROLL
  for (int q = 0; q < M; ++q) Net::cs_rev_low(w[NW - 1 - q], b[q]);
  merge_continue<Net, 0, NW, true>(w);
}

// ---- host emulation of a warp (for the CPU unit tests) ---------------------
template <typename W>
struct HostNet {
  struct Reg {
    W v[kWarpSize];
  };
  static void cs(Reg& a, Reg& b) {
    for (int l = 0; l < kWarpSize; ++l)
      if (wless(b.v[l], a.v[l])) {
        W t = a.v[l];
        a.v[l] = b.v[l];
        b.v[l] = t;
      }
  }
  static void exch(Reg& a, int mask, int upbit) {
    Reg o = a;
    for (int l = 0; l < kWarpSize; ++l) {
      W x = o.v[l ^ mask];
      bool up = (l & upbit) != 0;
      if (wless(x, o.v[l]) != up) a.v[l] = x;
    }
  }
  static void butterfly(Reg& a, int j) { exch(a, j, j); }
  static void butterfly_rev(Reg& a, int s) { exch(a, s - 1, s >> 1); }
  static void cs_rev(Reg& l, Reg& r) {
    Reg ol = l, orr = r;
    for (int i = 0; i < kWarpSize; ++i) {
      const W& a = ol.v[i];
      const W& b = orr.v[31 - i];
      bool s = wless(b, a);
      l.v[i] = s ? b : a;
      r.v[31 - i] = s ? a : b;
    }
  }
  static void cs_rev_low(Reg& l, const Reg& r) {
    for (int i = 0; i < kWarpSize; ++i)
      if (wless(r.v[31 - i], l.v[i])) l.v[i] = r.v[31 - i];
  }
};

}  // namespace gknn::rowsel
