#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/knn.h"
#include "gknn/plan.h"
#include "gpu_env.h"
#include "runtime/cublas_loader.h"

namespace {

using gknn::Metric;

struct Data {
  std::vector<float> base, queries;
  std::int64_t n, nq;
  int dim;
};

// Small integer coordinates make exact ties between distances common, so
// the tie-break by id is exercised; a few zero vectors give cosine NaNs.
Data make_data(std::int64_t n, std::int64_t nq, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coord(-3, 3);
  Data d{std::vector<float>(n * dim), std::vector<float>(nq * dim), n, nq, dim};
  for (auto& x : d.base) x = float(coord(rng));
  for (auto& x : d.queries) x = float(coord(rng));
  if (n > 3) std::fill(d.base.begin() + 2 * dim, d.base.begin() + 3 * dim, 0.0f);
  return d;
}

gknn::KnnRequest request(const Data& d, int k, Metric m) {
  gknn::KnnRequest r;
  r.base = d.base.data();
  r.n = d.n;
  r.queries = d.queries.data();
  r.nq = d.nq;
  r.dim = d.dim;
  r.k = k;
  r.metric = m;
  return r;
}

// Oracle: full sort of every pair by (distance, id), NaN last.
void brute_force(const gknn::KnnRequest& r, std::vector<std::int64_t>& ids) {
  ids.assign(r.nq * r.k, -1);
  for (std::int64_t q = 0; q < r.nq; ++q) {
    std::vector<std::pair<double, std::int64_t>> all;
    for (std::int64_t i = 0; i < r.n; ++i)
      all.push_back({gknn::distance(r.metric, r.base + i * r.dim, r.queries + q * r.dim, r.dim), i});
    std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) {
      bool na = std::isnan(a.first), nb = std::isnan(b.first);
      if (na || nb) return !na && nb;
      return a.first < b.first;
    });
    for (std::int64_t j = 0; j < std::min<std::int64_t>(r.k, r.n); ++j) ids[q * r.k + j] = all[j].second;
  }
}

class KnnCases : public ::testing::TestWithParam<std::tuple<Metric, int>> {};

TEST_P(KnnCases, CpuMatchesBruteForce) {
  auto [metric, k] = GetParam();
  Data d = make_data(1003, 17, 13, 42 + k);
  auto r = request(d, k, metric);
  std::vector<std::int64_t> ids(r.nq * k), want;
  std::vector<double> dist(r.nq * k);
  gknn::exact_knn_cpu(r, ids.data(), dist.data());
  brute_force(r, want);
  EXPECT_EQ(ids, want);
}

void expect_same(const std::vector<std::int64_t>& a_ids, const std::vector<double>& a_d,
                 const std::vector<std::int64_t>& b_ids, const std::vector<double>& b_d) {
  EXPECT_EQ(a_ids, b_ids);
  for (std::size_t i = 0; i < a_d.size(); ++i) {
    if (std::isnan(b_d[i])) {
      EXPECT_TRUE(std::isnan(a_d[i])) << i;
    } else {
      EXPECT_EQ(a_d[i], b_d[i]) << i;  // bit-identical distances
    }
  }
}

// A GPU path's ids and distances against the CPU reference's.
using GpuKnn = void (*)(const gknn::KnnRequest&, int, std::int64_t*, double*);
void expect_matches_cpu(const gknn::KnnRequest& r, GpuKnn gpu) {
  std::vector<std::int64_t> cpu_ids(r.nq * r.k), gpu_ids(r.nq * r.k);
  std::vector<double> cpu_d(r.nq * r.k), gpu_d(r.nq * r.k);
  gknn::exact_knn_cpu(r, cpu_ids.data(), cpu_d.data());
  gpu(r, 0, gpu_ids.data(), gpu_d.data());
  expect_same(gpu_ids, gpu_d, cpu_ids, cpu_d);
}

// Small integer coordinates: many exact ties, so most queries cannot be
// certified from the GEMM and take the brute-force fallback; both paths and
// every GEMM precision must give the CPU's answer.
TEST_P(KnnCases, GpuMatchesCpu) {
  GKNN_NEED_GPU();
  auto [metric, k] = GetParam();
  Data d = make_data(4099, 33, 29, 7 + k);
  for (auto precision : {gknn::GemmPrecision::Fp32, gknn::GemmPrecision::Tf32, gknn::GemmPrecision::Bf16}) {
    auto r = request(d, k, metric);
    r.precision = precision;
    expect_matches_cpu(r, gknn::exact_knn_gpu_gemm);
  }
}

