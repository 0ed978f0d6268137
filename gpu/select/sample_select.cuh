// SampleSelect for large k (Ribizel & Anzt, "Approximate and exact selection
// on GPUs", IPDPSW'19), over packed (key, payload) words (key_order.cuh): the
// k smallest of n words, ascending, for any 1 <= k <= n.
//
// One level (faithful to the paper, then past it):
//   sample  one block draws a stratified sample of kSample words (one per
//           equal stratum, at a hashed offset: deterministic, and even on
//           sorted inputs), bitonic-sorts it in shared memory and lays 255
//           splitters (its 1/256 .. 255/256 quantiles) out as an implicit
//           complete binary search tree (heap order);
//   count   every element finds its bucket by a branch-free descent of that
//           tree in shared memory, stores it as a one-byte oracle, and counts
//           it in a per-block shared histogram; each block writes its counts
//           prefix-summed over buckets, and a small kernel sums the blocks'
//           rows into the global bucket prefix;
//   choose  (host) the bucket b that holds rank k;
//   filter  reading only the oracles, every block compacts (block offsets
//           from a scan of the per-block counts, no atomics; a fixed order,
//           so the run is deterministic) the words of buckets below b into
//           the result (the paper's top-k kernel fusion) and the words of
//           bucket b into a new array.
// Count and filter deal the input out to one wave of blocks in 4096-word
// tiles, round-robin, so a contiguous run of selected words (the low bucket
// of a sorted input) is spread over every block, not left to a few.
// Recurse on bucket b with rank k - (words below it) until it is small, then
// sort it with CUB and take what is still missing; finally sort the k words
// (CUB radix sort, only over the bit range in which they differ).
//
// Why every level shrinks by ~256x on ANY input: buckets are intervals of
// words, and the words are all distinct (the payload, a row id, is inside
// the word), so the sample's quantiles split the ranks, not the values. A
// sorted input, all-equal keys or the paper's bucket killer (all 1.0 but
// four values) give buckets of the same size as uniform keys: about m/256,
// with a relative deviation of 1/sqrt(kSample/256) = 25%. (The paper needs
// equality buckets for repeated values; distinct words need none.) Should the
// words repeat after all (a caller's duplicate payloads), a level that does
// not shrink by 2x hands its bucket to the base-case sort: always exact.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "key_order.cuh"  // this directory (tests include this header by a relative path)

namespace gknn::select {

// The k smallest of d_words[0, n) (device memory), ascending, into
// d_out[0, k). 0 <= k <= n, else gknn::Error(InvalidArgument). Runs on
// `stream`; the host waits for the stream once per level, and the call
// returns once the results are in d_out.
template <typename Word>
void sample_select_smallest(const Word* d_words, std::int64_t n, std::int64_t k, Word* d_out,
                            cudaStream_t stream);

// Knobs, for tests that want several levels on small inputs.
struct SampleSelectTuning {
  std::int64_t base_case = 65536;  // at most this many words: sort instead of another level
};
template <typename Word>
void sample_select_smallest(const Word* d_words, std::int64_t n, std::int64_t k, Word* d_out,
                            cudaStream_t stream, const SampleSelectTuning& tuning);

// CUB radix sort of d_words[0, n) in place, ascending (the U128 words by
// their low half, then stably by the high half): the final step of the
// selection, exported as the full-sort baseline of the benchmarks.
template <typename Word>
void sort_words_cub(Word* d_words, std::int64_t n, cudaStream_t stream);

// Host and device helpers, exposed so the CPU tests check what the kernels
// compute.
namespace sample_select_detail {

constexpr int kTreeDepth = 8;
constexpr int kBuckets = 1 << kTreeDepth;  // the oracle is one byte
constexpr int kSplitters = kBuckets - 1;
constexpr int kSample = 4096;  // 16 samples per bucket

// Splitter i (0-based, ascending) is the sample of this rank: the
// (i + 1)/256 quantile of the sorted sample.
GKNN_HDI int splitter_sample_rank(int i) { return (i + 1) * (kSample / kBuckets); }

// The splitter tree: a 1-based heap in shared memory, mirrored so that a
// step of the descent is j = 2j + (w < s): one compare, one shift-add.
// Node j (1 <= j < 256; entry 0 unused) has children 2j (words >= its
// splitter) and 2j + 1 (words below it). After 8 steps j = 256 + the path
// bits (1 = went below), and the bucket, counted from the smallest words, is
// 511 - j. Node j at depth d = floor(log2 j) and value-order position
// p = 2^d - 1 - (j - 2^d) holds splitter (2p + 1) * 2^(7 - d) - 1, so the
// in-order walk (2j + 1, j, 2j) is ascending.
GKNN_HDI int tree_node_rank(int j) {
  int depth = 0;
  while ((2 << depth) <= j) ++depth;
  const int p = (1 << depth) - 1 - (j - (1 << depth));
  return (2 * p + 1) * (1 << (kTreeDepth - 1 - depth)) - 1;
}

GKNN_HDI bool word_lt(std::uint64_t a, std::uint64_t b) { return a < b; }
GKNN_HDI bool word_lt(const U128& a, const U128& b) {
  return (a.hi < b.hi) | ((a.hi == b.hi) & (a.lo < b.lo));
}

// Bucket of w = the number of splitters <= w (std::upper_bound), by the
// branch-free descent; tree[1..255] as above.
template <typename Word>
GKNN_HDI int bucket_of(const Word* tree, const Word& w) {
  int j = 1;
  for (int l = 0; l < kTreeDepth; ++l) j = 2 * j + int(word_lt(w, tree[j]));
  return 2 * kBuckets - 1 - j;
}

// Position of sample j of m >= kSample words: in stratum
// [m j / kSample, m (j + 1) / kSample), at a hashed offset.
GKNN_HDI std::int64_t sample_position(std::int64_t m, int j, std::uint32_t seed) {
  const std::int64_t lo = m * j / kSample, hi = m * (j + 1) / kSample;
  std::uint32_t h = (std::uint32_t(j) ^ seed) * 2654435761u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  return lo + std::int64_t(std::uint64_t(h) % std::uint64_t(hi - lo));
}

// Where rank `need` (1 <= need <= m, the number of words still missing)
// falls, from prefix[0..256] (prefix[b] = words in buckets below b,
// prefix[256] = m): bucket b with prefix[b] < need <= prefix[b + 1].
// `whole`: the bucket completes the result (need == prefix[b + 1]), so it is
// taken entirely and nothing is left to recurse on.
struct BucketChoice {
  int bucket;
  std::int64_t below;      // words in lower buckets: all in the result
  std::int64_t in_bucket;  // words in the bucket
  bool whole;
};
inline BucketChoice choose_bucket(const unsigned long long* prefix, std::int64_t need) {
  int b = 0;
  while (b < kBuckets - 1 && static_cast<std::int64_t>(prefix[b + 1]) < need) ++b;
  const std::int64_t below = static_cast<std::int64_t>(prefix[b]);
  const std::int64_t in = static_cast<std::int64_t>(prefix[b + 1]) - below;
  return BucketChoice{b, below, in, need == below + in};
}

}  // namespace sample_select_detail
}  // namespace gknn::select
