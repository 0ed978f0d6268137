// Batched row selection (WarpSelect / BlockSelect / partitioned rows): the GPU
// against select_rows_cpu, which states the contract as a sort; the odd-size
// merging networks on an emulated warp; argument checks. The GPU tests skip
// without a GPU (and fail with GKNN_REQUIRE_GPU=1).
//
// GKNN_SELECT_ROWS_BENCH=1 turns SelectRowsBench.Table into a small timing
// table (cudaEvents, warm-up, median of 5).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../select/merge_network.cuh"
#include "gknn/error.h"
#include "gknn/runtime.h"
#include "gknn/select.h"
#include "gpu_env.h"
#include "select_data.h"

namespace {

using gknn::SelectOrder;
using gknn::test::Dist;

// ---------------------------------------------------------------------------
// CPU: the reference itself on a hand-checked example.
TEST(SelectRowsCpu, OrderTiesAndPadding) {
  const float nan = std::nanf("");
  // Row 0: NaN above +inf, -0 == +0 (ties by column), two rows with ld = 5.
  std::vector<float> keys = {2.0f, -0.0f, nan,  0.0f, -1.0f,  //
                             7.0f, 7.0f,  7.0f, 0.0f, 0.0f};
  std::vector<float> ok(2 * 4);
  std::vector<std::uint32_t> op(2 * 4);
  gknn::select_rows_cpu<float, std::uint32_t>(keys.data(), 2, 3, 5, 4, SelectOrder::Smallest, ok.data(),
                                              op.data());
  // Row 0 has 3 keys (2, -0, NaN): -0 first (as +0), 2, NaN, then padding.
  EXPECT_EQ(op[0], 1u);
  EXPECT_FALSE(std::signbit(ok[0]));
  EXPECT_EQ(op[1], 0u);
  EXPECT_EQ(op[2], 2u);
  EXPECT_TRUE(std::isnan(ok[2]) && !std::signbit(ok[2]));
  EXPECT_EQ(op[3], ~0u);
  // Row 1: three equal keys, by column.
  EXPECT_EQ((std::vector<std::uint32_t>(op.begin() + 4, op.begin() + 7)),
            (std::vector<std::uint32_t>{0, 1, 2}));
  gknn::select_rows_cpu<float, std::uint32_t>(keys.data(), 2, 5, 5, 4, SelectOrder::Largest, ok.data(),
                                              op.data());
  EXPECT_EQ((std::vector<std::uint32_t>(op.begin(), op.begin() + 4)),
            (std::vector<std::uint32_t>{2, 0, 1, 3}));
}

// ---------------------------------------------------------------------------
// CPU: the networks of WarpSelect, on a warp emulated with 32-element vectors.
namespace rs = gknn::rowsel;

template <typename W>
W random_word(std::mt19937_64& rng, int spread);

template <>
std::uint64_t random_word<std::uint64_t>(std::mt19937_64& rng, int spread) {
  // Few distinct keys and columns, so equal words occur too.
  return (std::uint64_t(rng() % spread) << 32) | std::uint64_t(rng() % spread);
}
template <>
rs::W96 random_word<rs::W96>(std::mt19937_64& rng, int spread) {
  return rs::W96{rng() % spread, std::uint32_t(rng() % spread), 0};
}

template <typename W>
bool word_lt(const W& a, const W& b) {
  return rs::wless(a, b);
}

template <typename W, int N>
std::vector<W> flatten(const typename rs::HostNet<W>::Reg (&x)[N], int from = 0, int n = N) {
  std::vector<W> v;
  for (int r = from; r < from + n; ++r)
    for (int l = 0; l < 32; ++l) v.push_back(x[r].v[l]);
  return v;
}

template <typename W>
bool same_words(const std::vector<W>& a, const std::vector<W>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!rs::wequal(a[i], b[i])) return false;
  return true;
}

template <typename W, int N>
void check_sort_odd(std::mt19937_64& rng) {
  using Net = rs::HostNet<W>;
  for (int trial = 0; trial < 20; ++trial) {
    typename Net::Reg x[N];
    const int spread = trial % 2 ? 7 : 1 << 20;
    for (auto& r : x)
      for (auto& w : r.v) w = random_word<W>(rng, spread);
    std::vector<W> want = flatten<W, N>(x);
    std::sort(want.begin(), want.end(), word_lt<W>);
    rs::sort_odd<Net, 0, N>(x);
    ASSERT_TRUE(same_words(flatten<W, N>(x), want)) << "sort_odd N=" << N;
  }
}

