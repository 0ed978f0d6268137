// WarpSelect (the Faiss paper, §4.2) with the thesis' "bits" refinements, as
// device building blocks for the batched row selection (select_rows_cuda.cu).
//
// One warp selects the k smallest words of a stream:
//  - the warp queue: the K smallest words so far (K = k rounded up to a power
//    of two, at least 32), sorted ascending;
//  - the radius: the queue's k-th word, known to every lane. A word above it
//    cannot be among the k smallest (the thesis' prefilter). The fast path
//    compares only key bits against it, with one warp vote per tile of loads;
//  - the candidates that pass go to a per-warp buffer of CAP words in shared
//    memory (the "bits" shared buffer, per warp), appended with one warp scan
//    per tile. When the buffer would overflow it is sorted and merged into the
//    queue (inverted first stage, then half-cleaners: merge-odd), and the
//    radius is refreshed;
//  - several warps selecting parts of one row (BlockSelect, partitioned rows)
//    share their radii through an atomicMin'ed word: any warp's k-th word
//    bounds the row's k-th word, so each warp filters with the tightest.
//
// Three queue implementations share that outline:
//  - SmemSelect (the default): the queue is a sorted array in shared memory;
//    the networks are loops over 32-word "registers" (butterflies in
//    registers with shuffles, larger strides in place in shared memory). The
//    code stays small whatever K is, and the registers stay free for loads.
//  - WarpSelect: the paper's lane-stride register queue (K / 32 registers per
//    lane, compile-time indices, one template per bucket) with the odd-size
//    sort-odd / merge-odd networks of merge_network.cuh, fed by the buffer.
//  - ThreadQueueSelect: the paper's per-lane thread queues of t registers
//    (t = 2/3/4/8) instead of the buffer, merged when any lane's queue is full.
// The register versions unroll every network, which makes the larger
// buckets' kernels hundreds of kilobytes of code; they are kept as the
// faithful reference and for comparison (GKNN_ROWSEL_QUEUE, float keys).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "merge_network.cuh"

