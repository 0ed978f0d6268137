// Bitonic top-k (Shanbhag, Pirk, Madden, SIGMOD'18) over packed
// (key, payload) words, smallest first (key_order.cuh maps every order onto
// that).
//
// Operators, all on a block's tile in shared memory:
//   local sort  sorted runs of length K, alternating ascending/descending;
//   merge       elementwise min of each run with its neighbour: the K smallest
//               of the 2K, as one bitonic sequence, in half the space;
//   rebuild     the last phase of the sort: bitonic runs back to sorted ones.
// A reducer kernel loads a tile of E = NT * ITEMS words, runs local sort (raw
// input) or starts from sorted runs (a previous reducer's output), merges and
// rebuilds R times and writes E / R words: SortReducer and BitonicReducer of
// the paper. The last kernel (FINAL) runs one block that merges down to K
// words, sorts them ascending and writes the first k, decoded.
//
// The paper's shared-memory optimisations: 16 words per thread; the first
// runs sorted in registers before the tile is touched again; combined steps
// (up to four strides per pass through shared memory, in registers);
// padding of one word per 128 bytes against bank conflicts; and partition
// reassignment (after a merge halves the tile, fewer threads each still
// combine four steps). Chunk permutation where padding leaves conflicts:
// the merge of short runs (merge_rows). Measured with ncu
// (bench/kernels/ncu-layouts.sh): padded combined steps are conflict-free.
//
// The input goes through a Loader functor, the paper's fusion hook: it maps
// an input position to a word, or to the sentinel (all ones, never selected
// ahead of a real word) when the position is past the end or a filter
// rejects the row; a ranking function computes the key right there.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "gknn/error.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/key_order.cuh"

