// SampleSelect: the k smallest words for any k (see sample_select.cuh for
// the algorithm and why it is distribution-independent).
//
// Memory traffic of one level over m words of W bytes, for a result of k:
// count reads m W and writes m oracle bytes; filter reads the m oracles and
// only the words it keeps (k + m/256 of them), and writes those. Every later
// level works on ~m/256 words. The final sort of the k kept words is the
// only super-linear part; it dominates when k is a large share of n.
//
// Measured on an H200 (n = 2^29 uint64 words, k = 2048): the count pass is
// ~1.9 ms against a 1.0 ms one-read floor: it is bound by instruction issue
// (8 descent steps of ~7 instructions per word), not by memory; the filter
// pass ~0.65 ms, the rest (sampling, a second level, host waits, the base
// sort) ~0.3 ms.
#include "select/sample_select.cuh"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gknn/error.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/bitonic_topk.cuh"  // local_sort, the block-wide bitonic sort

namespace gknn::select {
namespace {

using namespace sample_select_detail;

template <typename T>
using AsyncPtr = std::unique_ptr<AsyncBuffer<T>>;
template <typename T>
AsyncPtr<T> async_alloc(std::size_t count, cudaStream_t s) {
  return std::make_unique<AsyncBuffer<T>>(count, s);
}

// Count and filter split the words into tiles of kTile and deal them out
// round-robin: block b owns tiles b, b + G, b + 2G, ... (G blocks, one wave),
// so a contiguous run of interesting words (a sorted input's low bucket) is
// spread over all blocks, and both kernels see the same tiles per block.
constexpr int kThreads = 256;  // count and filter blocks (one thread per bucket in the epilogue)
constexpr int kTile = 4096;
constexpr int kFilterItems = kTile / kThreads;  // 16 oracles (one 16-byte load) per thread and tile
constexpr int kFilterTiles = 4;     // tiles a filter block handles per step (hides the latency chain)
constexpr int kSortThreads = 1024;  // the sample block
static_assert(kThreads == kBuckets, "the count epilogue scans one bucket per thread");

// Count: each thread loads 4 x 16 bytes per round (8 uint64 / 4 U128 words).
template <typename Word>
struct CountShape {
  static constexpr int kVecs = 4;
  static constexpr int kPerVec = 16 / int(sizeof(Word));
  static constexpr int kItems = kVecs * kPerVec;
  static constexpr int kRound = kThreads * kItems;
  static_assert(kTile % kRound == 0, "rounds tile a tile");
};

template <typename Word>
__device__ __forceinline__ Word from_vec(const ulonglong2& v, int e);
template <>
__device__ __forceinline__ std::uint64_t from_vec<std::uint64_t>(const ulonglong2& v, int e) {
  return e == 0 ? v.x : v.y;
}
template <>
__device__ __forceinline__ U128 from_vec<U128>(const ulonglong2& v, int) {
  return U128{v.x, v.y};  // {hi, lo} in memory order
}

// ---- sample: stratified sample, bitonic sort in shared memory, splitter tree
template <typename Word>
__global__ void __launch_bounds__(kSortThreads)
    build_tree(const Word* in, int64_t m, uint32_t seed, Word* tree) {
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  for (int j = threadIdx.x; j < kSample; j += kSortThreads) s[j] = in[sample_position(m, j, seed)];
  __syncthreads();
  local_sort<Word, kSample, kSortThreads>(s, kSample);  // one ascending run (ends with a barrier)
  for (int j = threadIdx.x; j < kBuckets; j += kSortThreads)
    tree[j] = j == 0 ? max_word<Word>() : s[splitter_sample_rank(tree_node_rank(j))];  // entry 0 unused
}

// ---- count: bucket of every word (tree descent), oracles, per-block
// histogram; each block writes cum[b * G + blk] = its words in buckets
// below b, for b = 0..256. Rounds of kRound words; the next round's loads
// are issued before this round's descent, so memory and compute overlap.
template <typename Word>
__global__ void __launch_bounds__(kThreads)
    count_buckets(const Word* in, int64_t m, bool vec_ok, const Word* tree_g, uint8_t* oracles,
                  uint32_t* cum) {
  using Shape = CountShape<Word>;
  constexpr int I = Shape::kItems, V = Shape::kVecs, PV = Shape::kPerVec, R = Shape::kRound;
  __shared__ __align__(16) Word tree[kBuckets];
  __shared__ uint32_t hist[kBuckets];
  tree[threadIdx.x] = tree_g[threadIdx.x];
  hist[threadIdx.x] = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t stride = int64_t(gridDim.x) * kTile;  // to this block's next tile
  // Item (q, e) of this thread in the round at `base`: base + (threadIdx.x +
  // q * kThreads) * kPerVec + e, so a warp's 16-byte loads read 512
  // contiguous bytes each.
  auto vector_round = [&](int64_t base) { return vec_ok && base + R <= m; };
  auto load_round = [&](int64_t base, ulonglong2(&r)[V]) {
    const ulonglong2* v = reinterpret_cast<const ulonglong2*>(in + base) + threadIdx.x;
#pragma unroll
    for (int q = 0; q < V; ++q) r[q] = __ldg(v + q * kThreads);
  };
  int64_t base = int64_t(blockIdx.x) * kTile;
  ulonglong2 r[V];
  bool have = base < m && vector_round(base);
  if (have) load_round(base, r);
  // The trip count is the same for the whole block (warp votes inside).
  while (base < m) {
    int64_t next = base + R;
    if ((next & (kTile - 1)) == 0) next += stride - kTile;
    Word w[I];
    bool valid[I];
    if (have) {
#pragma unroll
      for (int q = 0; q < V; ++q)
#pragma unroll
        for (int e = 0; e < PV; ++e) {
          w[q * PV + e] = from_vec<Word>(r[q], e);
          valid[q * PV + e] = true;
        }
    } else {
#pragma unroll
      for (int q = 0; q < V; ++q)
#pragma unroll
        for (int e = 0; e < PV; ++e) {
          const int64_t i = base + int64_t(threadIdx.x + q * kThreads) * PV + e;
          valid[q * PV + e] = i < m;
          w[q * PV + e] = i < m ? in[i] : max_word<Word>();
        }
    }
    have = next < m && vector_round(next);
    if (have) load_round(next, r);  // in flight during the descent below
    // Branch-free descent, the items interleaved so their shared loads overlap.
    int j[I];
#pragma unroll
    for (int e = 0; e < I; ++e) j[e] = 1;
#pragma unroll
    for (int l = 0; l < kTreeDepth; ++l)
#pragma unroll
      for (int e = 0; e < I; ++e) j[e] = 2 * j[e] + int(word_lt(w[e], tree[j[e]]));
    int b[I];
#pragma unroll
    for (int e = 0; e < I; ++e) b[e] = 2 * kBuckets - 1 - j[e];
      // Oracles (the buffer is padded to whole tiles: the tail may write junk
      // past m, which no one reads as a word).
#pragma unroll
    for (int q = 0; q < V; ++q) {
      const int64_t i = base + int64_t(threadIdx.x + q * kThreads) * PV;
      if constexpr (PV == 2)
        *reinterpret_cast<uint16_t*>(oracles + i) = uint16_t(b[2 * q] | (b[2 * q + 1] << 8));
      else
        oracles[i] = uint8_t(b[q]);
    }
    // Histogram. Sorted-like inputs put a whole warp's words in one bucket
    // (32 shared atomics on one address): one vote, one atomic instead.
    bool same = valid[0];
#pragma unroll
    for (int e = 1; e < I; ++e) same = same && valid[e] && b[e] == b[0];
    const int b0 = __shfl_sync(0xffffffffu, b[0], 0);
    if (__all_sync(0xffffffffu, same && b[0] == b0)) {
      if (lane == 0) atomicAdd(&hist[b0], uint32_t(32 * I));
    } else {
      int run = -1;
      uint32_t len = 0;
#pragma unroll
      for (int e = 0; e < I; ++e) {
        if (!valid[e]) continue;
        if (b[e] == run) {
          ++len;
        } else {
          if (len) atomicAdd(&hist[run], len);
          run = b[e];
          len = 1;
        }
      }
      if (len) atomicAdd(&hist[run], len);
    }
    base = next;
  }
  __syncthreads();
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  const uint32_t mine = hist[threadIdx.x];
  uint32_t below;
  Scan(scan).ExclusiveSum(mine, below);
  cum[int64_t(threadIdx.x) * gridDim.x + blockIdx.x] = below;
  if (threadIdx.x == kBuckets - 1) cum[int64_t(kBuckets) * gridDim.x + blockIdx.x] = below + mine;
}

// prefix[b] = sum over blocks of cum[b][blk]: words in buckets below b.
__global__ void __launch_bounds__(kThreads)
    bucket_prefix(const uint32_t* cum, int blocks, unsigned long long* prefix) {
  unsigned long long s = 0;
  for (int i = threadIdx.x; i < blocks; i += kThreads) s += cum[int64_t(blockIdx.x) * blocks + i];
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) s += __shfl_down_sync(0xffffffffu, s, d);
  __shared__ unsigned long long warp_sum[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t = 0;
    for (int w = 0; w < kThreads / 32; ++w) t += warp_sum[w];
    prefix[blockIdx.x] = t;
  }
}

// Output offsets of every block: out_at[blk] = words of buckets < b_out in
// blocks before blk, ext_at[blk] = words of bucket b_ext (or none: -1) in
// blocks before blk. offsets = {out_at[0..G), ext_at[0..G)}.
constexpr int kOffsetThreads = 512;
__global__ void __launch_bounds__(kOffsetThreads)
    block_offsets(const uint32_t* cum, int blocks, int b_out, int b_ext, unsigned long long* offsets) {
  using Scan = cub::BlockScan<unsigned long long, kOffsetThreads>;
  __shared__ typename Scan::TempStorage scan;
  unsigned long long carry_out = 0, carry_ext = 0;
  for (int first = 0; first < blocks; first += kOffsetThreads) {
    const int blk = first + threadIdx.x;
    unsigned long long lo = 0, ex = 0;
    if (blk < blocks) {
      lo = cum[int64_t(b_out) * blocks + blk];
      if (b_ext >= 0) ex = cum[int64_t(b_ext + 1) * blocks + blk] - cum[int64_t(b_ext) * blocks + blk];
    }
    unsigned long long at_out, at_ext, all_out, all_ext;
    Scan(scan).ExclusiveSum(lo, at_out, all_out);
    __syncthreads();
    Scan(scan).ExclusiveSum(ex, at_ext, all_ext);
    __syncthreads();
    if (blk < blocks) {
      offsets[blk] = carry_out + at_out;
      offsets[blocks + blk] = carry_ext + at_ext;
    }
    carry_out += all_out;
    carry_ext += all_ext;
  }
}

// ---- filter: from the oracles alone, the words of buckets < b_out go to
// `out` and those of bucket b_ext to `ext`, each block's at its offsets.
// A step takes kFilterTiles of the block's tiles: each thread classifies 16
// consecutive oracles of each, one block scan places all picks, their
// positions go to shared memory, and the block then gathers the picked
// words (contiguous ones coalesce) and writes them contiguously. The next
// step's oracles are loaded before this step's work. The order of the
// picks is fixed (block, step, thread, tile, item): deterministic, though
// not the input order; the result is sorted at the end anyway.
template <typename Word>
__global__ void __launch_bounds__(kThreads, 4)
    filter_buckets(const Word* in, int64_t m, const uint8_t* oracles, int b_out, int b_ext,
                   const unsigned long long* offsets, Word* out, Word* ext) {
  constexpr int T = kFilterTiles;
  static_assert(T * kTile <= 65535, "pick positions and per-step counts fit 16 bits");
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint16_t picked[T * kTile];
  const int64_t tiles = (m + kTile - 1) / kTile;
  unsigned long long out_at = offsets[blockIdx.x], ext_at = offsets[gridDim.x + blockIdx.x];
  auto tile_of = [&](int64_t step, int t) {
    return int64_t(blockIdx.x) + (step * T + t) * int64_t(gridDim.x);
  };
  uint4 next[T];
  auto load_step = [&](int64_t step) {
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int64_t tile = tile_of(step, t);
      next[t] = tile < tiles
                    ? *reinterpret_cast<const uint4*>(oracles + tile * kTile + threadIdx.x * kFilterItems)
                    : make_uint4(0, 0, 0, 0);  // padded to whole tiles, 16-byte aligned
    }
  };
  load_step(0);
  // The trip count is the same for the whole block (barriers inside).
  for (int64_t step = 0; tile_of(step, 0) < tiles; ++step) {
    uint4 v[T];
#pragma unroll
    for (int t = 0; t < T; ++t) v[t] = next[t];
    if (tile_of(step + 1, 0) < tiles) load_step(step + 1);
    uint32_t to_out[T], to_ext[T];  // bit j: item j of tile t goes there
    uint32_t n_out = 0, n_ext = 0;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      // Items of this thread in range: 16, fewer in the last tile, none past it.
      const int64_t left = m - (tile_of(step, t) * kTile + threadIdx.x * kFilterItems);
      const int items = int(left < 0 ? 0 : (left > kFilterItems ? kFilterItems : left));
      const uint32_t words[4] = {v[t].x, v[t].y, v[t].z, v[t].w};
      to_out[t] = 0;
      to_ext[t] = 0;
#pragma unroll
      for (int j = 0; j < kFilterItems; ++j) {
        const int o = int((words[j / 4] >> (8 * (j % 4))) & 0xffu);
        to_out[t] |= uint32_t(o < b_out) << j;
        to_ext[t] |= uint32_t(o == b_ext) << j;
      }
      const uint32_t keep = (1u << items) - 1u;  // items <= 16
      to_out[t] &= keep;
      to_ext[t] &= keep;
      n_out += __popc(to_out[t]);
      n_ext += __popc(to_ext[t]);
    }
    // Both counts in one scan: out in the high half, ext in the low half (a
    // step's totals are at most T * kTile < 2^16, so the halves never carry).
    uint32_t at, total;
    Scan(scan).ExclusiveSum((n_out << 16) | n_ext, at, total);
    int po = int(at >> 16), pe = int(at & 0xffffu);
    const int step_out = int(total >> 16), step_ext = int(total & 0xffffu);
#pragma unroll
    for (int t = 0; t < T; ++t) {
      uint32_t mo = to_out[t], me = to_ext[t];
      while (mo) {
        const int j = __ffs(mo) - 1;
        mo &= mo - 1;
        picked[po++] = uint16_t(t * kTile + threadIdx.x * kFilterItems + j);
      }
      while (me) {
        const int j = __ffs(me) - 1;
        me &= me - 1;
        picked[step_out + pe++] = uint16_t(t * kTile + threadIdx.x * kFilterItems + j);
      }
    }
    __syncthreads();
    for (int p = threadIdx.x; p < step_out + step_ext; p += kThreads) {
      const int at_step = picked[p];
      const Word w = in[tile_of(step, at_step / kTile) * kTile + (at_step % kTile)];
      if (p < step_out)
        out[out_at + p] = w;
      else
        ext[ext_at + (p - step_out)] = w;
    }
    out_at += step_out;
    ext_at += step_ext;
    __syncthreads();  // `picked` and the scan storage are reused
  }
}