namespace gknn::rowsel {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int lane_id() { return int(threadIdx.x) & (kWarpSize - 1); }

__device__ __forceinline__ unsigned lanemask_lt() {
  unsigned m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

// ---- shuffles of words ------------------------------------------------------
// 64-bit words use the intrinsics' own 64-bit overloads; W96 shuffles its key
// and its column.
__device__ __forceinline__ std::uint64_t shfl_xor_w(std::uint64_t v, int m) {
  return __shfl_xor_sync(kFullMask, static_cast<unsigned long long>(v), m);
}
__device__ __forceinline__ std::uint64_t shfl_w(std::uint64_t v, int src) {
  return __shfl_sync(kFullMask, static_cast<unsigned long long>(v), src);
}
__device__ __forceinline__ W96 shfl_xor_w(const W96& v, int m) {
  return W96{shfl_xor_w(v.key, m), __shfl_xor_sync(kFullMask, v.col, m), 0};
}
__device__ __forceinline__ W96 shfl_w(const W96& v, int src) {
  return W96{shfl_w(v.key, src), __shfl_sync(kFullMask, v.col, src), 0};
}

// ---- the device network policy (see merge_network.cuh) ---------------------
// The operands are registers (W&) or shared-memory slots (SRef<W>).
template <typename W>
struct WarpNet {
  template <class A, class B>
  __device__ __forceinline__ static void cs(A&& a, B&& b) {
    const W x = a, y = b;
    const bool s = wless(y, x);
    a = wsel(s, y, x);
    b = wsel(s, x, y);
  }
  template <class A>
  __device__ __forceinline__ static void exch(A&& a, int mask, bool up) {
    const W v = a;
    const W x = shfl_xor_w(v, mask);
    a = wsel(wless(x, v) != up, x, v);
  }
  template <class A>
  __device__ __forceinline__ static void butterfly(A&& a, int j) {
    exch(a, j, (lane_id() & j) != 0);
  }
  template <class A>
  __device__ __forceinline__ static void butterfly_rev(A&& a, int s) {
    exch(a, s - 1, (lane_id() & (s >> 1)) != 0);
  }
  template <class A, class B>
  __device__ __forceinline__ static void cs_rev(A&& l, B&& r) {
    const W x = l;
    const W y = shfl_xor_w(W(r), kWarpSize - 1);
    const bool s = wless(y, x);
    l = wsel(s, y, x);
    r = shfl_xor_w(wsel(s, x, y), kWarpSize - 1);
  }
  template <class A, class B>
  __device__ __forceinline__ static void cs_rev_low(A&& l, B&& r) {
    const W x = l;
    const W y = shfl_xor_w(W(r), kWarpSize - 1);
    l = wsel(wless(y, x), y, x);
  }
};

// A lane-stride array kept in shared memory: "register" i of this lane is
// p[i * 32] (p already offset by the lane). Every access is volatile, so the
// compiler cannot quietly cache the array in registers (which is what the
// shared-memory queue is there to avoid).
__device__ __forceinline__ std::uint64_t vload(const std::uint64_t* p) {
  return *reinterpret_cast<const volatile std::uint64_t*>(p);
}
__device__ __forceinline__ W96 vload(const W96* p) {
  W96 r;
  r.key = *reinterpret_cast<const volatile std::uint64_t*>(&p->key);
  r.col = *reinterpret_cast<const volatile std::uint32_t*>(&p->col);
  r.pad = 0;
  return r;
}
__device__ __forceinline__ void vstore(std::uint64_t* p, std::uint64_t v) {
  *reinterpret_cast<volatile std::uint64_t*>(p) = v;
}
__device__ __forceinline__ void vstore(W96* p, const W96& v) {
  *reinterpret_cast<volatile std::uint64_t*>(&p->key) = v.key;
  *reinterpret_cast<volatile std::uint32_t*>(&p->col) = v.col;
}

template <typename W>
struct SRef {
  W* p;
  __device__ __forceinline__ operator W() const { return vload(p); }
  __device__ __forceinline__ const SRef& operator=(const W& v) const {
    vstore(p, v);
    return *this;
  }
};

template <typename W>
struct SmemArr {
  W* p;
  __device__ __forceinline__ SRef<W> operator[](int i) const { return SRef<W>{p + i * kWarpSize}; }
};

// ---- loads --------------------------------------------------------------------
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// 16 bytes, read once: no L1 allocation, 256-byte L2 prefetch.
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

template <typename T>
__device__ __forceinline__ T ld_elem(const T* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "element size");
  T r;
  if constexpr (sizeof(T) == 4) {
    unsigned v = __ldg(reinterpret_cast<const unsigned*>(p));
    std::memcpy(&r, &v, 4);
  } else if constexpr (sizeof(T) == 8) {
    unsigned long long v = __ldg(reinterpret_cast<const unsigned long long*>(p));
    std::memcpy(&r, &v, 8);
  } else {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    std::memcpy(&r, &v, 16);
  }
  return r;
}

// ---- loaders: what a row holds and how it becomes words ----------------------
// The fast-path test "may this element be a candidate": its key bits are at
// most the radius' key bits. Floating-point keys test the key itself against
// the radius' key with one unordered compare: exact for a numeric radius; a
// NaN radius lets everything through (as the bits test does), and for Largest
// with a NaN radius numbers get through too (harmless extra candidates).
template <typename Key, typename Bits, bool kFloat = std::is_floating_point<Key>::value>
struct QuickTest {
  Bits rkey, flip;
  __device__ __forceinline__ static QuickTest make(Bits rkey, Bits flip) { return QuickTest{rkey, flip}; }
  __device__ __forceinline__ bool pass(Key k) const {
    return (select::KeyBits<Key>::ordered(k) ^ flip) <= rkey;
  }
};
template <typename Key, typename Bits>
struct QuickTest<Key, Bits, true> {
  Key thr, sgn;  // Smallest: pass unless k > t; Largest: unless -k > -t
  __device__ __forceinline__ static QuickTest make(Bits rkey, Bits flip) {
    const Key t = select::KeyBits<Key>::key(rkey ^ flip);
    const Key s = flip != 0 ? Key(-1) : Key(1);
    return QuickTest{t * s, s};
  }
  __device__ __forceinline__ bool pass(Key k) const { return !(k * sgn > thr); }
};

// KeyLoad: a row of keys; the word is (ordered key bits ^ flip, column).
template <typename Key>
struct KeyLoad {
  using Elem = Key;
  using Bits = typename select::KeyBits<Key>::Bits;
  using Word = std::conditional_t<sizeof(Key) == 4, std::uint64_t, W96>;
  using Quick = QuickTest<Key, Bits>;
  static constexpr int kVec = 16 / int(sizeof(Key));
  __device__ __forceinline__ static Bits ordered(Key k, Bits flip) {
    return select::KeyBits<Key>::ordered(k) ^ flip;
  }
  __device__ __forceinline__ static Word make(Key k, std::uint32_t col, Bits flip) {
    return WordTraits<Word>::make(ordered(k, flip), col);
  }
  __device__ __forceinline__ static Quick quick(Bits rkey, Bits flip) { return Quick::make(rkey, flip); }
};

// WordLoad: a row of words (partial results of a partitioned pass), taken as is.
template <typename W>
struct WordLoad {
  using Elem = W;
  using Word = W;
  using Bits = typename WordTraits<W>::KeyBits;
  struct Quick {
    Bits rkey;
    __device__ __forceinline__ bool pass(const W& e) const { return WordTraits<W>::key(e) <= rkey; }
  };
  static constexpr int kVec = 16 / int(sizeof(W));
  __device__ __forceinline__ static Bits ordered(const W& e, Bits) { return WordTraits<W>::key(e); }
  __device__ __forceinline__ static Word make(const W& e, std::uint32_t, Bits) { return e; }
  __device__ __forceinline__ static Quick quick(Bits rkey, Bits) { return Quick{rkey}; }
};

// ---- the radius shared between warps and blocks ------------------------------
template <typename W>
__device__ __forceinline__ W share_radius(W sel, unsigned long long* srad, unsigned long long* grad) {
  using WT = WordTraits<W>;
  if (srad != nullptr || grad != nullptr) {
    unsigned long long s = WT::to_shared(sel);
    if (lane_id() == 0) {
      if (srad != nullptr) {
        const unsigned long long o = atomicMin(srad, s);
        s = o < s ? o : s;
      }
      if (grad != nullptr) {
        const unsigned long long o = atomicMin(grad, s);
        s = o < s ? o : s;
      }
    }
    s = __shfl_sync(kFullMask, s, 0);
    const W fs = WT::from_shared(s);
    sel = wsel(wless(fs, sel), fs, sel);
  }
  return sel;
}

// c ? a : b for elements (words field by field, see wsel).
template <typename T>
__device__ __forceinline__ T esel(bool c, const T& a, const T& b) {
  return c ? a : b;
}
__device__ __forceinline__ W96 esel(bool c, const W96& a, const W96& b) { return wsel(c, a, b); }

// ---- appending a tile's candidates to the per-warp buffer ----------------------
// Element i = v * kVec + j of a lane's tile sits at column
// base + (v * 32 + lane) * kVec + j; bit i of `valid` says it is real. A
// candidate is an element that passes the loader's quick test against the
// radius (a superset: the merge drops the extras). One warp scan gives every
// lane its slots. Once the radius has settled candidates are sparse: if no
// lane has more than E / 4, each lane walks its own few; otherwise all E
// slots are written predicated. If the buffer would overflow, it is filled,
// flushed (the sink's flush_now: sort, merge, new radius), and the rest of the
// tile is filtered again against the new radius.
template <class L, int E, int kVec, int kCap, class S>
__device__ __forceinline__ void buffered_tile(S& s, const typename L::Elem (&e)[E], std::int64_t base,
                                              unsigned valid) {
  unsigned pm = 0;
  GKNN_UNROLL
  for (int i = 0; i < E; ++i) pm |= unsigned(((valid >> i) & 1u) && s.qk.pass(e[i])) << i;
  if (!__any_sync(kFullMask, pm != 0)) return;
  const int lane = lane_id();
  while (true) {
    const int c = __popc(pm);
    int incl = c;
    GKNN_UNROLL
    for (int d = 1; d < kWarpSize; d <<= 1) {
      const int y = __shfl_up_sync(kFullMask, incl, d);
      if (lane >= d) incl += y;
    }
    const int total = __shfl_sync(kFullMask, incl, kWarpSize - 1);
    int pos = s.count + incl - c;
    if constexpr (E >= 8) {
      // Sparse (the usual case once the radius has settled): each lane walks
      // its own few candidates instead of predicating all E slots.
      if (s.count + total <= kCap && __reduce_max_sync(kFullMask, unsigned(c)) <= unsigned(E / 4)) {
        unsigned bits = pm;
        while (bits != 0) {
          const int i = __ffs(bits) - 1;
          bits &= bits - 1;
          typename L::Elem x = e[0];
          GKNN_UNROLL
          for (int t = 1; t < E; ++t) x = esel(i == t, e[t], x);
          const std::uint32_t col = std::uint32_t(base + ((i / kVec) * kWarpSize + lane) * kVec + (i % kVec));
          s.buf[pos++] = L::make(x, col, s.flip);
        }
        s.count += total;
        return;
      }
    }
    GKNN_UNROLL
    for (int i = 0; i < E; ++i) {
      if ((pm >> i) & 1u) {
        if (pos < kCap) {
          const int v = i / kVec, j = i % kVec;
          const std::uint32_t col = std::uint32_t(base + (v * kWarpSize + lane) * kVec + j);
          s.buf[pos] = L::make(e[i], col, s.flip);
          pm &= ~(1u << i);
        }
        ++pos;
      }
    }
    if (s.count + total <= kCap) {
      s.count += total;
      return;
    }
    s.count = kCap;
    s.flush_now();
    GKNN_UNROLL
    for (int i = 0; i < E; ++i)
      if (((pm >> i) & 1u) && !s.qk.pass(e[i])) pm &= ~(1u << i);
    if (!__any_sync(kFullMask, pm != 0)) return;
  }
}

// ---- SmemSelect: the queue as a sorted array in shared memory ------------------
// Networks on an array A of 32 R words seen as R registers of 32 lanes
// (register r = A[32 r .. 32 r + 31], element 32 r + lane in that lane).
// Every step is a loop; a __syncwarp separates steps that cross lanes.
template <typename W>
__device__ __forceinline__ void reg_sort32(W& v) {  // sort-odd on one register
  GKNN_UNROLL
  for (int s = 2; s <= kWarpSize; s <<= 1) {
    WarpNet<W>::butterfly_rev(v, s);
    GKNN_UNROLL
    for (int j = s / 4; j >= 1; j >>= 1) WarpNet<W>::butterfly(v, j);
  }
}
template <typename W>
__device__ __forceinline__ void reg_merge32(W& v) {  // half-cleaners 16 .. 1
  GKNN_UNROLL
  for (int j = kWarpSize / 2; j >= 1; j >>= 1) WarpNet<W>::butterfly(v, j);
}
template <typename W>
__device__ __forceinline__ void smem_cs(W* a, int i1, int i2) {
  const W x = a[i1], y = a[i2];
  if (wless(y, x)) {
    a[i1] = y;
    a[i2] = x;
  }
}
// Half-cleaner with a stride of jr registers, in place.
template <typename W>
__device__ __forceinline__ void smem_stage(W* a, int R, int jr) {
  const int lane = lane_id();
  for (int p = 0; p < R / 2; ++p) {
    const int r = (p / jr) * 2 * jr + (p % jr);
    smem_cs(a, r * kWarpSize + lane, (r + jr) * kWarpSize + lane);
  }
  __syncwarp();
}
// The inverted first stage of merging the two sorted halves of every block of
// m registers: element i of a block against element 32 m - 1 - i.
template <typename W>
__device__ __forceinline__ void smem_reverse_stage(W* a, int R, int m) {
  const int lane = lane_id();
  for (int p = 0; p < R / 2; ++p) {
    const int b = (p / (m / 2)) * m, r = p % (m / 2);
    smem_cs(a, (b + r) * kWarpSize + lane, (b + m - 1 - r) * kWarpSize + (kWarpSize - 1 - lane));
  }
  __syncwarp();
}
template <typename W>
__device__ __forceinline__ void smem_low_stages(W* a, int R) {  // strides 16 .. 1 in registers
  const int lane = lane_id();
  for (int r = 0; r < R; ++r) {
    W v = a[r * kWarpSize + lane];
    reg_merge32(v);
    a[r * kWarpSize + lane] = v;
  }
  __syncwarp();
}
// Sort R registers (R a power of two) ascending.
template <typename W>
__device__ __forceinline__ void smem_sort(W* a, int R) {
  const int lane = lane_id();
  for (int r = 0; r < R; ++r) {
    W v = a[r * kWarpSize + lane];
    reg_sort32(v);
    a[r * kWarpSize + lane] = v;
  }
  __syncwarp();
  for (int m = 2; m <= R; m <<= 1) {
    smem_reverse_stage(a, R, m);
    for (int jr = m / 4; jr >= 1; jr >>= 1) smem_stage(a, R, jr);
    smem_low_stages(a, R);
  }
}
// Sort a bitonic sequence of R registers (what an inverted first stage leaves).
template <typename W>
__device__ __forceinline__ void smem_merge(W* a, int R) {
  for (int jr = R / 2; jr >= 1; jr >>= 1) smem_stage(a, R, jr);
  smem_low_stages(a, R);
}

template <class L, int K, int kCap>
struct SmemSelect {
  using W = typename L::Word;
  using WT = WordTraits<W>;
  using Bits = typename L::Bits;
  using Elem = typename L::Elem;
  static constexpr int NW = K / kWarpSize;
  static_assert(K % kWarpSize == 0 && kCap % kWarpSize == 0 && (kCap & (kCap - 1)) == 0, "sizes");

