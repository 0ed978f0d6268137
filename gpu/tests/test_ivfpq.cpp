// IVF-PQ on the CPU: parameters, code packing, k-means, training, encoding
// and search against exact search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/knn.h"
#include "ivfpq/arith.h"
#include "ivfpq/assign.h"
#include "ivfpq/codes.h"
#include "ivfpq/kmeans.h"
#include "ivfpq_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::Params;
using gknn::ivfpq::Phase;

std::string metric_name(Metric m) {
  return m == Metric::L2 ? "L2" : m == Metric::InnerProduct ? "InnerProduct" : "Cosine";
}

Params params(int dim, int lists, int m, int nbits, Metric metric) {
  Params p;
  p.dim = dim;
  p.lists = lists;
  p.m = m;
  p.nbits = nbits;
  p.metric = metric;
  return p;
}

void expect_invalid(const Params& p, const char* word) {
  try {
    gknn::ivfpq::validate(p);
    ADD_FAILURE() << "accepted params, expected an error naming " << word;
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

TEST(IvfpqParams, ValidateNamesTheParameter) {
  const Params ok = params(12, 4, 3, 8, Metric::L2);
  EXPECT_NO_THROW(gknn::ivfpq::validate(ok));
  Params p = ok;
  p.dim = 0;
  expect_invalid(p, "dim");
  p.dim = gknn::ivfpq::kMaxDim + 1;
  expect_invalid(p, "dim");
  p = ok, p.lists = 0;
  expect_invalid(p, "lists");
  p = ok, p.m = 0;
  expect_invalid(p, "m ");
  p = ok, p.m = 5;
  expect_invalid(p, "divide");
  p = ok, p.nbits = 3;
  expect_invalid(p, "nbits");
  p = ok, p.nbits = 9;
  expect_invalid(p, "nbits");
  p = ok, p.metric = Metric::L1;
  expect_invalid(p, "metric");
  p = ok, p.kmeans_iters = 0;
  expect_invalid(p, "kmeans_iters");
}

TEST(IvfpqParams, CodeSizeRoundsUpToBytes) {
  EXPECT_EQ(gknn::ivfpq::code_size(params(16, 1, 16, 8, Metric::L2)), 16);
  EXPECT_EQ(gknn::ivfpq::code_size(params(16, 1, 16, 4, Metric::L2)), 8);
  EXPECT_EQ(gknn::ivfpq::code_size(params(15, 1, 3, 5, Metric::L2)), 2);
  EXPECT_EQ(gknn::ivfpq::code_size(params(17, 1, 17, 7, Metric::L2)), 15);
}

TEST(IvfpqCodes, PackingRoundTrips) {
  std::mt19937 rng(7);
  for (int nbits = gknn::ivfpq::kMinNbits; nbits <= gknn::ivfpq::kMaxNbits; ++nbits)
    for (int m = 1; m <= 19; ++m) {
      const int bytes = (m * nbits + 7) / 8;
      std::vector<unsigned> values(m);
      for (auto& v : values) v = rng() & ((1u << nbits) - 1);
      // A guard byte after the entry must stay untouched.
      std::vector<std::uint8_t> code(bytes + 1, 0);
      code[bytes] = 0xa5;
      for (int j = 0; j < m; ++j) gknn::ivfpq::write_code(code.data(), j, nbits, values[j]);
      for (int j = 0; j < m; ++j)
        EXPECT_EQ(gknn::ivfpq::read_code(code.data(), j, nbits), values[j]) << nbits << " " << m << " " << j;
      EXPECT_EQ(code[bytes], 0xa5);
      if (nbits * m % 8 != 0) {
        EXPECT_EQ(code[bytes - 1] >> (nbits * m % 8), 0) << "bits past the last code";
      }
    }
}

// nearest_cpu is the assignment the exact kNN with k = 1 made before it
// (the GPU kernel is checked against nearest_cpu): values on a coarse grid
// make many exact ties, duplicated centroids tie on every row, and NaN and
// infinity rank as the exact kNN ranks them (NaN last, ties by lower id).
// 6000 rows are enough work for nearest_cpu to split them over threads.
TEST(IvfpqAssign, NearestCpuIsTheExactKnnArgmin) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> grid(-4, 4);
  for (int dim : {1, 3, 17}) {
    const int k = 40, groups = 3;
    const std::int64_t n = 6000, ld = std::int64_t(groups) * dim + 2;  // padded rows
    std::vector<float> x(n * ld), c(std::size_t(groups) * k * dim);
    for (auto& v : x) v = 0.5f * float(grid(rng));
    for (auto& v : c) v = 0.5f * float(grid(rng));
    for (int g = 0; g < groups; ++g)  // centroid 7 repeats centroid 3
      std::copy_n(c.begin() + (g * k + 3) * dim, dim, c.begin() + (g * k + 7) * dim);
    x[5 * ld] = NAN;
    x[6 * ld + ld - 3] = INFINITY;
    c[std::size_t(k - 1) * dim] = -INFINITY;
    std::vector<std::int32_t> got(groups * n);
    gknn::ivfpq::nearest_cpu({n, ld, dim, k, groups}, x.data(), c.data(), got.data());
    for (int g = 0; g < groups; ++g) {
      std::vector<float> sub(n * dim);
      for (std::int64_t i = 0; i < n; ++i)
        std::copy_n(x.begin() + i * ld + g * dim, dim, sub.begin() + i * dim);
      gknn::KnnRequest r;
      r.base = c.data() + std::size_t(g) * k * dim, r.n = k, r.queries = sub.data(), r.nq = n, r.dim = dim;
      r.k = 1;
      std::vector<std::int64_t> ids(n);
      std::vector<double> dist(n);
      gknn::exact_knn_cpu(r, ids.data(), dist.data());
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[g * n + i], ids[i]) << "dim " << dim << " group " << g << " row " << i;
    }
  }
}