// ---- bit range: OR and AND of all words (bits where they differ = OR ^ AND).
__device__ __forceinline__ void word_parts(std::uint64_t w, std::uint64_t& hi, std::uint64_t& lo) {
  hi = 0;
  lo = w;
}
__device__ __forceinline__ void word_parts(const U128& w, std::uint64_t& hi, std::uint64_t& lo) {
  hi = w.hi;
  lo = w.lo;
}
// acc = {or_hi, and_hi, or_lo, and_lo}, preset to {0, ~0, 0, ~0}.
template <typename Word>
__global__ void or_and_words(const Word* w, int64_t n, unsigned long long* acc) {
  unsigned long long oh = 0, ah = ~0ull, ol = 0, al = ~0ull;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    std::uint64_t hi, lo;
    word_parts(w[i], hi, lo);
    oh |= hi;
    ah &= hi;
    ol |= lo;
    al &= lo;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    oh |= __shfl_xor_sync(0xffffffffu, oh, d);
    ah &= __shfl_xor_sync(0xffffffffu, ah, d);
    ol |= __shfl_xor_sync(0xffffffffu, ol, d);
    al &= __shfl_xor_sync(0xffffffffu, al, d);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicOr(acc + 0, oh);
    atomicAnd(acc + 1, ah);
    atomicOr(acc + 2, ol);
    atomicAnd(acc + 3, al);
  }
}

