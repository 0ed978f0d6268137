// The fused one-array top-k pipeline: the k smallest packed words a Loader
// yields, exactly. select_topk_gpu runs it over a plain array; the GpuTopK
// CustomScan runs it with a Loader that evaluates quals and the ranking
// expression (bitonic_topk.cuh explains the Loader contract).
//
// Bitonic top-k sorts every element it touches, so on its own it is bound
// by shared memory, not by the one read of the input that is the floor. Past
// the paper: a sample of the packed words gives a threshold that about
// 2k + O(sqrt k) + 8 sample-ranks deep; one streaming pass keeps the words at
// or below it (a few per thousand on any distribution: the sample is of
// (key, payload) words, which are all distinct, so ties and sorted inputs
// cannot fool it), and bitonic top-k runs on those candidates. When the
// candidates are too few (fewer than k: a filter rejected most rows, or the
// sample misled) or too many (the buffer overflows), the selection falls back
// to bitonic top-k over the whole input, so the result is always exact. k
// above 1024 runs SampleSelect on the candidates.
#pragma once

#include <cmath>

#include "gknn/plan.h"
#include "runtime/stream_tools.h"
#include "select/bitonic_topk.cuh"
#include "select/sample_select.cuh"

namespace gknn {
namespace select {

constexpr int kSampleWords = 32768;
constexpr int64_t kMinSampled = 8 * kSampleWords;  // below this, no prefilter

// Stratified sample: one word from each of kSampleWords equal strata, at a
// hashed offset inside the stratum (deterministic, so results never depend
// on luck, and spread, so sorted inputs are sampled evenly).
template <typename Word, typename Loader>
__global__ void sample_words(Loader load, int64_t n, Word* samples) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= kSampleWords) return;
  int64_t lo = n * j / kSampleWords, hi = n * (j + 1) / kSampleWords;
  uint32_t h = uint32_t(j) * 2654435761u;
  h ^= h >> 16;
  samples[j] = load(lo + int64_t(h % uint32_t(hi - lo)));
}

// Keeps the words <= threshold (sentinels never). Each warp stages its
// survivors in its own slice of shared memory and flushes the slice with one
// global atomic when it fills: candidates of random inputs are scattered, so
// a global atomic per hit would serialise on the counter, and a block-wide
// staging area would need a barrier per round, stalling the loads. Counts
// all survivors, writes the first `cap`.
constexpr int kFilterThreads = 256;
template <typename Word>
struct FilterShape {
  static constexpr int kGroups = sizeof(Word) == 8 ? 2 : 1;    // groups of 4 words in flight per thread
  static constexpr int kWarpRound = 32 * kGroups * 4;          // most survivors of a warp per round
  static constexpr int kSlice = 2 * kWarpRound;                // per-warp staging (32 KB per block)
  static constexpr int kRound = kFilterThreads * kGroups * 4;  // positions a block reads per round
};

// Which of the 4 positions from i to keep (bit j: w[j] is real and at most
// the threshold t; w[j] is only meaningful where its bit is set).
template <typename Loader, typename Word>
__device__ __forceinline__ unsigned keep_words(const Loader& load, int64_t i, const Word& t, Word (&w)[4]) {
  load_group(load, i, w);
  unsigned m = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) m |= unsigned(w[j] <= t && !(w[j] == max_word<Word>())) << j;
  return m;
}

// The generic filter packs every word and compares words.
template <typename Loader, typename Word>
struct GroupFilter {
  Word t;
  __device__ GroupFilter(const Loader&, const Word& threshold) : t(threshold) {}
  __device__ __forceinline__ unsigned operator()(const Loader& load, int64_t i, Word (&w)[4]) const {
    return keep_words(load, i, t, w);
  }
};

