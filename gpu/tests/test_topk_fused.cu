// The fused one-array pipeline (topk_pipeline.cuh) with a filtering Loader,
// as the GpuTopK CustomScan runs it: rejected rows are sentinels, which the
// FusedSortReducer drops before sorting and the sampled prefilter never
// keeps. Against the contract itself: the kept rows' packed words, sorted,
// the first min(k, n) of them, sentinels after the last kept row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu_env.h"
#include "runtime/cuda_check.h"
#include "select/topk_pipeline.cuh"

namespace {

using gknn::select::Packing;

// Keeps row i when a hash of i falls under `keep_per_million`; the key comes
// from the array (the ranking expression's result).
template <typename Key, typename Payload>
struct FilterLoader {
  using P = Packing<Key, Payload>;
  using Word = typename P::Word;
  const Key* keys;
  int64_t n;
  uint32_t keep_per_million;
  bool largest;
  __host__ __device__ static bool kept(int64_t i, uint32_t keep) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return h % 1000000u < keep;
  }
  __device__ Word operator()(int64_t i) const {
    if (i >= n || !kept(i, keep_per_million)) return gknn::select::max_word<Word>();
    return P::pack(keys[i], static_cast<Payload>(i), largest);
  }
};

template <typename Key>
std::vector<Key> make_keys(int64_t n, unsigned seed, int distinct) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (auto& k : keys) {
    if (distinct > 0)  // few distinct values: ties everywhere
      k = static_cast<Key>(static_cast<int>(rng() % distinct) - distinct / 2);
    else
      k = static_cast<Key>(std::uniform_real_distribution<double>(-1000.0, 1000.0)(rng));
  }
  return keys;
}

template <typename Key, typename Payload>
void check(int64_t n, int64_t k, uint32_t keep, bool largest, int distinct) {
  using L = FilterLoader<Key, Payload>;
  using Word = typename L::Word;
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " keep/1e6=" + std::to_string(keep) +
               (largest ? " largest" : " smallest") + " distinct=" + std::to_string(distinct));
  const std::vector<Key> keys = make_keys<Key>(n, unsigned(n * 31 + k), distinct);
  std::vector<Word> want;
  for (int64_t i = 0; i < n; ++i)
    if (L::kept(i, keep)) want.push_back(L::P::pack(keys[i], static_cast<Payload>(i), largest));
  std::sort(want.begin(), want.end());
  const int64_t take = std::min(k, n);
  want.resize(take, gknn::select::max_word<Word>());

  gknn::DeviceBuffer<Key> d_keys(std::max<int64_t>(n, 1));
  gknn::DeviceBuffer<Word> d_out(std::max<int64_t>(take, 1));
  GKNN_CUDA(cudaMemcpy(d_keys.get(), keys.data(), sizeof(Key) * n, cudaMemcpyHostToDevice));
  gknn::select::smallest_words<Word>(L{d_keys.get(), n, keep, largest}, n, k, d_out.get(), nullptr);
  GKNN_CUDA(cudaDeviceSynchronize());
  std::vector<Word> got(take);
  GKNN_CUDA(cudaMemcpy(got.data(), d_out.get(), sizeof(Word) * take, cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t i = 0; i < take; ++i) bad += !(got[i] == want[i]);
  EXPECT_EQ(bad, 0) << "first mismatch at "
                    << (std::mismatch(got.begin(), got.end(), want.begin(),
                                      [](const Word& a, const Word& b) { return a == b; })
                            .first -
                        got.begin());
}

const uint32_t kKeeps[] = {1000000, 500000, 10000, 100, 0};

// Below the sampling threshold: the FusedSortReducer alone.
TEST(TopkFused, SmallInputsEveryK) {
  GKNN_NEED_GPU();
  for (int64_t n : {1, 31, 1000, 65537, 200003})
    for (int64_t k : {1, 2, 31, 32, 33, 100, 255, 256, 1000, 1024})
      for (uint32_t keep : kKeeps) check<float, uint32_t>(n, k, keep, k % 2 == 1, 0);
}

// Large inputs: the sampled threshold and filter pass, the fused reducer as
// the fallback when the filter leaves fewer than k rows.
TEST(TopkFused, LargeInputsWithFilters) {
  GKNN_NEED_GPU();
  for (int64_t k : {1, 100, 1024})
    for (uint32_t keep : kKeeps) {
      check<float, uint32_t>(3000017, k, keep, false, 0);
      check<float, uint32_t>(3000017, k, keep, true, 7);  // ties
    }
}

TEST(TopkFused, WideWords) {
  GKNN_NEED_GPU();
  for (int64_t n : {1000, 300007, 2000003})
    for (int64_t k : {1, 33, 512, 1024})
      for (uint32_t keep : {1000000u, 20000u, 0u}) {
        check<double, uint64_t>(n, k, keep, false, 0);
        check<int64_t, uint64_t>(n, k, keep, true, 5);
      }
}

// k above the bitonic limit: packed words and SampleSelect, filters included.
TEST(TopkFused, LargeK) {
  GKNN_NEED_GPU();
  for (uint32_t keep : {1000000u, 300000u, 100u}) check<float, uint32_t>(1000003, 5000, keep, false, 0);
}

}  // namespace