// Continuous random data over several base tiles: the GEMM path certifies
// almost every query; results still equal the CPU reference exactly.
TEST(Knn, GemmPathMatchesCpuOnContinuousData) {
  GKNN_NEED_GPU();
  std::mt19937 rng(99);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const std::int64_t n = 70001, nq = 20;
  const int dim = 67, k = 50;
  std::vector<float> base(n * dim), queries(nq * dim);
  for (auto& x : base) x = g(rng);
  for (auto& x : queries) x = g(rng);
  for (auto metric : {Metric::L2, Metric::InnerProduct, Metric::Cosine})
    for (auto precision : {gknn::GemmPrecision::Fp32, gknn::GemmPrecision::Tf32, gknn::GemmPrecision::Bf16}) {
      gknn::KnnRequest r;
      r.base = base.data();
      r.n = n;
      r.queries = queries.data();
      r.nq = nq;
      r.dim = dim;
      r.k = k;
      r.metric = metric;
      r.precision = precision;
      expect_matches_cpu(r, gknn::exact_knn_gpu_gemm);
    }
}

// The fused distance + selection kernel: ties everywhere (integer
// coordinates), awkward sizes, every metric, queue buckets from 32 to 2048,
// one query (the base split over many parts) and many.
TEST_P(KnnCases, FusedMatchesCpu) {
  GKNN_NEED_GPU();
  auto [metric, k] = GetParam();
  for (auto [n, nq, dim] : {std::tuple<std::int64_t, std::int64_t, int>{1, 3, 5},
                            {1003, 17, 13},
                            {70001, 1, 8},
                            {20011, 37, 31},
                            {5000, 9, 100}}) {
    Data d = make_data(n, nq, dim, unsigned(n + k));
    auto r = request(d, k, metric);
    SCOPED_TRACE("n=" + std::to_string(n) + " nq=" + std::to_string(nq) + " dim=" + std::to_string(dim));
    expect_matches_cpu(r, gknn::exact_knn_gpu_fused);
  }
}

// The scan (each row read once for up to 16 queries, a distance matrix,
// batched selection): ties everywhere, awkward sizes, every metric, one
// query to more than one chunk of 16 (the base read again per chunk), and
// Fashion-MNIST's dimension.
TEST_P(KnnCases, ScanMatchesCpu) {
  GKNN_NEED_GPU();
  auto [metric, k] = GetParam();
  for (auto [n, nq, dim] : {std::tuple<std::int64_t, std::int64_t, int>{1, 3, 5},
                            {1003, 17, 13},
                            {70001, 1, 8},
                            {20011, 37, 31},
                            {5000, 9, 100},
                            {4003, 3, 784},
                            {3001, 5, 1000},
                            {3001, 2, 24},
                            {2003, 12, 3000},
                            {503, 3, 13000}}) {
    Data d = make_data(n, nq, dim, unsigned(n + k + 1));
    auto r = request(d, k, metric);
    SCOPED_TRACE("n=" + std::to_string(n) + " nq=" + std::to_string(nq) + " dim=" + std::to_string(dim));
    expect_matches_cpu(r, gknn::exact_knn_gpu_scan);
  }
}

// A base whose matrix takes more than one pass (16 queries' float keys of
// 1.1M rows pass the scratch bound): each pass keeps its k best, the host
// merges them, ties across passes still by row (integer coordinates), the
// largest k the selection holds included.
// The last pass shorter than k (1M + 100 rows: its list padded, the merge
// skipping the padding) and a zero query (cosine: every distance NaN, so
// the first k rows of the first pass).
TEST(Knn, ScanPassesMerge) {
  GKNN_NEED_GPU();
  for (auto metric : {Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1})
    for (auto [n, k] : {std::pair<std::int64_t, int>{1100003, 10}, {1048676, 2048}}) {
      Data d = make_data(n, 16, 4, unsigned(k));
      std::fill(d.queries.begin(), d.queries.begin() + d.dim, 0.0f);
      auto r = request(d, k, metric);
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) +
                   " metric=" + std::to_string(int(metric)));
      expect_matches_cpu(r, gknn::exact_knn_gpu_scan);
    }
}