// A plain array of 4-byte keys: packing every element costs more instructions
// than the SMs can issue at full read bandwidth, so raw keys are compared
// with the threshold's key first (one compare; a NaN or a tie goes on to the
// exact word compare) and only the few that may pass are packed.
template <typename Key, typename Payload, typename Word>
struct GroupFilter<ArrayLoader<Key, Payload>, Word> {
  using P = Packing<Key, Payload>;
  Word t;
  Key tk;
  bool largest;
  __device__ GroupFilter(const ArrayLoader<Key, Payload>& load, const Word& threshold)
      : t(threshold), tk(P::key(threshold, load.largest)), largest(load.largest) {}
  __device__ __forceinline__ unsigned operator()(const ArrayLoader<Key, Payload>& load, int64_t i,
                                                 Word (&w)[4]) const {
    Key keys[4];
    if (load_keys4(load, i, keys)) {
      unsigned m = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (largest ? !(keys[j] < tk) : !(keys[j] > tk)) {
          w[j] = P::pack(keys[j], static_cast<Payload>(i + j), largest);
          m |= unsigned(w[j] <= t) << j;
        }
      }
      return m;
    }
    return keep_words(load, i, t, w);
  }
};

template <typename Word>
__device__ __forceinline__ void flush_slice(const Word* slice, int staged, Word* out,
                                            unsigned long long* count, int64_t cap, int lane) {
  unsigned long long at = 0;
  if (lane == 0) at = atomicAdd(count, static_cast<unsigned long long>(staged));
  at = __shfl_sync(0xffffffffu, at, 0);
  for (int i = lane; i < staged; i += 32)
    if (at + i < static_cast<unsigned long long>(cap)) out[at + i] = slice[i];
  __syncwarp();
}

template <typename Word, typename Loader>
__global__ void __launch_bounds__(kFilterThreads)
    filter_words(Loader load, int64_t n, const Word* threshold, Word* out, unsigned long long* count,
                 int64_t cap) {
  using Shape = FilterShape<Word>;
  __shared__ Word stage[kFilterThreads / 32][Shape::kSlice];
  const int lane = threadIdx.x & 31;
  Word* slice = stage[threadIdx.x / 32];
  int staged = 0;  // the same in every lane of the warp
  const GroupFilter<Loader, Word> keep(load, *threshold);
  // Groups of 4 consecutive positions; the loop bound is the same for the
  // whole warp (warp collectives inside).
  const int64_t groups = (n + 3) / 4, stride = int64_t(gridDim.x) * kFilterThreads;
  for (int64_t block_base = int64_t(blockIdx.x) * kFilterThreads; block_base < groups;
       block_base += stride * Shape::kGroups) {
    Word w[Shape::kGroups][4];
    unsigned mine = 0;
#pragma unroll
    for (int g = 0; g < Shape::kGroups; ++g)
      mine |= keep(load, 4 * (block_base + threadIdx.x + g * stride), w[g]) << (4 * g);
    if (!__any_sync(0xffffffffu, mine != 0)) continue;  // most rounds keep nothing
#pragma unroll
    for (int g = 0; g < Shape::kGroups; ++g)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool keep = (mine >> (4 * g + j)) & 1u;
        const unsigned mask = __ballot_sync(0xffffffffu, keep);
        if (keep) slice[staged + __popc(mask & ((1u << lane) - 1))] = w[g][j];
        staged += __popc(mask);
      }
    __syncwarp();
    if (staged > Shape::kSlice - Shape::kWarpRound) {
      flush_slice(slice, staged, out, count, cap, lane);
      staged = 0;
    }
  }
  __syncwarp();
  if (staged > 0) flush_slice(slice, staged, out, count, cap, lane);
}

template <typename Word, typename Loader>
__global__ void pack_words(Loader load, int64_t n, Word* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = load(i);
}

template <typename Key, typename Payload>
__global__ void unpack_words(const typename Packing<Key, Payload>::Word* words, int64_t count, bool largest,
                             Key* keys, Payload* payloads) {
  using P = Packing<Key, Payload>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    keys[i] = P::key(words[i], largest);
    payloads[i] = P::payload(words[i]);
  }
}

// Sample rank of the threshold: about 2x the expected number of top-k words
// among the samples, plus a few standard deviations and a floor, so that
// fewer than k words fall at or below it only with negligible probability.
inline int64_t threshold_rank(int64_t n, int64_t k) {
  double expected = double(k) * kSampleWords / double(n);
  return static_cast<int64_t>(std::ceil(2.0 * expected + 4.0 * std::sqrt(expected) + 8.0));
}