template <typename W, int NL, int NR>
void check_merge_odd(std::mt19937_64& rng) {
  using Net = rs::HostNet<W>;
  for (int trial = 0; trial < 10; ++trial) {
    typename Net::Reg x[NL + NR];
    const int spread = trial % 2 ? 5 : 1 << 20;
    for (auto& r : x)
      for (auto& w : r.v) w = random_word<W>(rng, spread);
    rs::sort_odd<Net, 0, NL>(x);
    rs::sort_odd<Net, NL, NR>(x);
    std::vector<W> want = flatten<W, NL + NR>(x);
    std::sort(want.begin(), want.end(), word_lt<W>);
    rs::merge_odd<Net, 0, NL, NR>(x);
    ASSERT_TRUE(same_words(flatten<W, NL + NR>(x), want)) << "merge_odd " << NL << "+" << NR;
  }
}

template <typename W, int NW, int NB>
void check_merge_into(std::mt19937_64& rng) {
  using Net = rs::HostNet<W>;
  for (int trial = 0; trial < 10; ++trial) {
    typename Net::Reg w[NW], b[NB];
    const int spread = trial % 2 ? 5 : 1 << 20;
    for (auto& r : w)
      for (auto& x : r.v) x = random_word<W>(rng, spread);
    for (auto& r : b)
      for (auto& x : r.v) x = random_word<W>(rng, spread);
    rs::sort_odd<Net, 0, NW>(w);
    rs::sort_odd<Net, 0, NB>(b);
    std::vector<W> want = flatten<W, NW>(w), bb = flatten<W, NB>(b);
    want.insert(want.end(), bb.begin(), bb.end());
    std::sort(want.begin(), want.end(), word_lt<W>);
    want.resize(32 * NW);
    rs::merge_into<Net, NW, NB>(w, b);
    ASSERT_TRUE(same_words(flatten<W, NW>(w), want)) << "merge_into " << NW << " <- " << NB;
  }
}

template <typename W>
void check_networks() {
  std::mt19937_64 rng(42);
  check_sort_odd<W, 1>(rng);
  check_sort_odd<W, 2>(rng);
  check_sort_odd<W, 3>(rng);
  check_sort_odd<W, 4>(rng);
  check_sort_odd<W, 5>(rng);
  check_sort_odd<W, 6>(rng);
  check_sort_odd<W, 7>(rng);
  check_sort_odd<W, 8>(rng);
  check_sort_odd<W, 9>(rng);
  check_merge_odd<W, 1, 1>(rng);
  check_merge_odd<W, 1, 2>(rng);
  check_merge_odd<W, 2, 1>(rng);
  check_merge_odd<W, 3, 5>(rng);
  check_merge_odd<W, 5, 3>(rng);
  check_merge_odd<W, 4, 4>(rng);
  check_merge_odd<W, 6, 2>(rng);
  check_merge_odd<W, 7, 6>(rng);
  check_merge_into<W, 1, 2>(rng);
  check_merge_into<W, 2, 3>(rng);
  check_merge_into<W, 3, 2>(rng);
  check_merge_into<W, 4, 4>(rng);
  check_merge_into<W, 4, 8>(rng);
  check_merge_into<W, 8, 8>(rng);
  check_merge_into<W, 5, 3>(rng);
  check_merge_into<W, 16, 8>(rng);
  check_merge_into<W, 32, 8>(rng);
  check_merge_into<W, 64, 8>(rng);
}

TEST(SelectRowsNetwork, OddSizeSortAndMerge64) { check_networks<std::uint64_t>(); }
TEST(SelectRowsNetwork, OddSizeSortAndMerge96) { check_networks<rs::W96>(); }