  W* q;    // K words, sorted ascending
  W* buf;  // kCap candidate words
  int count;
  int kk;
  W radius;
  Bits rkey;
  Bits flip;
  typename L::Quick qk;
  unsigned long long* srad;
  unsigned long long* grad;

  __device__ __forceinline__ void init(W* buffer, W* queue, int want, Bits fl, unsigned long long* sr,
                                       unsigned long long* gr) {
    buf = buffer;
    q = queue;
    count = 0;
    kk = want;
    radius = WT::sentinel();
    rkey = WT::key(radius);
    flip = fl;
    qk = L::quick(rkey, flip);
    srad = sr;
    grad = gr;
    for (int i = lane_id(); i < K; i += kWarpSize) q[i] = WT::sentinel();
    __syncwarp();
  }

  __device__ __forceinline__ void refresh_radius() {
    __syncwarp();
    radius = share_radius(q[kk - 1], srad, grad);
    rkey = WT::key(radius);
    qk = L::quick(rkey, flip);
  }

  // Sort the buffer (padded to a power of two) and merge it into the queue.
  __device__ __forceinline__ void flush_now() {
    const int lane = lane_id();
    int n2 = kWarpSize;
    while (n2 < count) n2 <<= 1;
    __syncwarp();
    for (int i = count + lane; i < n2; i += kWarpSize) buf[i] = WT::sentinel();
    __syncwarp();
    smem_sort(buf, n2 / kWarpSize);
    const int m = n2 < K ? n2 : K;
    for (int i = lane; i < m; i += kWarpSize) {
      const W a = q[K - 1 - i], b = buf[i];
      if (wless(b, a)) q[K - 1 - i] = b;
    }
    __syncwarp();
    smem_merge(q, NW);
    count = 0;
    refresh_radius();
  }
  __device__ __forceinline__ void flush() {
    if (count > 0) flush_now();
  }