// The smallest min(k, n) words of `load`, ascending, into out.
template <typename Word, typename Loader>
void smallest_words(Loader load, int64_t n, int64_t k, Word* out, cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  auto finish = [&](const Word* words, int64_t count) {
    if (choose_topk(count, k).algo == TopkAlgo::Bitonic) {
      AsyncBuffer<Word> scratch(bitonic_scratch_words(count, k), stream);
      bitonic_topk<Word, true>(WordLoader<Word>{words, count}, count, k, out, scratch.get(), stream);
    } else {
      sample_select_smallest<Word>(words, count, take, out, stream);
    }
  };
  // Everything the loader yields: the fused filling SortReducer (rows a
  // filter rejects are never sorted), or packed words for SampleSelect.
  auto everything = [&] {
    if (choose_topk(n, k).algo == TopkAlgo::Bitonic) return bitonic_topk_fused<Word>(load, n, k, out, stream);
    AsyncBuffer<Word> all(n, stream);
    pack_words<<<grid_for(n, 256), 256, 0, stream>>>(load, n, all.get());
    GKNN_CUDA(cudaGetLastError());
    finish(all.get(), n);
  };

  const int64_t rank = threshold_rank(n, k);
  if (n < kMinSampled || rank >= kSampleWords) return everything();

  // GKNN_SELECT_TRACE: each stage's GPU time to stderr.
  StageTrace trace(stream, "GKNN_SELECT_TRACE", "select trace");
  AsyncBuffer<Word> samples(kSampleWords, stream), low(rank + 1, stream);
  AsyncBuffer<unsigned long long> count(1, stream);
  const int64_t cap = std::min<int64_t>(n, 2 * (n / kSampleWords + 1) * (rank + 1) + 65536);
  AsyncBuffer<Word> candidates(cap, stream);
  sample_words<<<kSampleWords / 256, 256, 0, stream>>>(load, n, samples.get());
  GKNN_CUDA(cudaGetLastError());
  {  // the threshold: the sample of that rank (bitonic top-k of the samples, or a sort)
    if (rank < kMaxBitonicK) {
      AsyncBuffer<Word> scratch(bitonic_scratch_words(kSampleWords, rank + 1), stream);
      bitonic_topk<Word, true>(WordLoader<Word>{samples.get(), kSampleWords}, kSampleWords, rank + 1,
                               low.get(), scratch.get(), stream);
    } else {
      sort_words_cub<Word>(samples.get(), kSampleWords, stream);
      GKNN_CUDA(cudaMemcpyAsync(low.get(), samples.get(), (rank + 1) * sizeof(Word), cudaMemcpyDeviceToDevice,
                                stream));
    }
  }
  const Word* threshold = low.get() + rank;
  GKNN_CUDA(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), stream));
  trace.mark("sample");
  int sms = 0, device = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Exactly one wave of resident blocks: each block loops over an equal share,
  // so a second, partial wave would leave most of the GPU idle at the end.
  int per_sm = 0;
  GKNN_CUDA(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, filter_words<Word, Loader>, kFilterThreads, 0));
  const int64_t rounds = (n + FilterShape<Word>::kRound - 1) / FilterShape<Word>::kRound;
  const int grid =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(int64_t(sms) * std::max(per_sm, 1), rounds)));
  filter_words<<<grid, kFilterThreads, 0, stream>>>(load, n, threshold, candidates.get(), count.get(), cap);
  GKNN_CUDA(cudaGetLastError());
  unsigned long long found = 0;
  trace.mark("filter");
  GKNN_CUDA(cudaMemcpyAsync(&found, count.get(), sizeof(found), cudaMemcpyDeviceToHost, stream));
  GKNN_CUDA(cudaStreamSynchronize(stream));
  trace.mark("sync");
  if (found >= static_cast<unsigned long long>(take) && found <= static_cast<unsigned long long>(cap))
    finish(candidates.get(), static_cast<int64_t>(found));
  else
    everything();  // the sample misled (or a filter rejected most rows): exact anyway
  trace.mark(found >= static_cast<unsigned long long>(take) ? "bitonic" : "fallback");
}

}  // namespace select
}  // namespace gknn