// ---------------------------------------------------------------------------
// Argument checks come before any CUDA call, so they run here too.
TEST(SelectRowsGpu, RejectsBadArguments) {
  float* p = reinterpret_cast<float*>(16);
  std::uint32_t* q = reinterpret_cast<std::uint32_t*>(16);
  auto code = [&](auto fn) {
    try {
      fn();
    } catch (const gknn::Error& e) {
      return int(e.code());
    }
    return -1;
  };
  const int bad = int(gknn::ErrorCode::InvalidArgument);
  auto sel = gknn::select_rows_gpu<float, std::uint32_t>;
  EXPECT_EQ(code([&] { sel(p, 1, 10, 10, 0, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, 1, 10, 10, gknn::kMaxRowK + 1, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, -1, 10, 10, 5, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, 1, -10, 10, 5, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, 3, 10, 9, 5, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, 1, std::int64_t(1) << 32, 0, 5, SelectOrder::Smallest, p, q, nullptr); }), bad);
  EXPECT_EQ(code([&] { sel(p, 2, 10, 10, 5, SelectOrder::Smallest, nullptr, q, nullptr); }), bad);
}

// ---------------------------------------------------------------------------
// GPU against the CPU reference.
template <typename Key>
bool same_key(Key a, Key b) {
  return std::memcmp(&a, &b, sizeof(Key)) == 0;
}

// The best key for an order: what a kernel reading past a row would pick up.
template <typename Key>
Key poison(SelectOrder order) {
  if (std::is_floating_point<Key>::value)
    return order == SelectOrder::Smallest ? -std::numeric_limits<Key>::infinity()
                                          : std::numeric_limits<Key>::quiet_NaN();
  return order == SelectOrder::Smallest ? std::numeric_limits<Key>::min() : std::numeric_limits<Key>::max();
}

template <typename T>
struct DevMem {
  T* p = nullptr;
  explicit DevMem(std::size_t n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T)) != cudaSuccess)
      p = nullptr;
  }
  ~DevMem() {
    if (p) cudaFree(p);
  }
};