__global__ void split_u128(const U128* w, int64_t n, std::uint64_t* hi, std::uint64_t* lo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const U128 x = w[i];
    hi[i] = x.hi;
    lo[i] = x.lo;
  }
}
__global__ void join_u128(U128* w, int64_t n, const std::uint64_t* hi, const std::uint64_t* lo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    w[i] = U128{hi[i], lo[i]};
}

void copy_words(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes > 0 && dst != src) GKNN_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

// The bits [begin, end) in which words may differ, from OR ^ AND.
struct BitRange {
  int begin = 0, end = 0;  // empty: all equal
};
BitRange bit_range(std::uint64_t diff) {
  if (diff == 0) return {};
  return {__builtin_ctzll(diff), 64 - __builtin_clzll(diff)};
}

// Radix sort of keys (and values) in a double buffer over bits [begin, end).
void radix_sort(cub::DoubleBuffer<std::uint64_t>& keys, int64_t n, BitRange r, cudaStream_t stream) {
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, n, r.begin, r.end, stream));
  AsyncBuffer<unsigned char> temp(bytes, stream);
  GKNN_CUDA(cub::DeviceRadixSort::SortKeys(temp.get(), bytes, keys, n, r.begin, r.end, stream));
}
void radix_sort(cub::DoubleBuffer<std::uint64_t>& keys, cub::DoubleBuffer<std::uint64_t>& values, int64_t n,
                BitRange r, cudaStream_t stream) {
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, n, r.begin, r.end, stream));
  AsyncBuffer<unsigned char> temp(bytes, stream);
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(temp.get(), bytes, keys, values, n, r.begin, r.end, stream));
}