// "No centroid yet" (index -1, the GPU's warps that got no centroid) loses
// to every centroid, NaN distance included, whatever its distance field.
TEST(IvfpqAssign, NoneLosesToEveryCentroid) {
  using gknn::ivfpq::nearer;
  EXPECT_TRUE(nearer(NAN, 0, 0.0f, -1));
  EXPECT_FALSE(nearer(0.0f, -1, NAN, 0));
  EXPECT_FALSE(nearer(0.0f, -1, 0.0f, -1));
  EXPECT_TRUE(nearer(1.0f, 3, NAN, 0));
  EXPECT_TRUE(nearer(1.0f, 2, 1.0f, 3));
  EXPECT_FALSE(nearer(1.0f, 3, 1.0f, 2));
  EXPECT_TRUE(nearer(INFINITY, 9, NAN, 1));
}

std::vector<float> run_kmeans(const std::vector<float>& x, int dim, int k, int iters, std::uint64_t seed) {
  const std::int64_t n = std::int64_t(x.size()) / dim;
  gknn::ivfpq::Assigner rows(x.data(), n, dim, gknn::ivfpq::kCpu);
  return gknn::ivfpq::kmeans({x.data(), n, dim, dim, k, 1, iters, seed}, rows, {});
}

TEST(IvfpqKmeans, RecoversSeparatedClusters) {
  const float centres[4][2] = {{10, 10}, {-10, 10}, {10, -10}, {-10, -10}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
  std::vector<float> x;
  for (int i = 0; i < 400; ++i)
    for (int d = 0; d < 2; ++d) x.push_back(centres[i % 4][d] + noise(rng));
  const std::vector<float> c = run_kmeans(x, 2, 4, 10, 42);
  for (const auto& t : centres) {
    int near = 0;
    for (int j = 0; j < 4; ++j) near += std::hypot(c[2 * j] - t[0], c[2 * j + 1] - t[1]) < 0.2f;
    EXPECT_EQ(near, 1) << "centre " << t[0] << "," << t[1];
  }
}

// Two distinct points repeated: any initialisation repeats a value, the
// duplicate centroid loses every tie (lower number wins) and is empty, so
// it must be split off the largest cluster. Without the split two centroids
// would stay equal; with it, all differ and each sits at (a perturbation of
// at most 2^-10 of) a data point, both points covered.
TEST(IvfpqKmeans, SplitsEmptyClusters) {
  const float a[4] = {1, 2, 3, 4}, b[4] = {-5, 6, -7, 8};
  std::vector<float> x;
  for (int i = 0; i < 100; ++i) x.insert(x.end(), i % 5 < 3 ? a : b, (i % 5 < 3 ? a : b) + 4);
  const std::vector<float> c = run_kmeans(x, 4, 3, 5, 9);
  auto rel_error = [&](int j, const float* t) {
    float e = 0;
    for (int d = 0; d < 4; ++d) e = std::max(e, std::fabs(c[4 * j + d] - t[d]) / std::fabs(t[d]));
    return e;
  };
  int at_a = 0, at_b = 0;
  for (int j = 0; j < 3; ++j) {
    at_a += rel_error(j, a) <= 1.0f / 1024 + 1e-6f;
    at_b += rel_error(j, b) <= 1.0f / 1024 + 1e-6f;
    for (int i = 0; i < j; ++i)
      EXPECT_FALSE(std::equal(c.begin() + 4 * i, c.begin() + 4 * i + 4, c.begin() + 4 * j)) << i << " " << j;
  }
  EXPECT_GE(at_a, 1);
  EXPECT_GE(at_b, 1);
  EXPECT_EQ(at_a + at_b, 3);
}

TEST(IvfpqKmeans, MoreCentroidsThanPoints) {
  const std::vector<float> x = {0.5f, -1, 2, 3, -4, 1.5f};  // three points, dim 2
  const std::vector<float> c = run_kmeans(x, 2, 8, 4, 1);
  ASSERT_EQ(c.size(), 16u);
  for (int p = 0; p < 3; ++p) {
    bool exact = false;
    for (int j = 0; j < 8; ++j) exact |= c[2 * j] == x[2 * p] && c[2 * j + 1] == x[2 * p + 1];
    EXPECT_TRUE(exact) << "point " << p << " has its own centroid";
  }
  for (float v : c) EXPECT_TRUE(std::isfinite(v));
}

TEST(IvfpqTrain, SameSeedSameQuantizer) {
  const std::vector<float> x = gknn::test::clustered(1500, 12, 10, 0.2f, 5);
  Params p = params(12, 16, 4, 6, Metric::L2);
  const auto q1 = gknn::ivfpq::train(p, x.data(), 1500, gknn::ivfpq::kCpu);
  const auto q2 = gknn::ivfpq::train(p, x.data(), 1500, gknn::ivfpq::kCpu);
  EXPECT_EQ(q1.centroids, q2.centroids);
  EXPECT_EQ(q1.codebooks, q2.codebooks);
  ASSERT_EQ(q1.centroids.size(), 16u * 12);
  ASSERT_EQ(q1.codebooks.size(), 4u * 64 * 3);
  p.seed += 1;
  const auto q3 = gknn::ivfpq::train(p, x.data(), 1500, gknn::ivfpq::kCpu);
  EXPECT_NE(q1.centroids, q3.centroids);
}

TEST(IvfpqTrain, ClampsListsToTheSample) {
  const std::vector<float> x = gknn::test::clustered(5, 8, 2, 0.5f, 1);
  const auto q = gknn::ivfpq::train(params(8, 16, 2, 4, Metric::L2), x.data(), 5, gknn::ivfpq::kCpu);
  EXPECT_EQ(q.params.lists, 5);
  EXPECT_EQ(q.centroids.size(), 5u * 8);
  // Each sample row is its own list, and a search finds every row.
  const auto im = gknn::test::build_index(q.params, x, 5, gknn::ivfpq::kCpu);
  std::vector<std::int64_t> ids(10);
  std::vector<float> dist(10);
  gknn::ivfpq::search_cpu(im, x.data(), 1, {10, 16}, ids.data(), dist.data());
  std::vector<std::int64_t> found(ids.begin(), ids.begin() + 5);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ids[0], 0);
  for (int j = 5; j < 10; ++j) EXPECT_EQ(ids[j], -1);
}

