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
// The input goes through a Loader functor, the paper's fusion hook: it maps
// an input position to a word, or to the sentinel (all ones, never selected
// ahead of a real word) when the position is past the end or a filter
// rejects the row; a ranking function computes the key right there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <type_traits>

#include "gknn/error.h"
#include "runtime/cuda_check.h"
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

// One step of a bitonic network over s[0, len): pairs (i, i + stride) inside
// runs of 2*stride, ascending where bit `dir_bit` of (i + offset) is clear
// (dir_bit = 0: all ascending).
template <typename Word, int NT>
__device__ __forceinline__ void bitonic_step(Word* s, int len, int stride, int dir_bit, int64_t offset) {
  for (int p = threadIdx.x; p < len / 2; p += NT) {
    int i = 2 * p - (p & (stride - 1));
    bool ascending = dir_bit == 0 || (((offset + i) & dir_bit) == 0);
    Word a = s[i], b = s[i + stride];
    compare_exchange(a, b, ascending);
    s[i] = a;
    s[i + stride] = b;
  }
  __syncthreads();
}

// Local sort: sorted runs of length K, ascending where (i & K) == 0.
template <typename Word, int K, int NT>
__device__ void local_sort(Word* s, int len) {
  for (int size = 2; size <= K; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) bitonic_step<Word, NT>(s, len, stride, size, 0);
}

// Rebuild: bitonic runs of length K into sorted runs, direction by bit K of
// (offset + i), or all ascending when `ascending` is set.
template <typename Word, int K, int NT>
__device__ void rebuild(Word* s, int len, int64_t offset, bool ascending) {
  for (int stride = K >> 1; stride > 0; stride >>= 1)
    bitonic_step<Word, NT>(s, len, stride, ascending ? 0 : K, offset);
}

// Merge: s[0, len) of sorted K-runs -> s[0, len/2) of bitonic K-runs, each
// the K smallest of a run pair. MAX_PER_THREAD bounds len / 2 / NT.
template <typename Word, int K, int NT, int MAX_PER_THREAD>
__device__ void merge(Word* s, int len) {
  Word kept[MAX_PER_THREAD];
#pragma unroll
  for (int q = 0; q < MAX_PER_THREAD; ++q) {
    int p = threadIdx.x + q * NT;
    if (p < len / 2) {
      int i = 2 * p - (p & (K - 1));
      kept[q] = word_min(s[i], s[i + K]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int q = 0; q < MAX_PER_THREAD; ++q) {
    int p = threadIdx.x + q * NT;
    if (p < len / 2) s[p] = kept[q];
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

template <typename Key, typename Payload>
__device__ __forceinline__ void load_group(const ArrayLoader<Key, Payload>& load, int64_t i,
                                           typename ArrayLoader<Key, Payload>::Word (&w)[4]) {
  using P = typename ArrayLoader<Key, Payload>::P;
  if constexpr (sizeof(Key) == 4) {
    if (load.payloads == nullptr && i + 3 < load.n && (reinterpret_cast<uintptr_t>(load.keys) & 15) == 0) {
      const uint4 v = *reinterpret_cast<const uint4*>(load.keys + i);  // 16-byte load
      const uint32_t lanes[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = P::pack(bit_cast<Key>(lanes[j]), static_cast<Payload>(i + j), load.largest);
      return;
    }
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

// SortReducer (SORT_INPUT) / BitonicReducer, or the single-block FINAL kernel
// that leaves the K smallest ascending and writes the first `take`.
template <typename Word, int K, bool SORT_INPUT, bool FINAL, typename Loader>
__global__ void __launch_bounds__(BitonicShape<K>::kThreads)
    bitonic_reducer(Loader load, Word* out, int64_t take) {
  using Shape = BitonicShape<K>;
  constexpr int NT = Shape::kThreads, E = Shape::kTile, R = Shape::kReduce;
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  const int64_t base = int64_t(blockIdx.x) * E;
#pragma unroll 4
  for (int j = 0; j < Shape::kItems; ++j) {
    int idx = j * NT + threadIdx.x;
    s[idx] = load(base + idx);
  }
  __syncthreads();
  if (SORT_INPUT) local_sort<Word, K, NT>(s, E);
  int len = E;
  if (FINAL) {
    while (len > K) {
      merge<Word, K, NT, Shape::kItems / 2>(s, len);
      len >>= 1;
      rebuild<Word, K, NT>(s, len, 0, len == K);
    }
    for (int i = threadIdx.x; i < take; i += NT) out[i] = s[i];
  } else {
    const int64_t out_base = int64_t(blockIdx.x) * (E / R);
    for (int r = R; r > 1; r >>= 1) {
      merge<Word, K, NT, Shape::kItems / 2>(s, len);
      len >>= 1;
      rebuild<Word, K, NT>(s, len, out_base, false);
    }
    for (int i = threadIdx.x; i < E / R; i += NT) out[out_base + i] = s[i];
  }
}

template <typename Word, int K, bool SORT_INPUT, bool FINAL, typename Loader>
void launch_reducer(Loader load, int64_t blocks, Word* out, int64_t take, cudaStream_t stream) {
  using Shape = BitonicShape<K>;
  auto kernel = bitonic_reducer<Word, K, SORT_INPUT, FINAL, Loader>;
  const int smem = Shape::kTile * int(sizeof(Word));
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
    GKNN_K(2) GKNN_K(4) GKNN_K(8) GKNN_K(16) GKNN_K(32) GKNN_K(64) GKNN_K(128) GKNN_K(256) GKNN_K(512)
        GKNN_K(1024)
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

}  // namespace gknn::select