  template <int E, int kVec>
  __device__ __forceinline__ void tile(const Elem (&e)[E], std::int64_t base, unsigned valid) {
    buffered_tile<L, E, kVec, kCap>(*this, e, base, valid);
  }

  // Merge another warp's sorted queue (K words in shared memory).
  __device__ __forceinline__ void merge_sorted_from(const W* other) {
    __syncwarp();
    for (int i = lane_id(); i < K; i += kWarpSize) {
      const W a = q[K - 1 - i], b = other[i];
      if (wless(b, a)) q[K - 1 - i] = b;
    }
    __syncwarp();
    smem_merge(q, NW);
  }

  // Word r * 32 + lane of the queue (for the output).
  __device__ __forceinline__ W get(int r) const { return q[r * kWarpSize + lane_id()]; }
};

// ---- WarpSelect: the paper's lane-stride register queue -----------------------
template <class L, int K, int NB, bool kSmemQ>
struct WarpSelect {
  using W = typename L::Word;
  using WT = WordTraits<W>;
  using Bits = typename L::Bits;
  using Elem = typename L::Elem;
  using Net = WarpNet<W>;
  static constexpr int NW = K / kWarpSize;
  static constexpr int kCap = kWarpSize * NB;
  static_assert(K % kWarpSize == 0 && NB >= 2, "bucket");