TEST(IvfpqTrain, ReportsProgressAndCancels) {
  const std::vector<float> x = gknn::test::clustered(300, 8, 4, 0.3f, 2);
  Params p = params(8, 4, 2, 4, Metric::L2);
  p.kmeans_iters = 3;
  std::vector<std::tuple<Phase, std::int64_t, std::int64_t>> calls;
  auto record = [&](Phase ph, std::int64_t done, std::int64_t total) {
    calls.emplace_back(ph, done, total);
    return true;
  };
  const auto q = gknn::ivfpq::train(p, x.data(), 300, gknn::ivfpq::kCpu, record);
  ASSERT_EQ(calls.size(), 3u + 2 * 3);
  EXPECT_EQ(calls[0], std::make_tuple(Phase::CoarseKmeans, std::int64_t(1), std::int64_t(3)));
  EXPECT_EQ(calls[2], std::make_tuple(Phase::CoarseKmeans, std::int64_t(3), std::int64_t(3)));
  EXPECT_EQ(calls[3], std::make_tuple(Phase::PqKmeans, std::int64_t(1), std::int64_t(6)));
  EXPECT_EQ(calls.back(), std::make_tuple(Phase::PqKmeans, std::int64_t(6), std::int64_t(6)));

  auto stop_at_pq = [](Phase ph, std::int64_t, std::int64_t) { return ph != Phase::PqKmeans; };
  try {
    gknn::ivfpq::train(p, x.data(), 300, gknn::ivfpq::kCpu, stop_at_pq);
    ADD_FAILURE() << "not cancelled";
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::Cancelled);
  }
  std::vector<std::int32_t> list_of(300);
  std::vector<std::uint8_t> codes(300);
  auto stop = [](Phase, std::int64_t, std::int64_t) { return false; };
  EXPECT_THROW(gknn::ivfpq::encode(q, x.data(), 300, gknn::ivfpq::kCpu, list_of.data(), codes.data(), stop),
               gknn::Error);
}