// Over a resident base with row ids (a resident image's rows in its own
// order): the CPU's rows, ties by row, mapped to their ids on the device.
TEST(Knn, ScanMapsRowIds) {
  GKNN_NEED_GPU();
  Data d = make_data(20011, 19, 12, 3);
  auto r = request(d, 10, Metric::L2);
  std::vector<std::int64_t> row_ids(d.n);
  for (std::int64_t i = 0; i < d.n; ++i) row_ids[i] = 3 * (d.n - i);  // not in row order
  std::vector<std::int64_t> cpu_ids(r.nq * r.k), gpu_ids(r.nq * r.k);
  std::vector<double> cpu_d(r.nq * r.k), gpu_d(r.nq * r.k);
  gknn::exact_knn_cpu(r, cpu_ids.data(), cpu_d.data());
  for (auto& id : cpu_ids) id = id < 0 ? -1 : row_ids[id];
  gknn::DeviceBuffer<float> d_base(d.n * d.dim);
  gknn::DeviceBuffer<std::int64_t> d_rows(d.n);
  GKNN_CUDA(cudaMemcpy(d_base.get(), d.base.data(), sizeof(float) * d.n * d.dim, cudaMemcpyHostToDevice));
  GKNN_CUDA(cudaMemcpy(d_rows.get(), row_ids.data(), sizeof(std::int64_t) * d.n, cudaMemcpyHostToDevice));
  r.base = d_base.get();
  gknn::exact_knn_resident_scan(r, 0, gpu_ids.data(), gpu_d.data(), d_rows.get());
  expect_same(gpu_ids, gpu_d, cpu_ids, cpu_d);
}

// No query, no k, and a dimension above the scan's: nothing computed, or an
// error, never a launch that reads past shared memory.
TEST(Knn, ScanEdges) {
  GKNN_NEED_GPU();
  Data d = make_data(100, 2, 8, 9);
  auto r = request(d, 5, Metric::L2);
  r.nq = 0;
  gknn::exact_knn_gpu_scan(r, 0, nullptr, nullptr);
  r.nq = 2;
  r.k = 0;
  gknn::exact_knn_gpu_scan(r, 0, nullptr, nullptr);
  Data wide = make_data(3, 1, gknn::kScanMaxDim + 1, 9);
  auto w = request(wide, 2, Metric::L2);
  std::vector<std::int64_t> ids(2);
  std::vector<double> dist(2);
  try {
    gknn::exact_knn_gpu_scan(w, 0, ids.data(), dist.data());
    FAIL() << "no error";
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
  }
  expect_matches_cpu(w, gknn::exact_knn_gpu);  // the chooser takes another path
}

// Dimensions too large for 128-row tiles (Fashion-MNIST's 784 and more) take
// 32-row tiles: still the fused kernel, still the CPU's answer, bit for bit.
TEST(Knn, FusedNarrowTiles) {
  GKNN_NEED_GPU();
  for (int dim : {784, 1000})
    for (int k : {1, 10, 100})
      for (auto metric : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
        ASSERT_TRUE(gknn::exact_knn_gpu_fused_fits(dim, k, 0)) << "dim " << dim << " k " << k;
        Data d = make_data(4003, 6, dim, unsigned(dim + k));
        auto r = request(d, k, metric);
        SCOPED_TRACE("dim=" + std::to_string(dim) + " k=" + std::to_string(k));
        expect_matches_cpu(r, gknn::exact_knn_gpu_fused);
        r.nq = 1;  // one query: the base split over many parts
        expect_matches_cpu(r, gknn::exact_knn_gpu_fused);
      }
}

TEST(Knn, LargeK) {
  GKNN_NEED_GPU();
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int k : {500, 1024, 2048}) {
    Data d = make_data(30011, 5, 16, unsigned(k));
    for (auto& x : d.base) x = g(rng);
    auto r = request(d, k, Metric::L2);
    expect_matches_cpu(r, gknn::exact_knn_gpu_fused);
    expect_matches_cpu(r, gknn::exact_knn_gpu_scan);
  }
}