  W q[kSmemQ ? 1 : NW];  // the warp queue, in registers
  W* qbase;              // the warp queue in shared memory (kSmemQ): K words
  W* buf;                // candidate buffer: kCap words of shared memory
  int count;             // words in buf (warp-uniform)
  int kk;                // results wanted (<= K)
  W radius;              // the kk-th smallest word so far (sentinel until known)
  Bits rkey;             // its key bits
  Bits flip;
  typename L::Quick qk;      // the fast-path test against the radius
  unsigned long long* srad;  // radius shared by the warps of a block (or null)
  unsigned long long* grad;  // radius shared by the blocks of a row (or null)

  __device__ __forceinline__ decltype(auto) queue() {
    if constexpr (kSmemQ) {
      return SmemArr<W>{qbase + lane_id()};
    } else {
      return (q);
    }
  }

  __device__ __forceinline__ void init(W* buffer, W* qshared, int want, Bits fl, unsigned long long* sr,
                                       unsigned long long* gr) {
    buf = buffer;
    qbase = qshared;
    count = 0;
    kk = want;
    radius = WT::sentinel();
    rkey = WT::key(radius);
    flip = fl;
    qk = L::quick(rkey, flip);
    srad = sr;
    grad = gr;
    if constexpr (kSmemQ) {
      GKNN_UNROLL
      for (int r = 0; r < NW; ++r) qbase[r * kWarpSize + lane_id()] = WT::sentinel();
      __syncwarp();
    } else {
      GKNN_UNROLL
      for (int r = 0; r < NW; ++r) q[r] = WT::sentinel();
    }
  }