template <typename Key, typename Payload>
::testing::AssertionResult check_rows(const std::vector<Key>& keys, std::int64_t nq, std::int64_t len,
                                      std::int64_t ld, int k, SelectOrder order) {
  const std::size_t nout = std::size_t(nq) * k;
  std::vector<Key> rk(nout), gk(nout);
  std::vector<Payload> rp(nout), gp(nout);
  gknn::select_rows_cpu<Key, Payload>(keys.data(), nq, len, ld, k, order, rk.data(), rp.data());
  DevMem<Key> dkeys(keys.size()), dok(nout);
  DevMem<Payload> dop(nout);
  if (!dkeys.p || !dok.p || !dop.p) return ::testing::AssertionFailure() << "cudaMalloc failed";
  if (cudaMemcpy(dkeys.p, keys.data(), keys.size() * sizeof(Key), cudaMemcpyHostToDevice) != cudaSuccess)
    return ::testing::AssertionFailure() << "copy in failed";
  try {
    gknn::select_rows_gpu<Key, Payload>(dkeys.p, nq, len, ld, k, order, dok.p, dop.p, nullptr);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "select_rows_gpu threw: " << e.what();
  }
  if (cudaMemcpy(gk.data(), dok.p, nout * sizeof(Key), cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(gp.data(), dop.p, nout * sizeof(Payload), cudaMemcpyDeviceToHost) != cudaSuccess)
    return ::testing::AssertionFailure() << "copy out failed";
  int bad = 0;
  ::testing::AssertionResult res = ::testing::AssertionFailure();
  for (std::size_t i = 0; i < nout; ++i) {
    if (same_key(rk[i], gk[i]) && rp[i] == gp[i]) continue;
    if (bad++ < 3)
      res << "\n  row " << i / k << " rank " << i % k << ": want (" << rk[i] << ", " << rp[i] << ") got ("
          << gk[i] << ", " << gp[i] << ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return res << "\n  " << bad << " of " << nout << " outputs differ";
}

template <typename Key>
std::vector<Key> make_rows(Dist dist, std::int64_t nq, std::int64_t len, std::int64_t ld, unsigned seed,
                           SelectOrder order) {
  std::vector<Key> all = gknn::test::make_keys<Key>(dist, std::max<std::int64_t>(nq * ld, 1), seed);
  if (dist == Dist::Ascending || dist == Dist::Descending) {  // sorted within each row
    for (std::int64_t r = 0; r < nq; ++r) {
      auto b = all.begin() + r * ld, e = b + len;
      if (dist == Dist::Ascending)
        std::sort(b, e);
      else
        std::sort(b, e, [](Key x, Key y) { return y < x; });
    }
  }
  if (ld > len)  // the gaps between rows hold the best key: reading them is an error
    for (std::int64_t r = 0; r < nq; ++r)
      for (std::int64_t c = len; c < ld; ++c) all[r * ld + c] = poison<Key>(order);
  return all;
}

template <typename Key, typename Payload>
void run_case(Dist dist, std::int64_t nq, std::int64_t len, std::int64_t ld, int k, SelectOrder order,
              unsigned seed) {
  const std::vector<Key> keys = make_rows<Key>(dist, nq, len, ld, seed, order);
  EXPECT_TRUE((check_rows<Key, Payload>(keys, nq, len, ld, k, order)))
      << gknn::test::dist_name(dist) << " nq=" << nq << " len=" << len << " ld=" << ld << " k=" << k
      << (order == SelectOrder::Smallest ? " smallest" : " largest") << " key=" << sizeof(Key)
      << "B payload=" << sizeof(Payload) << "B";
}

const int kAllK[] = {1, 2, 31, 32, 33, 100, 255, 256, 1000, 1024, 2048};

TEST(SelectRowsGpu, UniformSizesAndK) {
  GKNN_NEED_GPU();
  unsigned seed = 1;
  for (std::int64_t len : {1, 31, 33, 1000, 4097, 100003})
    for (std::int64_t nq : {1, 3, 100})
      for (int k : kAllK) {
        if (nq * len > 1000000 && k != 1 && k != 33 && k != 256 && k != 1000 && k != 2048) continue;
        run_case<float, std::uint32_t>(Dist::Uniform, nq, len, len, k, SelectOrder::Smallest, seed++);
        if (HasFailure()) return;
      }
  for (std::int64_t len : {33, 4097, 100003})
    for (int k : kAllK)
      run_case<float, std::uint32_t>(Dist::Uniform, 3, len, len, k, SelectOrder::Largest, seed++);
}

TEST(SelectRowsGpu, Distributions) {
  GKNN_NEED_GPU();
  unsigned seed = 100;
  for (Dist d : gknn::test::all_dists())
    for (SelectOrder order : {SelectOrder::Smallest, SelectOrder::Largest})
      for (std::int64_t len : {33, 4097, 100003})
        for (int k : {1, 32, 100, 1000, 2048}) {
          run_case<float, std::uint32_t>(d, 3, len, len, k, order, seed++);
          if (len == 4097) run_case<float, std::uint64_t>(d, 2, len, len, k, order, seed++);
          if (HasFailure()) return;
        }
}

template <typename Key, typename Payload>
void key_type_sweep(unsigned seed) {
  for (Dist d : {Dist::Uniform, Dist::FewDistinct, Dist::Descending, Dist::NonFinite, Dist::SignedZeros})
    for (SelectOrder order : {SelectOrder::Smallest, SelectOrder::Largest})
      for (int k : {1, 31, 256, 1024, 2048}) {
        run_case<Key, Payload>(d, 5, 1000, 1000, k, order, seed++);
        run_case<Key, Payload>(d, 2, 100003, 100003, k, order, seed++);
        if (::testing::Test::HasFailure()) return;
      }
}

TEST(SelectRowsGpu, KeyAndPayloadTypes) {
  GKNN_NEED_GPU();
  key_type_sweep<float, std::uint64_t>(1000);
  key_type_sweep<double, std::uint32_t>(2000);
  key_type_sweep<double, std::uint64_t>(3000);
  key_type_sweep<std::int32_t, std::uint32_t>(4000);
  key_type_sweep<std::int32_t, std::uint64_t>(5000);
  key_type_sweep<std::int64_t, std::uint32_t>(6000);
  key_type_sweep<std::int64_t, std::uint64_t>(7000);
}

// Rows that do not start on 16 bytes, and gaps between rows (poisoned).
TEST(SelectRowsGpu, StridedUnalignedRows) {
  GKNN_NEED_GPU();
  unsigned seed = 9000;
  for (std::int64_t pad : {1, 3, 17})
    for (int k : {1, 100, 1024}) {
      for (SelectOrder order : {SelectOrder::Smallest, SelectOrder::Largest}) {
        run_case<float, std::uint32_t>(Dist::Uniform, 7, 5000, 5000 + pad, k, order, seed++);
        run_case<double, std::uint64_t>(Dist::Uniform, 7, 5000, 5000 + pad, k, order, seed++);
        run_case<std::int32_t, std::uint32_t>(Dist::FewDistinct, 300, 257, 257 + pad, k, order, seed++);
      }
    }
}

TEST(SelectRowsGpu, EmptyRowsArePadding) {
  GKNN_NEED_GPU();
  run_case<float, std::uint32_t>(Dist::Uniform, 4, 0, 0, 7, SelectOrder::Smallest, 1);
  run_case<std::int64_t, std::uint64_t>(Dist::Uniform, 3, 0, 5, 2048, SelectOrder::Largest, 2);
}

// One huge row and a few long ones: the partitioned mode (with its shared
// radius) and the pass over the partial results.
TEST(SelectRowsGpu, HugeRows) {
  GKNN_NEED_GPU();
  unsigned seed = 7000;
  for (Dist d : {Dist::Uniform, Dist::Descending, Dist::BucketKiller})
    for (SelectOrder order : {SelectOrder::Smallest, SelectOrder::Largest})
      for (int k : {1, 100, 2048}) {
        run_case<float, std::uint32_t>(d, 1, 3000017, 3000017, k, order, seed++);
        if (HasFailure()) return;
      }
  run_case<float, std::uint64_t>(Dist::Uniform, 2, 1000003, 1000003, 700, SelectOrder::Smallest, seed++);
  run_case<double, std::uint32_t>(Dist::Uniform, 2, 1000003, 1000003, 1500, SelectOrder::Largest, seed++);
  run_case<std::int64_t, std::uint64_t>(Dist::FewDistinct, 1, 1000003, 1000003, 64, SelectOrder::Smallest,
                                        seed++);
}

// Every plan (warps per row x parts per row) on every bucket, whatever the
// planner would pick: GKNN_ROWSEL_PLAN="G,P" forces one.
TEST(SelectRowsGpu, ForcedPlans) {
  GKNN_NEED_GPU();
  unsigned seed = 8000;
  for (const char* plan : {"1,1", "2,1", "4,1", "1,3", "2,5", "4,17"}) {
    setenv("GKNN_ROWSEL_PLAN", plan, 1);
    for (int k : {1, 20, 40, 100, 200, 300, 700, 1500})
      for (Dist d : {Dist::Uniform, Dist::Descending}) {
        run_case<float, std::uint32_t>(d, 5, 50001, 50001, k, SelectOrder::Smallest, seed++);
        run_case<double, std::uint32_t>(d, 3, 20001, 20003, k, SelectOrder::Largest, seed++);
      }
    run_case<float, std::uint32_t>(Dist::Uniform, 3, 200003, 200003, 2048, SelectOrder::Smallest, seed++);
    run_case<std::int64_t, std::uint64_t>(Dist::Uniform, 3, 100003, 100003, 2048, SelectOrder::Largest,
                                          seed++);
    unsetenv("GKNN_ROWSEL_PLAN");
    if (HasFailure()) return;
  }
}

// The other queue implementations (float keys only): the shared queue with
// half tiles, and the paper's register queues (lane-stride warp queue with
// odd-size networks; per-lane thread queues), kept for comparison.
TEST(SelectRowsGpu, QueueVariants) {
  GKNN_NEED_GPU();
  unsigned seed = 11000;
  for (const char* queue : {"smem2", "regs", "thread"}) {
    setenv("GKNN_ROWSEL_QUEUE", queue, 1);
    for (int k : {2, 33, 64, 100, 200, 256, 500, 1000, 2048})
      for (Dist d : {Dist::Uniform, Dist::Descending, Dist::FewDistinct}) {
        run_case<float, std::uint32_t>(d, 9, 30001, 30001, k, SelectOrder::Smallest, seed++);
        run_case<float, std::uint64_t>(d, 2, 100003, 100005, k, SelectOrder::Largest, seed++);
      }
    setenv("GKNN_ROWSEL_PLAN", "4,3", 1);
    for (int k : {40, 300, 1500})
      run_case<float, std::uint32_t>(Dist::Uniform, 3, 100003, 100003, k, SelectOrder::Smallest, seed++);
    unsetenv("GKNN_ROWSEL_PLAN");
    unsetenv("GKNN_ROWSEL_QUEUE");
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// Timing table (not a test of speed: runs only when asked).
TEST(SelectRowsBench, Table) {
  const char* want = std::getenv("GKNN_SELECT_ROWS_BENCH");
  if (!want || std::strcmp(want, "1") != 0) GTEST_SKIP() << "set GKNN_SELECT_ROWS_BENCH=1";
  GKNN_NEED_GPU();
  const auto dev = gknn::list_devices().front();

  struct Shape {
    std::int64_t nq, len;
    int k;
  };
  std::vector<Shape> shapes;
  for (std::int64_t len : {1000, 32000, 128000})
    for (int k : {100, 1000}) shapes.push_back({10000, len, k});
  for (int k : {1, 32, 256, 2048}) shapes.push_back({10000, 32000, k});
  for (int k : {1, 100, 1000}) shapes.push_back({1, 100000000, k});
  for (int k : {100, 1000}) shapes.push_back({100, 1000000, k});
  // GKNN_SELECT_ROWS_BENCH_SHAPE="nq,len,k": that shape alone (for a profiler).
  if (const char* one = std::getenv("GKNN_SELECT_ROWS_BENCH_SHAPE")) {
    long long nq = 0, len = 0;
    int k = 0;
    if (std::sscanf(one, "%lld,%lld,%d", &nq, &len, &k) == 3) shapes = {{nq, len, k}};
  }

  std::size_t most = 0;
  for (auto& s : shapes) most = std::max<std::size_t>(most, std::size_t(s.nq * s.len));
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, most * sizeof(float)), cudaSuccess);
  // Two random blocks from the host, tiled (shifted) over the device buffer.
  const std::size_t block = std::size_t(1) << 24;
  {
    std::vector<float> h(2 * block);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (auto& x : h) x = u(rng);
    ASSERT_EQ(cudaMemcpy(d, h.data(), std::min(2 * block, most) * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    for (std::size_t at = 2 * block; at < most; at += block)
      ASSERT_EQ(cudaMemcpy(d + at, d + (at / block % 7) * 1024, std::min(block, most - at) * sizeof(float),
                           cudaMemcpyDeviceToDevice),
                cudaSuccess);
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto median_ms = [&](auto fn) {
    fn();
    std::vector<float> t;
    for (int i = 0; i < 5; ++i) {
      cudaEventRecord(e0);
      fn();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[2];
  };
  // Copy bandwidth (read + write) in the same run, as a reference.
  const std::size_t cbytes = std::min<std::size_t>(most, std::size_t(1) << 30) / 2 * sizeof(float);
  const float cms = median_ms([&] { cudaMemcpy(d + most / 2, d, cbytes, cudaMemcpyDeviceToDevice); });
  const double copy_gbs = 2.0 * cbytes / (cms * 1e6);

  float* ok = nullptr;
  std::uint32_t* op = nullptr;
  std::size_t omost = 0;
  for (auto& s : shapes) omost = std::max<std::size_t>(omost, std::size_t(s.nq) * s.k);
  ASSERT_EQ(cudaMalloc(&ok, omost * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&op, omost * sizeof(std::uint32_t)), cudaSuccess);

  std::printf("\nselect_rows_gpu<float, uint32_t>, smallest, U(0,1) keys, on %s\n", dev.name.c_str());
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);
  std::printf("%8s %10s %5s %10s %9s %8s\n", "nq", "len", "k", "ms", "GB/s", "%copy");
  for (auto& s : shapes) {
    const float ms = median_ms([&] {
      gknn::select_rows_gpu<float, std::uint32_t>(d, s.nq, s.len, s.len, s.k, SelectOrder::Smallest, ok, op);
    });
    const double gbs = double(s.nq) * s.len * sizeof(float) / (ms * 1e6);
    std::printf("%8lld %10lld %5d %10.3f %9.0f %7.0f%%\n", (long long)s.nq, (long long)s.len, s.k, ms, gbs,
                100.0 * gbs / copy_gbs);
  }
  cudaFree(ok);
  cudaFree(op);
  cudaFree(d);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