// Sorts in[0, count) and writes its first `take` words to out (in == out
// with take == count: in place). diff_hi / diff_lo: bits in which the words'
// halves may differ (~0: unknown).
void sort_into(const std::uint64_t* in, int64_t count, std::uint64_t* out, int64_t take,
               std::uint64_t /*diff_hi*/, std::uint64_t diff_lo, cudaStream_t stream) {
  if (count <= 0 || take <= 0) return;
  const BitRange r = bit_range(diff_lo);
  if (r.begin == r.end) return copy_words(out, in, take * 8, stream);  // all equal
  const bool in_place = in == out && take == count;
  AsyncBuffer<std::uint64_t> own(in_place ? 0 : count, stream), alt(count, stream);
  std::uint64_t* keys0 = in_place ? out : own.get();
  if (!in_place) copy_words(keys0, in, count * 8, stream);
  cub::DoubleBuffer<std::uint64_t> keys(keys0, alt.get());
  radix_sort(keys, count, r, stream);
  copy_words(out, keys.Current(), take * 8, stream);
}

void sort_into(const U128* in, int64_t count, U128* out, int64_t take, std::uint64_t diff_hi,
               std::uint64_t diff_lo, cudaStream_t stream) {
  if (count <= 0 || take <= 0) return;
  const BitRange rh = bit_range(diff_hi), rl = bit_range(diff_lo);
  if (rh.begin == rh.end && rl.begin == rl.end) return copy_words(out, in, take * 16, stream);
  AsyncBuffer<std::uint64_t> hi(count, stream), lo(count, stream), hi2(count, stream), lo2(count, stream);
  split_u128<<<grid_for(count, 256), 256, 0, stream>>>(in, count, hi.get(), lo.get());
  GKNN_CUDA(cudaGetLastError());
  cub::DoubleBuffer<std::uint64_t> h(hi.get(), hi2.get()), l(lo.get(), lo2.get());
  if (rl.begin != rl.end) radix_sort(l, h, count, rl, stream);  // by the low half,
  if (rh.begin != rh.end) radix_sort(h, l, count, rh, stream);  // then stably by the high half
  join_u128<<<grid_for(take, 256), 256, 0, stream>>>(out, take, h.Current(), l.Current());
  GKNN_CUDA(cudaGetLastError());
}

