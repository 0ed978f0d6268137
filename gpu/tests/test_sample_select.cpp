// SampleSelect (large k): the k smallest packed words, ascending, against
// std::sort of the words on the CPU; the host-side pieces (splitter tree,
// bucket search, stratified sample, bucket choice) and one whole level,
// emulated on the CPU, in CI; and a benchmark table (disabled by default:
// --gtest_also_run_disabled_tests --gtest_filter='*Timing*').
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../select/sample_select.cuh"
#include "gknn/error.h"
#include "gknn/runtime.h"
#include "gpu_env.h"
#include "select_data.h"

namespace {

using gknn::select::sample_select_smallest;
using gknn::select::SampleSelectTuning;
using gknn::select::U128;
using gknn::test::Dist;
namespace ssd = gknn::select::sample_select_detail;

std::string word_str(std::uint64_t w) { return std::to_string(w); }
std::string word_str(const U128& w) { return "{" + std::to_string(w.hi) + ", " + std::to_string(w.lo) + "}"; }

const std::vector<Dist>& dists() {
  static const std::vector<Dist> d = {Dist::Uniform,  Dist::Ascending,   Dist::Descending,
                                      Dist::AllEqual, Dist::FewDistinct, Dist::BucketKiller};
  return d;
}

// Words as select_topk packs them: float keys with a 32-bit row id in one
// uint64_t, double keys with a 64-bit row id in a U128; payload = index.
template <typename Word>
std::vector<Word> make_words(Dist dist, std::int64_t n, unsigned seed);
template <>
std::vector<std::uint64_t> make_words<std::uint64_t>(Dist dist, std::int64_t n, unsigned seed) {
  using P = gknn::select::Packing<float, std::uint32_t>;
  std::vector<float> keys = gknn::test::make_keys<float>(dist, n, seed);
  std::vector<std::uint64_t> w(n);
  for (std::int64_t i = 0; i < n; ++i) w[i] = P::pack(keys[i], std::uint32_t(i), false);
  return w;
}
template <>
std::vector<U128> make_words<U128>(Dist dist, std::int64_t n, unsigned seed) {
  using P = gknn::select::Packing<double, std::uint64_t>;
  std::vector<double> keys = gknn::test::make_keys<double>(dist, n, seed);
  std::vector<U128> w(n);
  for (std::int64_t i = 0; i < n; ++i) w[i] = P::pack(keys[i], std::uint64_t(i), false);
  return w;
}

template <typename Word>
Word word_from(std::uint64_t a, std::uint64_t b);
template <>
std::uint64_t word_from<std::uint64_t>(std::uint64_t a, std::uint64_t) {
  return a;
}
template <>
U128 word_from<U128>(std::uint64_t a, std::uint64_t b) {
  return U128{a, b};
}

template <typename Word>
bool same(const Word& a, const Word& b) {
  return std::memcmp(&a, &b, sizeof(Word)) == 0;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Runs the selection of `k` on `words` (already on the device at d_words,
// possibly at an offset) and compares with the sorted words. A guard after
// the k outputs must stay untouched.
template <typename Word>
void check_k(const Word* d_words, const std::vector<Word>& sorted, std::int64_t k,
             const SampleSelectTuning& tuning, const std::string& what) {
  SCOPED_TRACE(what + " k=" + std::to_string(k));
  constexpr std::int64_t kGuard = 37;
  const std::int64_t n = static_cast<std::int64_t>(sorted.size());
  Word* d_out = nullptr;
  CUDA_OK(cudaMalloc(&d_out, sizeof(Word) * (k + kGuard)));
  CUDA_OK(cudaMemset(d_out, 0xAB, sizeof(Word) * (k + kGuard)));
  try {
    sample_select_smallest(d_words, n, k, d_out, nullptr, tuning);
  } catch (const gknn::Error& e) {
    cudaFree(d_out);
    FAIL() << "threw: " << e.what();
  }
  std::vector<Word> got(k + kGuard);
  CUDA_OK(cudaMemcpy(got.data(), d_out, sizeof(Word) * (k + kGuard), cudaMemcpyDeviceToHost));
  cudaFree(d_out);
  for (std::int64_t i = 0; i < k; ++i)
    ASSERT_TRUE(same(got[i], sorted[i]))
        << "rank " << i << ": got " << word_str(got[i]) << ", want " << word_str(sorted[i]);
  Word poison;
  std::memset(&poison, 0xAB, sizeof(Word));
  for (std::int64_t i = k; i < k + kGuard; ++i) ASSERT_TRUE(same(got[i], poison)) << "wrote past k at " << i;
}

// The k for n, and a random one, each in [1, n], each once.
std::vector<std::int64_t> ks_for(std::int64_t n, std::mt19937_64& rng) {
  std::set<std::int64_t> s;
  for (std::int64_t k :
       {std::int64_t(1), std::int64_t(1025), n / 2, n - 1, n, std::int64_t(1 + rng() % std::uint64_t(n))})
    if (k >= 1 && k <= n) s.insert(k);
  return {s.begin(), s.end()};
}

template <typename Word>
void check_all(const std::vector<std::int64_t>& sizes, const SampleSelectTuning& tuning, unsigned seed,
               const std::vector<Dist>& ds, std::int64_t word_offset = 0) {
  std::mt19937_64 rng(seed);
  for (std::int64_t n : sizes)
    for (Dist d : ds) {
      const std::string what = gknn::test::dist_name(d) + " n=" + std::to_string(n) +
                               (sizeof(Word) == 8 ? " u64" : " u128") +
                               (word_offset ? " offset=" + std::to_string(word_offset) : "");
      std::vector<Word> words = make_words<Word>(d, n, seed++);
      std::vector<Word> sorted = words;
      std::sort(sorted.begin(), sorted.end());
      Word* d_words = nullptr;
      CUDA_OK(cudaMalloc(&d_words, sizeof(Word) * (n + word_offset)));
      CUDA_OK(cudaMemcpy(d_words + word_offset, words.data(), sizeof(Word) * n, cudaMemcpyHostToDevice));
      for (std::int64_t k : ks_for(n, rng)) {
        check_k<Word>(d_words + word_offset, sorted, k, tuning, what);
        if (::testing::Test::HasFatalFailure()) break;
      }
      cudaFree(d_words);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

const std::vector<std::int64_t> kSizes = {1, 1000, 1000003, 4000037};

// ---------------------------------------------------------------- GPU tests

TEST(SampleSelectGpu, Uint64AllSizesDistributionsAndKs) {
  GKNN_NEED_GPU();
  check_all<std::uint64_t>(kSizes, SampleSelectTuning{}, 11, dists());
}

TEST(SampleSelectGpu, U128AllSizesDistributionsAndKs) {
  GKNN_NEED_GPU();
  check_all<U128>(kSizes, SampleSelectTuning{}, 22, dists());
}

// A tiny base case: 4000037 words take three levels (4M -> 16K -> 64 -> sort).
TEST(SampleSelectGpu, SeveralLevels) {
  GKNN_NEED_GPU();
  SampleSelectTuning t;
  t.base_case = 1;  // raised to the minimum, 2 * kSample
  check_all<std::uint64_t>({300007, 4000037}, t, 33, dists());
  check_all<U128>({300007, 4000037}, t, 44, dists());
}

// Input at an address that is not 16-byte aligned: scalar loads.
TEST(SampleSelectGpu, MisalignedInput) {
  GKNN_NEED_GPU();
  check_all<std::uint64_t>({1000003}, SampleSelectTuning{}, 55, {Dist::Uniform, Dist::Ascending}, 1);
}

// Words that repeat (a caller's duplicate payloads): no level can shrink
// them below the repeats, so the base-case sort takes over; still exact.
template <typename Word>
void check_repeated(std::int64_t n, int distinct, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<Word> values(distinct);
  for (auto& v : values) v = word_from<Word>(rng() >> 3, rng());
  std::vector<Word> words(n);
  for (auto& w : words) w = values[rng() % distinct];
  std::vector<Word> sorted = words;
  std::sort(sorted.begin(), sorted.end());
  Word* d_words = nullptr;
  CUDA_OK(cudaMalloc(&d_words, sizeof(Word) * n));
  CUDA_OK(cudaMemcpy(d_words, words.data(), sizeof(Word) * n, cudaMemcpyHostToDevice));
  for (std::int64_t k : ks_for(n, rng)) {
    check_k<Word>(d_words, sorted, k, SampleSelectTuning{}, "repeated distinct=" + std::to_string(distinct));
    if (::testing::Test::HasFatalFailure()) break;
  }
  cudaFree(d_words);
}

TEST(SampleSelectGpu, RepeatedWords) {
  GKNN_NEED_GPU();
  for (int distinct : {1, 5, 1000}) {
    check_repeated<std::uint64_t>(300007, distinct, 66 + distinct);
    if (HasFatalFailure()) return;
    check_repeated<U128>(300007, distinct, 77 + distinct);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleSelectGpu, SortWordsCub) {
  GKNN_NEED_GPU();
  for (std::int64_t n : {std::int64_t(1), std::int64_t(5000), std::int64_t(300007)}) {
    auto run = [&](auto tag) {
      using Word = decltype(tag);
      std::vector<Word> words = make_words<Word>(Dist::Uniform, n, unsigned(n));
      std::vector<Word> sorted = words;
      std::sort(sorted.begin(), sorted.end());
      Word* d = nullptr;
      CUDA_OK(cudaMalloc(&d, sizeof(Word) * n));
      CUDA_OK(cudaMemcpy(d, words.data(), sizeof(Word) * n, cudaMemcpyHostToDevice));
      gknn::select::sort_words_cub(d, n, nullptr);
      CUDA_OK(cudaMemcpy(words.data(), d, sizeof(Word) * n, cudaMemcpyDeviceToHost));
      cudaFree(d);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(words[i], sorted[i])) << "n=" << n << " at " << i;
    };
    run(std::uint64_t{});
    run(U128{});
  }
}

// ---------------------------------------------------------------- CPU tests

TEST(SampleSelectCpu, InvalidSizesThrowBeforeAnyDeviceWork) {
  std::uint64_t* none = nullptr;
  EXPECT_THROW(sample_select_smallest(none, 10, 11, none, nullptr), gknn::Error);
  EXPECT_THROW(sample_select_smallest(none, 10, -1, none, nullptr), gknn::Error);
  EXPECT_THROW(sample_select_smallest(none, -1, 0, none, nullptr), gknn::Error);
  try {
    sample_select_smallest(none, 3, 4, none, nullptr);
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
  }
  EXPECT_NO_THROW(sample_select_smallest(none, 10, 0, none, nullptr));  // k = 0: nothing to do
  EXPECT_NO_THROW(sample_select_smallest(none, 0, 0, none, nullptr));
}

// The heap layout of the splitter tree: an in-order walk (the smaller side
// 2j + 1 first, then j, then 2j) visits the splitters ascending, each once.
void walk_in_order(int j, std::vector<int>& walk) {
  if (j >= ssd::kBuckets) return;
  walk_in_order(2 * j + 1, walk);
  walk.push_back(ssd::tree_node_rank(j));
  walk_in_order(2 * j, walk);
}

TEST(SampleSelectCpu, TreeLayoutIsInOrder) {
  std::vector<int> walk;
  walk_in_order(1, walk);
  ASSERT_EQ(walk.size(), std::size_t(ssd::kSplitters));
  for (int i = 0; i < ssd::kSplitters; ++i) EXPECT_EQ(walk[i], i);
  EXPECT_EQ(ssd::tree_node_rank(1), 127);  // the median at the root
  EXPECT_EQ(ssd::tree_node_rank(2), 191);  // words >= it go to 2j
  EXPECT_EQ(ssd::tree_node_rank(3), 63);   // words below it to 2j + 1
  EXPECT_EQ(ssd::tree_node_rank(128), 254);
  EXPECT_EQ(ssd::tree_node_rank(255), 0);
}

TEST(SampleSelectCpu, SplitterRanksAreQuantiles) {
  for (int i = 0; i < ssd::kSplitters; ++i) {
    EXPECT_EQ(ssd::splitter_sample_rank(i), (i + 1) * ssd::kSample / ssd::kBuckets);
    if (i) {
      EXPECT_LT(ssd::splitter_sample_rank(i - 1), ssd::splitter_sample_rank(i));
    }
  }
  EXPECT_LT(ssd::splitter_sample_rank(ssd::kSplitters - 1), ssd::kSample);
}

template <typename Word>
std::vector<Word> tree_of(const std::vector<Word>& splitters) {
  std::vector<Word> tree(ssd::kBuckets, splitters[0]);  // entry 0 unused
  for (int j = 1; j < ssd::kBuckets; ++j) tree[j] = splitters[ssd::tree_node_rank(j)];
  return tree;
}

// The descent the count kernel runs is std::upper_bound over the splitters,
// on values between, equal to, and beside every splitter (U128 splitters
// share high halves, so the low half decides).
TEST(SampleSelectCpu, BucketOfIsUpperBound) {
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> s64(ssd::kSplitters);
  for (auto& s : s64) s = rng() >> 1;
  std::sort(s64.begin(), s64.end());
  std::vector<U128> s128(ssd::kSplitters);
  for (int i = 0; i < ssd::kSplitters; ++i) s128[i] = U128{std::uint64_t(i / 16), rng() >> 1};
  std::sort(s128.begin(), s128.end());
  const auto t64 = tree_of(s64);
  const auto t128 = tree_of(s128);
  std::vector<std::uint64_t> probes64 = {0, ~0ull};
  std::vector<U128> probes128 = {U128{0, 0}, U128{~0ull, ~0ull}};
  for (int i = 0; i < ssd::kSplitters; ++i) {
    probes64.insert(probes64.end(), {s64[i], s64[i] - 1, s64[i] + 1});
    probes128.insert(probes128.end(), {s128[i], U128{s128[i].hi, s128[i].lo - 1},
                                       U128{s128[i].hi, s128[i].lo + 1}, U128{s128[i].hi + 1, 0}});
  }
  for (int i = 0; i < 10000; ++i) {
    probes64.push_back(rng() >> 1);
    probes128.push_back(U128{rng() % 17, rng() >> 1});
  }
  for (auto p : probes64)
    ASSERT_EQ(ssd::bucket_of(t64.data(), p), std::upper_bound(s64.begin(), s64.end(), p) - s64.begin()) << p;
  for (auto p : probes128)
    ASSERT_EQ(ssd::bucket_of(t128.data(), p), std::upper_bound(s128.begin(), s128.end(), p) - s128.begin())
        << word_str(p);
}

// One sample per equal stratum, inside it, deterministic.
TEST(SampleSelectCpu, SamplePositionsAreStratified) {
  for (std::int64_t m : {std::int64_t(ssd::kSample), std::int64_t(ssd::kSample + 1), std::int64_t(8193),
                         std::int64_t(1000003), std::int64_t(1) << 29, std::int64_t(1) << 40})
    for (std::uint32_t seed : {0u, 0x9e3779b9u}) {
      std::int64_t prev = -1;
      for (int j = 0; j < ssd::kSample; ++j) {
        const std::int64_t p = ssd::sample_position(m, j, seed);
        ASSERT_GE(p, m * j / ssd::kSample) << m;
        ASSERT_LT(p, m * (j + 1) / ssd::kSample) << m;
        ASSERT_GT(p, prev);
        ASSERT_EQ(p, ssd::sample_position(m, j, seed));
        prev = p;
      }
    }
}

TEST(SampleSelectCpu, ChooseBucket) {
  unsigned long long prefix[ssd::kBuckets + 1];
  // 10 words per bucket.
  for (int b = 0; b <= ssd::kBuckets; ++b) prefix[b] = 10ull * b;
  auto c = ssd::choose_bucket(prefix, 1);
  EXPECT_EQ(c.bucket, 0);
  EXPECT_EQ(c.below, 0);
  EXPECT_EQ(c.in_bucket, 10);
  EXPECT_FALSE(c.whole);
  c = ssd::choose_bucket(prefix, 10);
  EXPECT_EQ(c.bucket, 0);
  EXPECT_TRUE(c.whole);
  c = ssd::choose_bucket(prefix, 11);
  EXPECT_EQ(c.bucket, 1);
  EXPECT_EQ(c.below, 10);
  EXPECT_FALSE(c.whole);
  c = ssd::choose_bucket(prefix, 2560);
  EXPECT_EQ(c.bucket, 255);
  EXPECT_EQ(c.below, 2550);
  EXPECT_TRUE(c.whole);
  // Empty buckets are skipped: all words in buckets 3 and 200.
  for (int b = 0; b <= ssd::kBuckets; ++b) prefix[b] = b <= 3 ? 0 : (b <= 200 ? 5 : 12);
  c = ssd::choose_bucket(prefix, 1);
  EXPECT_EQ(c.bucket, 3);
  EXPECT_EQ(c.in_bucket, 5);
  c = ssd::choose_bucket(prefix, 5);
  EXPECT_EQ(c.bucket, 3);
  EXPECT_TRUE(c.whole);
  c = ssd::choose_bucket(prefix, 6);
  EXPECT_EQ(c.bucket, 200);
  EXPECT_EQ(c.below, 5);
  EXPECT_EQ(c.in_bucket, 7);
  EXPECT_FALSE(c.whole);
}

// One level emulated on the CPU with the kernels' own helpers (sample,
// splitters, tree, descent, bucket choice) on every distribution: because
// the words are distinct, every bucket holds about m/256 words, so the
// recursion shrinks ~256x per level on any input. The kernels compute the
// same buckets, so this is the distribution-independence claim, checked in CI.
template <typename Word>
void check_level_shrinks(Dist d, std::int64_t m, unsigned seed) {
  SCOPED_TRACE(gknn::test::dist_name(d) + (sizeof(Word) == 8 ? " u64" : " u128"));
  const std::vector<Word> words = make_words<Word>(d, m, seed);
  std::vector<Word> sample(ssd::kSample);
  for (int j = 0; j < ssd::kSample; ++j) sample[j] = words[ssd::sample_position(m, j, 0)];
  std::sort(sample.begin(), sample.end());
  std::vector<Word> splitters(ssd::kSplitters);
  for (int i = 0; i < ssd::kSplitters; ++i) splitters[i] = sample[ssd::splitter_sample_rank(i)];
  const std::vector<Word> tree = tree_of(splitters);
  std::vector<std::int64_t> count(ssd::kBuckets, 0);
  for (const Word& w : words) ++count[ssd::bucket_of(tree.data(), w)];
  unsigned long long prefix[ssd::kBuckets + 1] = {0};
  for (int b = 0; b < ssd::kBuckets; ++b) prefix[b + 1] = prefix[b] + count[b];
  ASSERT_EQ(prefix[ssd::kBuckets], static_cast<unsigned long long>(m));
  const std::int64_t largest = *std::max_element(count.begin(), count.end());
  EXPECT_LE(largest, m / 64) << "largest bucket " << largest << " of " << m;  // expected ~m/256
  for (std::int64_t need : {std::int64_t(1), m / 3, m / 2, m - 1}) {
    const auto c = ssd::choose_bucket(prefix, need);
    EXPECT_LT(c.below, need);
    EXPECT_LE(need, c.below + c.in_bucket);
    EXPECT_LE(c.in_bucket, m / 64);
  }
}

TEST(SampleSelectCpu, LevelShrinksOnEveryDistribution) {
  unsigned seed = 90;
  for (Dist d : dists()) {
    check_level_shrinks<std::uint64_t>(d, 1000003, seed++);
    check_level_shrinks<U128>(d, 1000003, seed++);
  }
}

// ---------------------------------------------------------------- benchmark

// n = 2^29 uint64 words (GKNN_SS_BENCH_LOG2N overrides), k in {2048, 65536,
// 2^20, 2^28}: SampleSelect vs a CUB radix sort of all the words; median of
// 3 timed runs after a warm-up, cudaEvent timing; every result checked
// against the sorted words. The stream-ordered pool keeps its memory between
// runs (release threshold raised), so both sides time kernels, not cudaMalloc.
float median3(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(SampleSelectBench, DISABLED_TimingTable) {
  GKNN_NEED_GPU();
  const int log2n = std::getenv("GKNN_SS_BENCH_LOG2N") ? std::atoi(std::getenv("GKNN_SS_BENCH_LOG2N")) : 29;
  const std::int64_t n = std::int64_t(1) << log2n;
  const auto devices = gknn::list_devices();
  cudaMemPool_t pool;
  CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, 0));
  std::uint64_t threshold = ~0ull;
  CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  auto elapsed = [&] {
    float ms = 0;
    cudaEventSynchronize(t1);
    cudaEventElapsedTime(&ms, t0, t1);
    return ms;
  };

  std::uint64_t *d_in = nullptr, *d_sorted = nullptr, *d_out = nullptr;
  std::vector<std::int64_t> ks;
  for (std::int64_t k :
       {std::int64_t(2048), std::int64_t(65536), std::int64_t(1) << 20, std::int64_t(1) << 28})
    if (k <= n) ks.push_back(k);
  CUDA_OK(cudaMalloc(&d_in, 8 * n));
  CUDA_OK(cudaMalloc(&d_sorted, 8 * n));
  CUDA_OK(cudaMalloc(&d_out, 8 * ks.back()));
  std::vector<std::uint64_t> host(n);

  // Read floor: a device-to-device copy reads and writes n words.
  std::vector<float> copy_ms;
  for (int r = 0; r < 4; ++r) {
    cudaEventRecord(t0, stream);
    cudaMemcpyAsync(d_sorted, d_in, 8 * n, cudaMemcpyDeviceToDevice, stream);
    cudaEventRecord(t1, stream);
    copy_ms.push_back(elapsed());
  }
  copy_ms.erase(copy_ms.begin());
  const float floor_ms = median3(copy_ms) / 2;  // one read of the input at copy bandwidth

  struct Row {
    std::string dist;
    std::int64_t k;
    float ours, sort;
    bool ok;
  };
  std::vector<Row> rows;
  const char* names[] = {"uniform", "sorted", "all-equal key"};
  for (int dist = 0; dist < 3; ++dist) {
    // uniform: random 32-bit key, payload = index; sorted: key = index;
    // all-equal: key 1.0f (ordered bits), payload = index.
    const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> gen;
    for (unsigned t = 0; t < nt; ++t)
      gen.emplace_back([&, t] {
        for (std::int64_t i = n * t / nt; i < n * (t + 1) / nt; ++i) {
          std::uint64_t key;
          if (dist == 0) {
            std::uint64_t h = std::uint64_t(i) * 0x9e3779b97f4a7c15ull;
            h ^= h >> 31;
            h *= 0xbf58476d1ce4e5b9ull;
            h ^= h >> 29;
            key = h >> 32;
          } else if (dist == 1) {
            key = std::uint64_t(i);
          } else {
            key = 0x3f800000ull | 0x80000000ull;
          }
          host[i] = (key << 32) | std::uint64_t(i);
        }
      });
    for (auto& g : gen) g.join();
    CUDA_OK(cudaMemcpy(d_in, host.data(), 8 * n, cudaMemcpyHostToDevice));
    std::vector<float> sort_ms;
    for (int r = 0; r < 4; ++r) {
      CUDA_OK(cudaMemcpyAsync(d_sorted, d_in, 8 * n, cudaMemcpyDeviceToDevice, stream));
      cudaEventRecord(t0, stream);
      gknn::select::sort_words_cub(d_sorted, n, stream);
      cudaEventRecord(t1, stream);
      sort_ms.push_back(elapsed());
    }
    sort_ms.erase(sort_ms.begin());  // warm-up
    const float sort = median3(sort_ms);
    for (std::int64_t k : ks) {
      std::vector<float> ms;
      for (int r = 0; r < 4; ++r) {
        cudaEventRecord(t0, stream);
        sample_select_smallest(static_cast<const std::uint64_t*>(d_in), n, k, d_out, stream);
        cudaEventRecord(t1, stream);
        ms.push_back(elapsed());
      }
      ms.erase(ms.begin());
      // Where the time goes, once per configuration.
      setenv("GKNN_SAMPLE_SELECT_TRACE", "1", 1);
      std::fprintf(stderr, "--- trace: %s n=2^%d k=%lld\n", names[dist], log2n, (long long)k);
      sample_select_smallest(static_cast<const std::uint64_t*>(d_in), n, k, d_out, stream);
      unsetenv("GKNN_SAMPLE_SELECT_TRACE");
      std::vector<std::uint64_t> got(k), want(k);
      CUDA_OK(cudaMemcpy(got.data(), d_out, 8 * k, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(want.data(), d_sorted, 8 * k, cudaMemcpyDeviceToHost));
      const bool ok = got == want;
      EXPECT_TRUE(ok) << names[dist] << " k=" << k;
      rows.push_back({names[dist], k, median3(ms), sort, ok});
    }
  }
  cudaFree(d_in);
  cudaFree(d_sorted);
  cudaFree(d_out);
  cudaStreamDestroy(stream);

  std::printf("\nSampleSelect, n = 2^%d uint64 words (%.1f GB), device: %s\n", log2n, 8.0 * n / 1e9,
              devices.empty() ? "?" : devices[0].name.c_str());
  std::printf("read floor (one read of the input at the D2D copy bandwidth): %.3f ms\n", floor_ms);
  std::printf(
      "| input | k | SampleSelect ms | CUB radix sort ms | speedup vs sort | %% of read floor | exact |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (const Row& r : rows)
    std::printf("| %s | %lld | %.3f | %.3f | %.1fx | %.0f%% | %s |\n", r.dist.c_str(), (long long)r.k, r.ours,
                r.sort, r.sort / r.ours, 100.0 * floor_ms / r.ours, r.ok ? "yes" : "NO");
}

}  // namespace