TEST(IvfpqTrain, RejectsBadInput) {
  const std::vector<float> x(16, 1.0f);
  EXPECT_THROW(gknn::ivfpq::train(params(8, 2, 2, 8, Metric::L2), x.data(), 0, gknn::ivfpq::kCpu),
               gknn::Error);
  EXPECT_THROW(gknn::ivfpq::train(params(8, 2, 3, 8, Metric::L2), x.data(), 2, gknn::ivfpq::kCpu),
               gknn::Error);
  auto q = gknn::ivfpq::train(params(8, 2, 2, 8, Metric::L2), x.data(), 2, gknn::ivfpq::kCpu);
  q.centroids.pop_back();
  std::vector<std::int32_t> list_of(2);
  std::vector<std::uint8_t> codes(4);
  EXPECT_THROW(gknn::ivfpq::encode(q, x.data(), 2, gknn::ivfpq::kCpu, list_of.data(), codes.data()),
               gknn::Error);
}

// 40 distinct vectors, each 5 times: with 2^8 codewords per 1-d sub-space
// every residual value is a codeword (all 200 rows seed the k-means), so the
// PQ is lossless up to float rounding and the split's 2^-10 perturbation, and
// probing every list gives the exact neighbours, duplicates in id order.
class IvfpqLossless : public ::testing::TestWithParam<Metric> {};