// The chooser: few queries to the scan, many to the GEMM when cuBLAS is
// there, to the fused kernel where the GEMM path cannot run (L1, no cuBLAS,
// k + margin above 2048), to the scan where neither holds the shape, what no
// selection holds to brute force.
TEST(Knn, ChooserPicksByShape) {
  using gknn::KnnAlgo;
  auto pick = [](std::int64_t n, std::int64_t nq, int dim, int k, Metric m, bool blas, bool fits) {
    return gknn::choose_knn(n, nq, dim, k, m, blas, fits).algo;
  };
  EXPECT_EQ(pick(1000000, 1, 128, 100, Metric::L2, true, true), KnnAlgo::Scan);
  EXPECT_EQ(pick(1000000, gknn::kScanMaxQueries, 16, 10, Metric::Cosine, true, true), KnnAlgo::Scan);
  EXPECT_EQ(pick(1000000, gknn::kScanMaxQueries, 16, 2048, Metric::L1, false, false), KnnAlgo::Scan);
  EXPECT_EQ(pick(1000000, gknn::kScanMaxQueries + 1, 128, 10, Metric::L2, true, true), KnnAlgo::Gemm);
  EXPECT_EQ(pick(1000000, 10000, 16, 100, Metric::L2, true, true), KnnAlgo::Gemm);
  EXPECT_EQ(pick(1000000, 10000, 128, 100, Metric::L2, false, true), KnnAlgo::Fused);
  EXPECT_EQ(pick(1000000, 10000, 128, 100, Metric::L1, true, true), KnnAlgo::Fused);
  EXPECT_EQ(pick(1000000, 10000, 784, 100, Metric::L1, true, false), KnnAlgo::Scan);
  EXPECT_EQ(pick(1000000, 10000, 128, 1500, Metric::L2, true, true), KnnAlgo::Fused);  // k + margin > 2048
  EXPECT_EQ(pick(1000000, 1, 128, 3000, Metric::L2, true, true), KnnAlgo::BruteForce);
  EXPECT_EQ(pick(1000000, 1, gknn::kScanMaxDim + 1, 10, Metric::L2, true, false), KnnAlgo::Gemm);
  EXPECT_EQ(pick(1000000, 1, gknn::kScanMaxDim + 1, 10, Metric::L1, true, false), KnnAlgo::BruteForce);
  EXPECT_EQ(pick(1000000, 10000, 128, 3000, Metric::L2, true, true), KnnAlgo::BruteForce);
  EXPECT_EQ(pick(300, 10000, 128, 100, Metric::L2, true, true), KnnAlgo::Fused);  // base too small for GEMM
  EXPECT_EQ(gknn::choose_topk(1 << 20, 1024).algo, gknn::TopkAlgo::Bitonic);
  EXPECT_EQ(gknn::choose_topk(1 << 20, 1025).algo, gknn::TopkAlgo::SampleSelect);
}

INSTANTIATE_TEST_SUITE_P(AllMetrics, KnnCases,
                         ::testing::Combine(::testing::Values(Metric::L2, Metric::InnerProduct,
                                                              Metric::Cosine, Metric::L1),
                                            ::testing::Values(1, 2, 10, 100)));

TEST(Knn, KLargerThanBasePads) {
  Data d = make_data(5, 2, 4, 3);
  auto r = request(d, 8, Metric::L2);
  std::vector<std::int64_t> ids(16);
  std::vector<double> dist(16);
  gknn::exact_knn_cpu(r, ids.data(), dist.data());
  for (int q = 0; q < 2; ++q) {
    std::vector<std::int64_t> got(ids.begin() + q * 8, ids.begin() + q * 8 + 5);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
    for (int j = 5; j < 8; ++j) {
      EXPECT_EQ(ids[q * 8 + j], -1);
      EXPECT_TRUE(std::isnan(dist[q * 8 + j]));
    }
  }
}

TEST(Knn, GpuKLargerThanBasePads) {
  GKNN_NEED_GPU();
  Data d = make_data(5, 3, 4, 5);
  auto r = request(d, 9, Metric::L1);
  std::vector<std::int64_t> a(27), b(27);
  std::vector<double> da(27), db(27);
  gknn::exact_knn_cpu(r, a.data(), da.data());
  gknn::exact_knn_gpu(r, 0, b.data(), db.data());
  EXPECT_EQ(a, b);
}

TEST(Knn, RejectsBadSizes) {
  Data d = make_data(4, 1, 2, 1);
  auto r = request(d, 2, Metric::L2);
  r.dim = 0;
  std::vector<std::int64_t> ids(2);
  std::vector<double> dist(2);
  try {
    gknn::exact_knn_cpu(r, ids.data(), dist.data());
    FAIL() << "no error";
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
  }
}

}  // namespace

namespace {

// On the GPU host the check sets GKNN_REQUIRE_CUBLAS=1, so a GEMM path that
// silently fell back to brute force cannot pass the tests above unnoticed.
TEST(Knn, CublasLoadsWhereRequired) {
  const char* required = std::getenv("GKNN_REQUIRE_CUBLAS");
  const char* why = "";
  const bool loaded = gknn::load_cublas(&why) != nullptr;
  if (required && std::string(required) == "1") {
    EXPECT_TRUE(loaded) << why;
  } else if (!loaded) {
    GTEST_SKIP() << why;
  }
}

}  // namespace