  __device__ __forceinline__ void refresh_radius() {
    W sel;
    if constexpr (kSmemQ) {
      __syncwarp();
      sel = qbase[kk - 1];
    } else {
      const int kr = (kk - 1) >> 5;
      sel = q[0];
      GKNN_UNROLL
      for (int r = 1; r < NW; ++r) sel = wsel(r == kr, q[r], sel);
      sel = shfl_w(sel, (kk - 1) & (kWarpSize - 1));
    }
    sel = share_radius(sel, srad, grad);
    radius = sel;
    rkey = WT::key(sel);
    qk = L::quick(rkey, flip);
  }

  // Sort the candidate buffer and merge it into the queue. (Inlined: the
  // queue must stay in registers; callers keep to one call site each.)
  __device__ __forceinline__ void flush_now() {
    __syncwarp();
    W c[NB];
    GKNN_UNROLL
    for (int r = 0; r < NB; ++r) {
      const int i = r * kWarpSize + lane_id();
      c[r] = WT::sentinel();
      if (i < count) c[r] = buf[i];
    }
    __syncwarp();
    sort_odd<Net, 0, NB>(c);
    auto&& qa = queue();
    merge_into<Net, NW, NB>(qa, c);
    count = 0;
    refresh_radius();
  }
  __device__ __forceinline__ void flush() {
    if (count > 0) flush_now();
  }

  template <int E, int kVec>
  __device__ __forceinline__ void tile(const Elem (&e)[E], std::int64_t base, unsigned valid) {
    buffered_tile<L, E, kVec, kCap>(*this, e, base, valid);
  }

  // Merge another warp's sorted queue (K words, lane-stride, in shared memory).
  __device__ __forceinline__ void merge_sorted_from(const W* other) {
    auto&& qa = queue();
    GKNN_UNROLL
    for (int r = 0; r < NW; ++r) {
      const W x = other[r * kWarpSize + (kWarpSize - 1 - lane_id())];
      auto&& t = qa[NW - 1 - r];
      const W y = t;
      t = wsel(wless(x, y), x, y);
    }
    merge_continue<Net, 0, NW, true>(qa);
  }