namespace gknn::select {

// Compare-exchange: afterwards a <= b when `ascending`, else a >= b.
template <typename Word>
__device__ __forceinline__ void compare_exchange(Word& a, Word& b, bool ascending) {
  if ((b < a) == ascending) {
    Word t = a;
    a = b;
    b = t;
  }
}

template <typename Word>
__device__ __forceinline__ Word word_min(const Word& a, const Word& b) {
  return b < a ? b : a;
}

// ---- shared-memory layout ----------------------------------------------------
// Padding (the paper's [n/32][33]): one dead word after every 128 bytes, so
// the strided accesses of the combined steps (thread t touching words
// t * 2^C + j) fall into different banks. Plain: no padding, for callers
// that sort a small array of their own (SampleSelect, the kNN re-rank).
template <typename Word>
struct Padded {
  static constexpr int kShift = sizeof(Word) <= 8 ? 4 : 3;  // 128 bytes of words
  __device__ __forceinline__ static int at(int i) { return i + (i >> kShift); }
  static constexpr int words(int n) { return n + (n >> kShift); }
};
struct Plain {
  __device__ __forceinline__ static int at(int i) { return i; }
  static constexpr int words(int n) { return n; }
};
// Chunk permutation done in the addresses (an XOR swizzle): the word at
// column c of 128-byte row r is stored at column c ^ (r mod columns). A
// thread's run (one row) or a strided step (one column over consecutive
// rows) then spreads over every bank, as padding does, with no dead words.
template <typename Word>
struct Swizzled {
  static constexpr int kShift = sizeof(Word) <= 8 ? 4 : 3;
  static constexpr int kMask = (1 << kShift) - 1;
  __device__ __forceinline__ static int at(int i) { return i ^ ((i >> kShift) & kMask); }
  static constexpr int words(int n) { return n; }
};

// No padding at all: only for the measurement builds, to show what the other
// two layouts remove.
template <typename Word>
struct Unpadded : Plain {};

// The reducers' tile layout. GKNN_TILE_LAYOUT overrides it only in the
// bank-conflict measurement builds (bench/kernels/ncu-layouts.sh).
#ifndef GKNN_TILE_LAYOUT
#define GKNN_TILE_LAYOUT Padded
#endif
template <typename Word>
using TileLayout = GKNN_TILE_LAYOUT<Word>;

// Steps a thread can combine in registers (the paper's combined steps): 16
// words of 8 bytes, 8 of 16 bytes.
template <typename Word>
constexpr int kMaxCombined = sizeof(Word) <= 8 ? 4 : 3;

// Combined steps: the bitonic steps of strides 2^(lo+C-1), ..., 2^lo, in
// registers. A thread owns groups of 2^C words whose indices differ only in
// bits lo .. lo+C-1, so every compare-exchange of those C steps stays inside
// its group: one pass through shared memory and one barrier instead of C.
// Ascending where bit `dir_bit` of (offset + i) is clear (dir_bit = 0: all).
// When fewer groups than threads remain (after merges), the first threads
// take them all, each still combining C steps (the paper's partition
// reassignment).
template <typename Word, int NT, int C, class Layout>
__device__ __forceinline__ void combined_steps(Word* s, int len, int lo, int dir_bit, int64_t offset) {
  constexpr int M = 1 << C;
  const int groups = len >> C;
  for (int g = threadIdx.x; g < groups; g += NT) {
    const int base = ((g >> lo) << (lo + C)) | (g & ((1 << lo) - 1));
    const bool ascending = dir_bit == 0 || ((offset + base) & dir_bit) == 0;  // dir_bit > 2^(lo+C-1)
    Word r[M];
#pragma unroll
    for (int j = 0; j < M; ++j) r[j] = s[Layout::at(base + (j << lo))];
#pragma unroll
    for (int c = C - 1; c >= 0; --c)
#pragma unroll
      for (int j = 0; j < M; ++j)
        if ((j & (1 << c)) == 0) compare_exchange(r[j], r[j | (1 << c)], ascending);
#pragma unroll
    for (int j = 0; j < M; ++j) s[Layout::at(base + (j << lo))] = r[j];
  }
  __syncthreads();
}

// The steps of strides 2^top, ..., 2, 1 (one bitonic merge of runs of
// 2^(top+1)), kMaxCombined at a time, largest strides first.
template <typename Word, int NT, class Layout>
__device__ void bitonic_merge_steps(Word* s, int len, int top, int dir_bit, int64_t offset) {
  constexpr int CM = kMaxCombined<Word>;
  for (int remaining = top + 1; remaining > 0;) {
    const int c = remaining < CM ? remaining : CM;
    remaining -= c;
    if constexpr (CM >= 4) {
      if (c == 4) {
        combined_steps<Word, NT, 4, Layout>(s, len, remaining, dir_bit, offset);
        continue;
      }
    }
    if (c == 3)
      combined_steps<Word, NT, 3, Layout>(s, len, remaining, dir_bit, offset);
    else if (c == 2)
      combined_steps<Word, NT, 2, Layout>(s, len, remaining, dir_bit, offset);
    else
      combined_steps<Word, NT, 1, Layout>(s, len, remaining, dir_bit, offset);
  }
}

// The first runs of a local sort, in registers ("do work before writing"):
// each thread sorts 2^CM consecutive words into runs of min(K, 2^CM),
// alternating direction by run, in one pass through shared memory.
template <typename Word, int K, int NT, class Layout>
__device__ void sort_small_runs(Word* s, int len) {
  constexpr int CM = kMaxCombined<Word>, M = 1 << CM;
  for (int g = threadIdx.x; g < len / M; g += NT) {
    const int base = g * M;
    Word r[M];
#pragma unroll
    for (int j = 0; j < M; ++j) r[j] = s[Layout::at(base + j)];
#pragma unroll
    for (int size = 2; size <= (K < M ? K : M); size <<= 1)
#pragma unroll
      for (int stride = size >> 1; stride > 0; stride >>= 1)
#pragma unroll
        for (int j = 0; j < M; ++j)
          if ((j & stride) == 0) compare_exchange(r[j], r[j | stride], ((base + j) & size) == 0);
#pragma unroll
    for (int j = 0; j < M; ++j) s[Layout::at(base + j)] = r[j];
  }
  __syncthreads();
}

template <int V>
__host__ __device__ constexpr int log2_of() {
  return V <= 1 ? 0 : 1 + log2_of<V / 2>();
}

// Local sort: sorted runs of length K, ascending where (i & K) == 0. `len`
// is a multiple of 2^kMaxCombined (or of K when smaller).
template <typename Word, int K, int NT, class Layout = Plain>
__device__ void local_sort(Word* s, int len) {
  if (K == 1) return;  // runs of one are sorted
  sort_small_runs<Word, K, NT, Layout>(s, len);
  for (int size = 2 << kMaxCombined<Word>; size <= K; size <<= 1)
    bitonic_merge_steps<Word, NT, Layout>(s, len, (31 - __clz(size)) - 1, size, 0);
}

// Rebuild: bitonic runs of length K into sorted runs, direction by bit K of
// (offset + i), or all ascending when `ascending` is set.
template <typename Word, int K, int NT, class Layout>
__device__ void rebuild(Word* s, int len, int64_t offset, bool ascending) {
  if (K > 1) bitonic_merge_steps<Word, NT, Layout>(s, len, log2_of<K>() - 1, ascending ? 0 : K, offset);
}

// Merge of runs of 8 (a run pair is one 128-byte row), with the paper's
// chunk permutation: a thread takes a whole padded row (R = 2^kShift input
// words, R/2 outputs) instead of every NT-th output. Lane t then starts at
// column t mod 16 of its row, so a warp's reads hit distinct banks, where the
// plain mapping (lanes on consecutive outputs, i.e. on runs 2K apart, padded
// rows 17 words apart) overlaps 2-4 ways (measured with ncu: 20-27 % of the
// shared-memory wavefronts of the K <= 8 reducers were conflicts; with rows,
// 1-8 %: bench/results/bitonic-layouts-H200-2026-11-21.md).
template <typename Word, int K, int NT>
__device__ void merge_rows(Word* s, int len) {
  using L = Padded<Word>;
  constexpr int R = 1 << L::kShift, X = R / 2;
  Word kept[X];
  const int t = threadIdx.x;
  const bool active = t < len / R;  // len <= 16 * NT words: one row per thread at most
  if (active) {
#pragma unroll
    for (int j = 0; j < X; ++j) {
      const int p = t * X + j, i = 2 * p - (p & (K - 1));
      kept[j] = word_min(s[L::at(i)], s[L::at(i + K)]);
    }
  }
  __syncthreads();
  if (active) {
#pragma unroll
    for (int j = 0; j < X; ++j) s[L::at(t * X + j)] = kept[j];
  }
  __syncthreads();
}

// Merge: s[0, len) of sorted K-runs -> s[0, len/2) of bitonic K-runs, each
// the K smallest of a run pair. MAX_PER_THREAD bounds len / 2 / NT.
template <typename Word, int K, int NT, int MAX_PER_THREAD, class Layout>
__device__ void merge(Word* s, int len) {
  // K = 8 with 8-byte words only (a run pair is one row): measured faster
  // there; for K = 1 ... 4 the conflicts go too, but the kernels got slower.
  if constexpr (std::is_same_v<Layout, Padded<Word>> && sizeof(Word) <= 8 && 2 * K == 16) {
    // Only while at least half the threads get a row (a smaller tile leaves
    // too few threads to hide the latency).
    if (len / (1 << Padded<Word>::kShift) >= NT / 2) return merge_rows<Word, K, NT>(s, len);
  }
  Word kept[MAX_PER_THREAD];
#pragma unroll
  for (int q = 0; q < MAX_PER_THREAD; ++q) {
    int p = threadIdx.x + q * NT;
    if (p < len / 2) {
      int i = 2 * p - (p & (K - 1));
      kept[q] = word_min(s[Layout::at(i)], s[Layout::at(i + K)]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int q = 0; q < MAX_PER_THREAD; ++q) {
    int p = threadIdx.x + q * NT;
    if (p < len / 2) s[Layout::at(p)] = kept[q];
  }
  __syncthreads();
}

// Loads words from an array; positions past n are sentinels.
template <typename Word>
struct WordLoader {
  const Word* in;
  int64_t n;
  __device__ __forceinline__ Word operator()(int64_t i) const { return i < n ? in[i] : max_word<Word>(); }
};

// Raw keys (and optional payloads) packed on the fly: the plain top-k input.
template <typename Key, typename Payload>
struct ArrayLoader {
  using P = Packing<Key, Payload>;
  using Word = typename P::Word;
  const Key* keys;
  const Payload* payloads;  // null: the index
  int64_t n;
  bool largest;
  __device__ __forceinline__ Word operator()(int64_t i) const {
    if (i >= n) return max_word<Word>();
    return P::pack(keys[i], payloads ? payloads[i] : static_cast<Payload>(i), largest);
  }
};

// Four consecutive words from position i (a multiple of 4): scalar loads for
// any loader; ArrayLoader overloads it with one 16-byte load.
template <typename Loader, typename Word>
__device__ __forceinline__ void load_group(const Loader& load, int64_t i, Word (&w)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = load(i + j);
}

// The raw 4-byte keys at positions i .. i+3 with one 16-byte load, where the
// array allows it (4-byte keys, no payload array, aligned, not the tail).
template <typename Key, typename Payload>
__device__ __forceinline__ bool load_keys4(const ArrayLoader<Key, Payload>& load, int64_t i, Key (&keys)[4]) {
  if constexpr (sizeof(Key) == 4) {
    if (load.payloads == nullptr && i + 3 < load.n && (reinterpret_cast<uintptr_t>(load.keys) & 15) == 0) {
      const uint4 v = *reinterpret_cast<const uint4*>(load.keys + i);
      keys[0] = bit_cast<Key>(v.x);
      keys[1] = bit_cast<Key>(v.y);
      keys[2] = bit_cast<Key>(v.z);
      keys[3] = bit_cast<Key>(v.w);
      return true;
    }
  }
  return false;
}

template <typename Key, typename Payload>
__device__ __forceinline__ void load_group(const ArrayLoader<Key, Payload>& load, int64_t i,
                                           typename ArrayLoader<Key, Payload>::Word (&w)[4]) {
  using P = typename ArrayLoader<Key, Payload>::P;
  Key keys[4];
  if (load_keys4(load, i, keys)) {
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = P::pack(keys[j], static_cast<Payload>(i + j), load.largest);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = load(i + j);
}

// Tile shape for run length K: E = NT * ITEMS words per block, reduced by R.
template <int K>
struct BitonicShape {
  static constexpr int kItems = 16;  // elements per thread (the paper's B)
  static constexpr int kThreads = K <= 256 ? 256 : 512;
  static constexpr int kTile = kThreads * kItems;
  static constexpr int kReduce = kTile / K >= 16 ? 16 : kTile / K;  // keep >= one run per block
  static_assert(kTile >= 2 * K, "a tile must hold a run pair");
};

// Merges and rebuilds a tile of sorted K-runs: down to K words, ascending, of
// which the first `take` go to out (FINAL); or R times, leaving E / R words of
// alternating runs (direction by bit K of out_base + i) at out + out_base.
template <typename Word, int K, bool FINAL>
__device__ __forceinline__ void reduce_tile(Word* s, Word* out, int64_t out_base, int64_t take) {
  using Shape = BitonicShape<K>;
  using L = TileLayout<Word>;
  constexpr int NT = Shape::kThreads, E = Shape::kTile, R = Shape::kReduce;
  int len = E;
  if (FINAL) {
    while (len > K) {
      merge<Word, K, NT, Shape::kItems / 2, L>(s, len);
      len >>= 1;
      rebuild<Word, K, NT, L>(s, len, 0, len == K);
    }
    for (int i = threadIdx.x; i < take; i += NT) out[i] = s[L::at(i)];
  } else {
    for (int r = R; r > 1; r >>= 1) {
      merge<Word, K, NT, Shape::kItems / 2, L>(s, len);
      len >>= 1;
      rebuild<Word, K, NT, L>(s, len, out_base, false);
    }
    for (int i = threadIdx.x; i < E / R; i += NT) out[out_base + i] = s[L::at(i)];
  }
}

template <typename Word, int K>
constexpr int tile_smem_bytes() {
  return TileLayout<Word>::words(BitonicShape<K>::kTile) * int(sizeof(Word));
}

// SortReducer (SORT_INPUT) / BitonicReducer, or the FINAL kernel that leaves
// a tile's K smallest ascending and writes the first `take`. Each block
// reduces the tile of E positions at blockIdx.x * E.
template <typename Word, int K, bool SORT_INPUT, bool FINAL, typename Loader>
__global__ void __launch_bounds__(BitonicShape<K>::kThreads)
    bitonic_reducer(Loader load, Word* out, int64_t take) {
  using Shape = BitonicShape<K>;
  using L = TileLayout<Word>;
  constexpr int NT = Shape::kThreads, E = Shape::kTile, R = Shape::kReduce;
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  const int64_t base = int64_t(blockIdx.x) * E;
#pragma unroll 4
  for (int j = 0; j < Shape::kItems; ++j) {
    int idx = j * NT + threadIdx.x;
    s[L::at(idx)] = load(base + idx);
  }
  __syncthreads();
  if (SORT_INPUT) local_sort<Word, K, NT, L>(s, E);
  // FINAL with several blocks: one tile per segment (bitonic_topk_segments),
  // each segment's `take` words at out + blockIdx.x * take.
  reduce_tile<Word, K, FINAL>(s, FINAL ? out + int64_t(blockIdx.x) * take : out,
                              int64_t(blockIdx.x) * (E / R), take);
}

// FusedSortReducer (the paper's buffer filler, SIGMOD'18 §5): the loader
// rejects a row by returning the sentinel. A block reads NT positions at a
// time, compacts the kept words into its tile with one block-wide prefix
// count, and repeats until more than 15/16 of the tile is full (or the input
// ends); only then does it sort and reduce the tile, so a selective filter
// shrinks the sorting work instead of sorting sentinels. Blocks are
// persistent: they take the input in slabs of E positions from cursors[0]
// and append E / R words per tile at cursors[1], which afterwards holds the
// number of words written (sorted K-runs, alternating, for a BitonicReducer).
template <typename Word, int K, typename Loader>
__global__ void __launch_bounds__(BitonicShape<K>::kThreads)
    fused_sort_reducer(Loader load, int64_t n, Word* out, unsigned long long* cursors) {
  using Shape = BitonicShape<K>;
  using L = TileLayout<Word>;
  constexpr int NT = Shape::kThreads, E = Shape::kTile, R = Shape::kReduce, NW = NT / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  __shared__ unsigned long long slab;
  __shared__ int warp_kept[NW];
  const Word none = max_word<Word>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int64_t pos = 0, end = 0;  // the block's current slab, the same in every thread
  for (;;) {
    int fill = 0;
    while (fill <= E - NT) {
      if (pos >= end) {
        if (threadIdx.x == 0) slab = atomicAdd(&cursors[0], static_cast<unsigned long long>(E));
        __syncthreads();
        pos = static_cast<int64_t>(slab);
        end = pos + E < n ? pos + E : n;
        if (pos >= n) break;
      }
      const int64_t i = pos + threadIdx.x;
      const Word w = i < end ? load(i) : none;
      const bool keep = !(w == none);
      const unsigned mask = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) warp_kept[warp] = __popc(mask);
      __syncthreads();
      int before = 0, total = 0;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        before += v < warp ? warp_kept[v] : 0;
        total += warp_kept[v];
      }
      if (keep) s[L::at(fill + before + __popc(mask & ((1u << lane) - 1u)))] = w;
      fill += total;
      pos += NT;
      __syncthreads();  // warp_kept and slab are rewritten next round
    }
    if (fill == 0) return;
    for (int i = fill + threadIdx.x; i < E; i += NT) s[L::at(i)] = none;
    __syncthreads();
    local_sort<Word, K, NT, L>(s, E);
    if (threadIdx.x == 0) slab = atomicAdd(&cursors[1], static_cast<unsigned long long>(E / R));
    __syncthreads();
    const int64_t out_base = static_cast<int64_t>(slab);
    __syncthreads();
    reduce_tile<Word, K, false>(s, out, out_base, 0);
    __syncthreads();
  }
}

template <typename Word, int K, bool SORT_INPUT, bool FINAL, typename Loader>
void launch_reducer(Loader load, int64_t blocks, Word* out, int64_t take, cudaStream_t stream) {
  using Shape = BitonicShape<K>;
  auto kernel = bitonic_reducer<Word, K, SORT_INPUT, FINAL, Loader>;
  const int smem = tile_smem_bytes<Word, K>();
  GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<static_cast<unsigned>(blocks), Shape::kThreads, smem, stream>>>(load, out, take);
  GKNN_CUDA(cudaGetLastError());
}

// The whole pipeline for one run length K: reducers until one tile remains,
// then FINAL. `scratch` holds at least scratch_words<K>(n) words.
template <int K>
int64_t scratch_words(int64_t n) {
  using Shape = BitonicShape<K>;
  if (n <= Shape::kTile) return 0;
  int64_t a = (n + Shape::kTile - 1) / Shape::kTile * (Shape::kTile / Shape::kReduce);
  int64_t b = (a + Shape::kTile - 1) / Shape::kTile * (Shape::kTile / Shape::kReduce);
  return a + b;
}

template <typename Word, int K, bool SORT_INPUT, typename Loader>
void bitonic_pipeline(Loader load, int64_t n, int64_t take, Word* out, Word* scratch, cudaStream_t stream) {
  using Shape = BitonicShape<K>;
  constexpr int64_t E = Shape::kTile, OUT = Shape::kTile / Shape::kReduce;
  if (n <= E) {
    launch_reducer<Word, K, SORT_INPUT, true>(load, 1, out, take, stream);
    return;
  }
  int64_t blocks = (n + E - 1) / E;
  Word* cur = scratch;
  Word* next = scratch + blocks * OUT;
  launch_reducer<Word, K, SORT_INPUT, false>(load, blocks, cur, 0, stream);
  int64_t ncur = blocks * OUT;
  while (ncur > E) {
    blocks = (ncur + E - 1) / E;
    launch_reducer<Word, K, false, false>(WordLoader<Word>{cur, ncur}, blocks, next, 0, stream);
    ncur = blocks * OUT;
    Word* t = cur;
    cur = next;
    next = t;
  }
  launch_reducer<Word, K, false, true>(WordLoader<Word>{cur, ncur}, 1, out, take, stream);
}

// Dispatch on K = the next power of two >= k (k <= kMaxBitonicK). The
// smallest `take` = min(k, n) words land in out[0, take), ascending.
template <typename Fn>
void with_run_length(int64_t k, Fn&& fn) {
  int64_t K = 1;
  while (K < k) K <<= 1;
  switch (K) {
#define GKNN_K(v)                         \
  case v:                                 \
    fn(std::integral_constant<int, v>{}); \
    return;
    GKNN_K(1)
    GKNN_K(2)
    GKNN_K(4) GKNN_K(8) GKNN_K(16) GKNN_K(32) GKNN_K(64) GKNN_K(128) GKNN_K(256) GKNN_K(512) GKNN_K(1024)
#undef GKNN_K
  }
  throw Error(ErrorCode::InvalidArgument, "bitonic top-k: k above 1024");
}

inline int64_t bitonic_scratch_words(int64_t n, int64_t k) {
  int64_t words = 0;
  with_run_length(k, [&](auto kc) { words = scratch_words<decltype(kc)::value>(n); });
  return words;
}

template <typename Word, bool SORT_INPUT, typename Loader>
void bitonic_topk(Loader load, int64_t n, int64_t k, Word* out, Word* scratch, cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  with_run_length(k, [&](auto kc) {
    bitonic_pipeline<Word, decltype(kc)::value, SORT_INPUT>(load, n, take, out, scratch, stream);
  });
}

// Top-k of several word arrays at once (GpuTopK's programs ranked together):
// `segments` arrays of n words, segment s at in + s * n. The loader puts each
// segment at a tile boundary, rounded up to an even number of tiles
// (sentinels between), so no tile mixes two segments and each segment's
// output starts at a multiple of 2K: its runs alternate as the next level
// expects of a tile of its own. The FINAL level runs one block per segment.
template <typename Word>
struct SegmentLoader {
  const Word* in;
  int64_t n, pad;
  __device__ __forceinline__ Word operator()(int64_t i) const {
    const int64_t seg = i / pad, off = i - seg * pad;
    return off < n ? in[seg * n + off] : max_word<Word>();
  }
};

template <int K>
int64_t segment_pad(int64_t n) {
  constexpr int64_t E2 = 2 * int64_t(BitonicShape<K>::kTile);
  return (n + E2 - 1) / E2 * E2;
}

// Words of scratch for `segments` segments of n words: a level's output and
// the next one's (later levels reuse them, each smaller than the last).
template <int K>
int64_t segments_scratch_words(int64_t n, int64_t segments) {
  constexpr int64_t E = BitonicShape<K>::kTile, OUT = E / BitonicShape<K>::kReduce;
  if (n <= E) return 0;
  const int64_t a = segment_pad<K>(n) / E * OUT;
  const int64_t b = a > E ? segment_pad<K>(a) / E * OUT : 0;
  return segments * (a + b);
}

template <typename Word, int K>
void bitonic_segments_pipeline(const Word* in, int64_t n, int64_t segments, int64_t take, Word* out,
                               Word* scratch, cudaStream_t stream) {
  constexpr int64_t E = BitonicShape<K>::kTile, OUT = E / BitonicShape<K>::kReduce;
  if (n <= E) {
    launch_reducer<Word, K, true, true>(SegmentLoader<Word>{in, n, E}, segments, out, take, stream);
    return;
  }
  int64_t pad = segment_pad<K>(n);
  int64_t ncur = pad / E * OUT;
  Word* cur = scratch;
  Word* next = scratch + segments * ncur;
  launch_reducer<Word, K, true, false>(SegmentLoader<Word>{in, n, pad}, segments * (pad / E), cur, 0, stream);
  while (ncur > E) {
    pad = segment_pad<K>(ncur);
    launch_reducer<Word, K, false, false>(SegmentLoader<Word>{cur, ncur, pad}, segments * (pad / E), next, 0,
                                          stream);
    ncur = pad / E * OUT;
    Word* t = cur;
    cur = next;
    next = t;
  }
  launch_reducer<Word, K, false, true>(SegmentLoader<Word>{cur, ncur, E}, segments, out, take, stream);
}

inline int64_t bitonic_segments_scratch_words(int64_t n, int64_t segments, int64_t k) {
  int64_t words = 0;
  with_run_length(k, [&](auto kc) { words = segments_scratch_words<decltype(kc)::value>(n, segments); });
  return words;
}

// The smallest take = min(k, n) words of each segment, ascending, at
// out + s * take.
template <typename Word>
void bitonic_topk_segments(const Word* in, int64_t n, int64_t segments, int64_t k, Word* out, Word* scratch,
                           cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  with_run_length(k, [&](auto kc) {
    bitonic_segments_pipeline<Word, decltype(kc)::value>(in, n, segments, take, out, scratch, stream);
  });
}

// Tiles per segment of bitonic_topk_tiles.
inline int64_t bitonic_tiles(int64_t n, int64_t k) {
  int64_t tiles = 0;
  with_run_length(k, [&](auto kc) {
    constexpr int64_t E = BitonicShape<decltype(kc)::value>::kTile;
    tiles = (n + E - 1) / E;
  });
  return tiles;
}

// The take = min(k, n) smallest words of every tile, ascending (sentinels
// where a tile has fewer), for `segments` segments of n words (as
// bitonic_topk_segments): segment s's tile t at out + (s * tiles + t) * take,
// tiles = bitonic_tiles(n, k). The caller merges a segment's tiles: for a
// few tiles, one kernel instead of the pipeline, whose FINAL level (one
// block per segment merging its tiles' runs) took 23 us of a 60,000-row
// ranking on the H200 whatever the number of segments.
template <typename Word>
void bitonic_topk_tiles(const Word* in, int64_t n, int64_t segments, int64_t k, Word* out,
                        cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  const int64_t tiles = bitonic_tiles(n, k);
  with_run_length(k, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    launch_reducer<Word, K, true, true>(SegmentLoader<Word>{in, n, tiles * BitonicShape<K>::kTile},
                                        segments * tiles, out, take, stream);
  });
}

// Bitonic top-k straight from a filtering Loader: the FusedSortReducer,
// then BitonicReducers over the runs it wrote. The smallest `take` words land
// in out[0, take), ascending; if fewer rows are kept than `take`, sentinels
// fill the rest (as the plain pipeline would return them).
template <typename Word, typename Loader>
void bitonic_topk_fused(Loader load, int64_t n, int64_t k, Word* out, cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  if (take == 0) return;
  with_run_length(k, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    using Shape = BitonicShape<K>;
    constexpr int64_t E = Shape::kTile, OUT = Shape::kTile / Shape::kReduce;
    auto kernel = fused_sort_reducer<Word, K, Loader>;
    const int smem = tile_smem_bytes<Word, K>();
    GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int device = 0, sms = 0, per_sm = 0;
    GKNN_CUDA(cudaGetDevice(&device));
    GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Shape::kThreads, smem));
    const int64_t grid =
        std::max<int64_t>(1, std::min<int64_t>(int64_t(sms) * std::max(per_sm, 1), (n + E - 1) / E));
    // Every tile but a block's last is more than 15/16 full.
    const int64_t tiles = n / (E - Shape::kThreads + 1) + grid;
    AsyncBuffer<Word> runs(tiles * OUT, stream);
    AsyncBuffer<unsigned long long> cursors(2, stream);
    GKNN_CUDA(cudaMemsetAsync(cursors.get(), 0, 2 * sizeof(unsigned long long), stream));
    kernel<<<static_cast<unsigned>(grid), Shape::kThreads, smem, stream>>>(load, n, runs.get(),
                                                                           cursors.get());
    GKNN_CUDA(cudaGetLastError());
    unsigned long long written[2] = {0, 0};
    GKNN_CUDA(cudaMemcpyAsync(written, cursors.get(), sizeof(written), cudaMemcpyDeviceToHost, stream));
    GKNN_CUDA(cudaStreamSynchronize(stream));
    const int64_t count = static_cast<int64_t>(written[1]);
    AsyncBuffer<Word> scratch(scratch_words<K>(count), stream);
    bitonic_pipeline<Word, K, false>(WordLoader<Word>{runs.get(), count}, count, take, out, scratch.get(),
                                     stream);
  });
}

}  // namespace gknn::select