TEST_P(IvfpqLossless, ProbingEveryListIsExact) {
  const Metric metric = GetParam();
  const int dim = 8, k = 10;
  const std::vector<float> distinct = gknn::test::gaussian(40, dim, 11);
  std::vector<float> x;
  for (int i = 0; i < 200; ++i)
    x.insert(x.end(), distinct.begin() + (i % 40) * dim, distinct.begin() + (i % 40 + 1) * dim);
  const std::vector<float> queries = gknn::test::gaussian(25, dim, 12);
  const auto im = gknn::test::build_index(params(dim, 4, dim, 8, metric), x, 200, gknn::ivfpq::kCpu);
  std::vector<std::int64_t> ids(25 * k);
  std::vector<float> dist(25 * k);
  gknn::ivfpq::search_cpu(im, queries.data(), 25, {k, 4}, ids.data(), dist.data());
  EXPECT_EQ(ids, gknn::test::exact_ids(x, queries, dim, k, metric));
  for (int i = 0; i < 25 * k; ++i) {
    const double exact = gknn::distance(metric, x.data() + ids[i] * dim, queries.data() + (i / k) * dim, dim);
    EXPECT_NEAR(dist[i], exact, 1e-2 * (1 + std::fabs(exact))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Metrics, IvfpqLossless,
                         ::testing::Values(Metric::L2, Metric::InnerProduct, Metric::Cosine),
                         [](const auto& info) { return metric_name(info.param); });

// recall@10 of 20000 x 32 clustered vectors, 64 lists, 8 probes; floors set a
// little below what this data reaches (measured values in the comments).
struct RecallCase {
  Metric metric;
  int m;
  double floor;
};
void PrintTo(const RecallCase& c, std::ostream* os) {
  *os << metric_name(c.metric) << " m " << c.m << " floor " << c.floor;
}

class IvfpqRecall : public ::testing::TestWithParam<RecallCase> {};

TEST_P(IvfpqRecall, ClusteredData) {
  const RecallCase c = GetParam();
  const int dim = 32, k = 10, nq = 200;
  std::vector<float> x = gknn::test::clustered(20000 + nq, dim, 100, 0.3f, 21);
  const std::vector<float> queries(x.end() - nq * dim, x.end());
  x.resize(20000 * dim);
  const auto im = gknn::test::build_index(params(dim, 64, c.m, 8, c.metric), x, 5000, gknn::ivfpq::kCpu);
  std::vector<std::int64_t> ids(nq * k);
  std::vector<float> dist(nq * k);
  gknn::ivfpq::search_cpu(im, queries.data(), nq, {k, 8}, ids.data(), dist.data());
  const double r = gknn::test::recall(gknn::test::exact_ids(x, queries, dim, k, c.metric), ids, k);
  std::printf("recall@10 metric %d m %d: %.3f\n", int(c.metric), c.m, r);
  EXPECT_GE(r, c.floor);
  for (int q = 0; q < nq; ++q)
    for (int j = 1; j < k; ++j) EXPECT_LE(dist[q * k + j - 1], dist[q * k + j]);
}

INSTANTIATE_TEST_SUITE_P(Metrics, IvfpqRecall,
                         ::testing::Values(RecallCase{Metric::L2, 8, 0.42},            // 0.465
                                           RecallCase{Metric::L2, 16, 0.75},           // 0.798
                                           RecallCase{Metric::InnerProduct, 8, 0.43},  // 0.483
                                           RecallCase{Metric::Cosine, 8, 0.42}),       // 0.463
                         [](const auto& info) {
                           return metric_name(info.param.metric) + "_m" + std::to_string(info.param.m);
                         });

TEST(IvfpqSearch, PadsRowsWithFewerCandidates) {
  const std::vector<float> x = gknn::test::clustered(60, 6, 3, 0.1f, 4);
  const auto im = gknn::test::build_index(params(6, 3, 3, 5, Metric::L2), x, 60, gknn::ivfpq::kCpu);
  const int k = 80;
  std::vector<std::int64_t> ids(2 * k);
  std::vector<float> dist(2 * k);
  gknn::ivfpq::search_cpu(im, x.data(), 2, {k, 1}, ids.data(), dist.data());
  for (int q = 0; q < 2; ++q) {
    const std::int64_t* row = ids.data() + q * k;
    const int real = int(std::count_if(row, row + k, [](std::int64_t id) { return id >= 0; }));
    EXPECT_GT(real, 0);
    EXPECT_LT(real, 60);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(row[j] >= 0, j < real) << "padding comes last";
      EXPECT_EQ(std::isnan(dist[q * k + j]), j >= real);
    }
    std::set<std::int64_t> distinct(row, row + real);
    EXPECT_EQ(int(distinct.size()), real);
  }
}

TEST(IvfpqSearch, RejectsBadArguments) {
  const std::vector<float> x = gknn::test::clustered(20, 4, 2, 0.1f, 4);
  auto im = gknn::test::build_index(params(4, 2, 2, 4, Metric::L2), x, 20, gknn::ivfpq::kCpu);
  std::vector<std::int64_t> ids(10);
  std::vector<float> dist(10);
  EXPECT_THROW(gknn::ivfpq::search_cpu(im, x.data(), 1, {-1, 1}, ids.data(), dist.data()), gknn::Error);
  EXPECT_THROW(gknn::ivfpq::search_cpu(im, x.data(), 1, {5, 0}, ids.data(), dist.data()), gknn::Error);
  EXPECT_NO_THROW(gknn::ivfpq::search_cpu(im, x.data(), 1, {0, 1}, nullptr, nullptr));
  im.offsets.back() += 1;
  EXPECT_THROW(gknn::ivfpq::search_cpu(im, x.data(), 1, {5, 1}, ids.data(), dist.data()), gknn::Error);
}

}  // namespace