  __device__ __forceinline__ W get(int r) {
    auto&& qa = queue();
    return W(qa[r]);
  }
};

// The paper's own candidate stage, for comparison: per-lane thread queues of
// T registers (Algorithm 3 with the Faiss code's radius test: a word enters
// its lane's queue when it is below the radius). When any lane's queue is
// full (warp vote), the 32 queues are read as one lane-stride array of T
// registers, sorted with sort-odd (T = 3 is an odd size) and merged into the
// warp queue; the thread queues start again empty.
template <class L, int K, int T, bool kSmemQ>
struct ThreadQueueSelect : WarpSelect<L, K, 2, kSmemQ> {
  using Base = WarpSelect<L, K, 2, kSmemQ>;
  using W = typename Base::W;
  using WT = typename Base::WT;
  using Elem = typename Base::Elem;
  using Net = typename Base::Net;
  static constexpr int NW = Base::NW;

  W tq[T];
  int n;  // this lane's queue length

  __device__ __forceinline__ void init(W* buffer, W* qshared, int want, typename Base::Bits fl,
                                       unsigned long long* sr, unsigned long long* gr) {
    Base::init(buffer, qshared, want, fl, sr, gr);
    GKNN_UNROLL
    for (int r = 0; r < T; ++r) tq[r] = WT::sentinel();
    n = 0;
  }

  __device__ __forceinline__ void flush_now() {
    sort_odd<Net, 0, T>(tq);
    auto&& qa = this->queue();
    merge_into<Net, NW, T>(qa, tq);
    GKNN_UNROLL
    for (int r = 0; r < T; ++r) tq[r] = WT::sentinel();
    n = 0;
    this->refresh_radius();
  }
  __device__ __forceinline__ void flush() {
    if (__any_sync(kFullMask, n > 0)) flush_now();
  }

  template <int E, int kVec>
  __device__ __forceinline__ void tile(const Elem (&e)[E], std::int64_t base, unsigned valid) {
    bool any = false;
    GKNN_UNROLL
    for (int i = 0; i < E; ++i) any |= ((valid >> i) & 1u) && L::ordered(e[i], this->flip) <= this->rkey;
    if (!__any_sync(kFullMask, any)) return;
    int i0 = 0;
    while (i0 < E) {
      int stop = E;  // warp-uniform
      GKNN_UNROLL
      for (int i = 0; i < E; ++i) {
        if (i >= i0 && i < stop) {
          const int v = i / kVec, j = i % kVec;
          const std::uint32_t col = std::uint32_t(base + (v * kWarpSize + lane_id()) * kVec + j);
          const W w = L::make(e[i], col, this->flip);
          const bool pass = ((valid >> i) & 1u) && wless(w, this->radius);
          GKNN_UNROLL
          for (int r = T - 1; r > 0; --r) tq[r] = wsel(pass, tq[r - 1], tq[r]);
          tq[0] = wsel(pass, w, tq[0]);
          n += pass ? 1 : 0;
          if (__any_sync(kFullMask, n == T)) stop = i + 1;
        }
      }
      if (stop == E && !__any_sync(kFullMask, n == T)) break;
      flush_now();
      i0 = stop;
    }
  }
};

// k = 1: a running minimum per lane, then a warp reduction.
template <class L>
struct MinSelect {
  using W = typename L::Word;
  using WT = WordTraits<W>;
  using Bits = typename L::Bits;
  using Elem = typename L::Elem;
  W best;
  Bits flip;