// OR ^ AND of d[0, n), per half (one host wait).
template <typename Word>
void differing_bits(const Word* d, int64_t n, cudaStream_t stream, std::uint64_t& diff_hi,
                    std::uint64_t& diff_lo) {
  AsyncBuffer<unsigned long long> acc(4, stream);
  const unsigned long long init[4] = {0, ~0ull, 0, ~0ull};
  GKNN_CUDA(cudaMemcpyAsync(acc.get(), init, sizeof(init), cudaMemcpyHostToDevice, stream));
  or_and_words<Word><<<std::min(grid_for(n, 256), 1024), 256, 0, stream>>>(d, n, acc.get());
  GKNN_CUDA(cudaGetLastError());
  unsigned long long got[4];
  GKNN_CUDA(cudaMemcpyAsync(got, acc.get(), sizeof(got), cudaMemcpyDeviceToHost, stream));
  GKNN_CUDA(cudaStreamSynchronize(stream));
  diff_hi = got[0] ^ got[1];
  diff_lo = got[2] ^ got[3];
}

}  // namespace

template <typename Word>
void sort_words_cub(Word* d_words, std::int64_t n, cudaStream_t stream) {
  sort_into(d_words, n, d_words, n, ~0ull, ~0ull, stream);
}

template <typename Word>
void sample_select_smallest(const Word* d_words, std::int64_t n, std::int64_t k, Word* d_out,
                            cudaStream_t stream) {
  sample_select_smallest(d_words, n, k, d_out, stream, SampleSelectTuning{});
}