  __device__ __forceinline__ void init(Bits fl) {
    best = WT::sentinel();
    flip = fl;
  }
  template <int E, int kVec>
  __device__ __forceinline__ void tile(const Elem (&e)[E], std::int64_t base, unsigned valid) {
    GKNN_UNROLL
    for (int i = 0; i < E; ++i) {
      const int v = i / kVec, j = i % kVec;
      const std::uint32_t col = std::uint32_t(base + (v * kWarpSize + lane_id()) * kVec + j);
      const W w = L::make(e[i], col, flip);
      best = wsel(((valid >> i) & 1u) && wless(w, best), w, best);
    }
  }
  __device__ __forceinline__ W get(int) const { return best; }
  __device__ __forceinline__ void reduce() {
    GKNN_UNROLL
    for (int m = kWarpSize / 2; m >= 1; m >>= 1) {
      const W o = shfl_xor_w(best, m);
      best = wsel(wless(o, best), o, best);
    }
  }
};

// ---- the scan of one row segment by one of G cooperating warps ----------------
// Columns [c0, c1) of the row at rowp. The 16-byte aligned body is cut into
// tiles of 32 x V 16-byte vectors, dealt round-robin to the G warps; the next
// tile's loads are issued before the current one is examined, and the one
// after is prefetched into L2, so three tiles are in flight per warp. The tail
// after the last full tile and the unaligned head are more (partial,
// scalar-loaded) tiles at the end of the deal, so the sink's tile() has a
// single call site.
template <class L, int V, class Sink>
__device__ __forceinline__ void scan_row(Sink& sink, const typename L::Elem* rowp, std::int64_t c0,
                                         std::int64_t c1, int sub, int G) {
  using Elem = typename L::Elem;
  constexpr int kVec = L::kVec;
  constexpr int E = V * kVec;
  static_assert(E <= 32, "valid mask");
  constexpr std::int64_t TE = std::int64_t(kWarpSize) * E;
  const int lane = lane_id();
  if (c1 <= c0) return;

  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(rowp + c0);
  std::int64_t head = std::int64_t(((16 - (addr & 15)) & 15) / sizeof(Elem));
  std::int64_t nfull;
  if (addr % sizeof(Elem) != 0) {  // misaligned elements: scalar loads only
    head = 0;
    nfull = 0;
  } else {
    if (head > c1 - c0) head = c1 - c0;
    nfull = (c1 - c0 - head) / TE;
  }
  const std::int64_t b0 = c0 + head;
  const std::int64_t b1 = b0 + nfull * TE;  // the tail [b1, c1) is shorter than a tile
  const std::int64_t total = nfull + 1 + (head > 0 ? 1 : 0);
  // Misaligned: the "tail" [b1, c1) is the whole segment, in partial tiles.
  const std::int64_t tail_tiles = (addr % sizeof(Elem) != 0) ? (c1 - c0 + TE - 1) / TE : 1;
  const std::int64_t total_all = total - 1 + tail_tiles;

  const uint4* vp = reinterpret_cast<const uint4*>(rowp + b0);
  std::int64_t t = sub;
  uint4 cur[V];
  if (t < nfull) {
    GKNN_UNROLL
    for (int v = 0; v < V; ++v) cur[v] = ld_stream16(vp + (t * V + v) * kWarpSize + lane);
  }
  for (; t < total_all; t += G) {
    const std::int64_t tn = t + G;
    if (tn + G < nfull) {  // a third tile on its way into L2, at no register cost
      GKNN_UNROLL
      for (int v = 0; v < V; ++v) prefetch_l2(vp + ((tn + G) * V + v) * kWarpSize + lane);
    }
    uint4 nxt[V];
    if (tn < nfull) {
      GKNN_UNROLL
      for (int v = 0; v < V; ++v) nxt[v] = ld_stream16(vp + (tn * V + v) * kWarpSize + lane);
    }
    Elem e[E];
    unsigned valid;
    std::int64_t base;
    if (t < nfull) {
      std::memcpy(e, cur, sizeof(e));
      valid = E == 32 ? ~0u : ((1u << E) - 1u);
      base = b0 + t * TE;
    } else {
      std::int64_t cb, ce;
      if (t < nfull + tail_tiles) {
        cb = b1 + (t - nfull) * TE;
        ce = c1;
      } else {
        cb = c0;
        ce = b0;
      }
      base = cb;
      valid = 0;
      GKNN_UNROLL
      for (int i = 0; i < E; ++i) {
        const int v = i / kVec, j = i % kVec;
        const std::int64_t c = cb + (v * kWarpSize + lane) * kVec + j;
        e[i] = Elem{};
        if (c < ce) {
          e[i] = ld_elem(rowp + c);
          valid |= 1u << i;
        }
      }
    }
    sink.template tile<E, kVec>(e, base, valid);
    GKNN_UNROLL
    for (int v = 0; v < V; ++v) cur[v] = nxt[v];
  }
}

}  // namespace gknn::rowsel