template <typename Word>
void sample_select_smallest(const Word* d_words, std::int64_t n, std::int64_t k, Word* d_out,
                            cudaStream_t stream, const SampleSelectTuning& tuning) {
  using namespace sample_select_detail;
  if (n < 0 || k < 0 || k > n)
    throw Error(ErrorCode::InvalidArgument, "sample_select_smallest: need 0 <= k <= n (n=" +
                                                std::to_string(n) + ", k=" + std::to_string(k) + ")");
  if (k == 0) return;
  // A level needs at least kSample words (one per stratum); below twice
  // that, sorting is cheaper anyway.
  const int64_t base_case = std::max<int64_t>(tuning.base_case, 2 * kSample);

  int device = 0, sms = 0, per_sm = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, count_buckets<Word>, kThreads, 0));
  const int64_t wave = int64_t(sms) * std::max(per_sm, 1);
  const int tree_smem = kSample * int(sizeof(Word));
  GKNN_CUDA(cudaFuncSetAttribute(build_tree<Word>, cudaFuncAttributeMaxDynamicSharedMemorySize, tree_smem));

  const Word* cur = d_words;  // the words still in play
  AsyncPtr<Word> cur_owner;   // owns cur after the first level
  int64_t m = n, need = k;    // need of the m words still belong to the result
  int64_t written = 0;        // result words in d_out so far
  bool stalled = false;       // a level did not shrink: sort what is left

  // Per-level scratch, sized by the first level (the largest).
  AsyncPtr<uint8_t> oracles;
  AsyncPtr<uint32_t> cum;
  AsyncPtr<unsigned long long> offsets, prefix_d;
  AsyncPtr<Word> tree;
  int64_t max_blocks = 0;

  // GKNN_SAMPLE_SELECT_TRACE: each level's sizes and stage times to stderr.
  StageTrace trace(stream, "GKNN_SAMPLE_SELECT_TRACE", "sample_select");
  for (int level = 0;; ++level) {
    if (need == m) {  // everything left belongs to the result
      copy_words(d_out + written, cur, m * int64_t(sizeof(Word)), stream);
      trace.mark("copy rest");
      written += m;
      break;
    }
    if (m <= base_case || stalled) {
      sort_into(cur, m, d_out + written, need, ~0ull, ~0ull, stream);
      trace.mark("base sort");
      trace.note("level " + std::to_string(level) + ": base case, sort " + std::to_string(m) +
                 " words, take " + std::to_string(need));
      written += need;
      break;
    }
    // One wave of blocks, the tiles dealt out round-robin.
    const int64_t tiles = (m + kTile - 1) / kTile;
    const int64_t blocks = std::min(wave, tiles);
    if (!oracles) {
      // Later levels have fewer tiles, so at most min(wave, tiles) blocks.
      oracles = async_alloc<uint8_t>(tiles * kTile, stream);
      max_blocks = std::min(wave, tiles);
      cum = async_alloc<uint32_t>((kBuckets + 1) * max_blocks, stream);
      offsets = async_alloc<unsigned long long>(2 * max_blocks, stream);
      prefix_d = async_alloc<unsigned long long>(kBuckets + 1, stream);
      tree = async_alloc<Word>(kBuckets, stream);
    }
    if (blocks > max_blocks) throw Error(ErrorCode::DeviceFault, "sample_select: level grid grew");

    build_tree<Word>
        <<<1, kSortThreads, tree_smem, stream>>>(cur, m, uint32_t(level) * 0x9e3779b9u, tree->get());
    GKNN_CUDA(cudaGetLastError());
    trace.mark("sample");
    const bool vec_ok = (reinterpret_cast<std::uintptr_t>(cur) & 15) == 0;
    count_buckets<Word>
        <<<unsigned(blocks), kThreads, 0, stream>>>(cur, m, vec_ok, tree->get(), oracles->get(), cum->get());
    GKNN_CUDA(cudaGetLastError());
    trace.mark("count");
    bucket_prefix<<<kBuckets + 1, kThreads, 0, stream>>>(cum->get(), int(blocks), prefix_d->get());
    GKNN_CUDA(cudaGetLastError());
    unsigned long long prefix[kBuckets + 1];
    GKNN_CUDA(cudaMemcpyAsync(prefix, prefix_d->get(), sizeof(prefix), cudaMemcpyDeviceToHost, stream));
    GKNN_CUDA(cudaStreamSynchronize(stream));
    trace.mark("prefix+wait");
    if (static_cast<int64_t>(prefix[kBuckets]) != m)
      throw Error(ErrorCode::DeviceFault, "sample_select: bucket counts do not add up");

    const BucketChoice c = choose_bucket(prefix, need);
    trace.note("level " + std::to_string(level) + ": m=" + std::to_string(m) +
               " need=" + std::to_string(need) + " blocks=" + std::to_string(blocks) +
               " bucket=" + std::to_string(c.bucket) + " below=" + std::to_string(c.below) +
               " in_bucket=" + std::to_string(c.in_bucket) + (c.whole ? " (whole)" : ""));
    if (c.in_bucket == m) {  // one bucket holds everything: repeated words
      stalled = true;
      continue;
    }
    const int b_out = c.whole ? c.bucket + 1 : c.bucket;
    const int b_ext = c.whole ? -1 : c.bucket;
    AsyncPtr<Word> next = c.whole ? nullptr : async_alloc<Word>(c.in_bucket, stream);
    block_offsets<<<1, kOffsetThreads, 0, stream>>>(cum->get(), int(blocks), b_out, b_ext, offsets->get());
    GKNN_CUDA(cudaGetLastError());
    filter_buckets<Word><<<unsigned(blocks), kThreads, 0, stream>>>(
        cur, m, oracles->get(), b_out, b_ext, offsets->get(), d_out + written, next ? next->get() : nullptr);
    GKNN_CUDA(cudaGetLastError());
    trace.mark("filter");
    if (c.whole) {
      written += c.below + c.in_bucket;
      break;
    }
    written += c.below;
    need -= c.below;
    if (2 * c.in_bucket > m) stalled = true;  // shrank by less than 2x: repeated words
    m = c.in_bucket;
    cur = next->get();
    cur_owner = std::move(next);  // frees the previous level's words (stream-ordered)
  }
  if (written != k) throw Error(ErrorCode::DeviceFault, "sample_select: result size mismatch");

  // Ascending order: a radix sort over the bits in which the result differs.
  if (k > 1) {
    std::uint64_t diff_hi = ~0ull, diff_lo = ~0ull;
    if (k >= (int64_t(1) << 16)) {
      differing_bits(d_out, k, stream, diff_hi, diff_lo);
      trace.mark("final bits");
      const BitRange rh = bit_range(diff_hi), rl = bit_range(diff_lo);
      trace.note("final sort of " + std::to_string(k) + " words over bits [" + std::to_string(rl.begin) +
                 ", " + std::to_string(rl.end) + ") of the low half, [" + std::to_string(rh.begin) + ", " +
                 std::to_string(rh.end) + ") of the high half");
    }
    sort_into(d_out, k, d_out, k, diff_hi, diff_lo, stream);
    trace.mark("final sort");
  }
  GKNN_CUDA(cudaStreamSynchronize(stream));
}

#define GKNN_INSTANTIATE(W)                                                                        \
  template void sample_select_smallest<W>(const W*, std::int64_t, std::int64_t, W*, cudaStream_t); \
  template void sample_select_smallest<W>(const W*, std::int64_t, std::int64_t, W*, cudaStream_t,  \
                                          const SampleSelectTuning&);                              \
  template void sort_words_cub<W>(W*, std::int64_t, cudaStream_t);
GKNN_INSTANTIATE(std::uint64_t)
GKNN_INSTANTIATE(U128)
#undef GKNN_INSTANTIATE

}  // namespace gknn::select
