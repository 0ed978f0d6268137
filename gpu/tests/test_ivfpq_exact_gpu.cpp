// Exact distances on a GPU-resident IVF-PQ image against the CPU reference:
// the re-rank (search_refined) and the exact search (search_exact) must give
// the same ids and the same distance bits, not merely close ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gpu_env.h"
#include "ivfpq_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::GemmPrecision;
using gknn::Metric;
using gknn::ivfpq::DeviceImage;
using gknn::ivfpq::Image;
using gknn::ivfpq::SearchParams;
using gknn::test::AwkwardImage;

SearchParams refined(int k, int probes, int refine) {
  SearchParams sp;
  sp.k = k, sp.probes = probes, sp.refine = refine;
  return sp;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

void expect_refined_equal(const Image& im, const DeviceImage& dev, const std::vector<float>& queries,
                          std::int64_t nq, const SearchParams& sp) {
  std::vector<std::int64_t> ic(nq * sp.k), ig(nq * sp.k, -7);
  std::vector<double> dc(nq * sp.k), dg(nq * sp.k);
  gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, sp, ic.data(), dc.data());
  dev.search_refined(queries.data(), nq, sp, ig.data(), dg.data());
  EXPECT_EQ(ic, ig) << "nq " << nq << " k " << sp.k << " probes " << sp.probes << " refine " << sp.refine;
  EXPECT_TRUE(same_bits(dc, dg)) << "nq " << nq << " k " << sp.k << " probes " << sp.probes << " refine "
                                 << sp.refine;
}

void expect_exact_equal(const Image& im, const DeviceImage& dev, const std::vector<float>& queries,
                        std::int64_t nq, int k, GemmPrecision precision = GemmPrecision::Fp32) {
  std::vector<std::int64_t> ic(nq * k), ig(nq * k, -7);
  std::vector<double> dc(nq * k), dg(nq * k);
  gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ic.data(), dc.data());
  dev.search_exact(queries.data(), nq, k, ig.data(), dg.data(), precision);
  EXPECT_EQ(ic, ig) << "nq " << nq << " k " << k << " precision " << int(precision);
  EXPECT_TRUE(same_bits(dc, dg)) << "nq " << nq << " k " << k << " precision " << int(precision);
}

class IvfpqExactGpu : public ::testing::TestWithParam<AwkwardImage> {};

// Grid vectors (ties), NaN, infinite and zero vectors, shuffled ids, empty
// lists; 130 queries take the GEMM path where it fits, 1 and 5 the fused
// kernel, k past the entries brute force.
TEST_P(IvfpqExactGpu, EqualsCpu) {
  GKNN_NEED_GPU();
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::awkward_image(c);
  const DeviceImage dev(im, 0);
  EXPECT_TRUE(dev.has_vectors());
  const std::vector<float> queries = gknn::test::grid_queries(130, c.dim, c.seed + 4);
  for (std::int64_t nq : {1, 5, 130}) {
    for (int k : {1, 6, 40})
      for (int refine : {1, 4, 1000})
        for (int probes : {1, 2, c.lists})
          expect_refined_equal(im, dev, queries, nq, refined(k, probes, refine));
    for (int k : {1, 7, int(c.entries) + 5}) expect_exact_equal(im, dev, queries, nq, k);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, IvfpqExactGpu,
                         ::testing::Values(AwkwardImage{1, 1, 4, 5, 300, Metric::L2, 21},
                                           AwkwardImage{3, 3, 4, 7, 500, Metric::Cosine, 22},
                                           AwkwardImage{17, 17, 4, 9, 600, Metric::InnerProduct, 23},
                                           AwkwardImage{17, 1, 6, 6, 400, Metric::Cosine, 24},
                                           AwkwardImage{784, 16, 4, 5, 400, Metric::L2, 25},
                                           AwkwardImage{784, 49, 5, 4, 300, Metric::InnerProduct, 26}),
                         [](const auto& info) {
                           const AwkwardImage& c = info.param;
                           return "dim" + std::to_string(c.dim) + "_m" + std::to_string(c.m) + "_lists" +
                                  std::to_string(c.lists) + "_" + gknn::test::metric_label(c.metric);
                         });

// Binary16 vectors stay binary16 on the GPU (half the bytes of floats) and
// give the CPU's rows and distance bits: the re-rank widens them in its
// distance kernel, the exact search ranks them by brute force.
TEST_P(IvfpqExactGpu, HalfVectorsEqualCpu) {
  GKNN_NEED_GPU();
  const AwkwardImage c = GetParam();
  Image twin;
  const Image im = gknn::test::half_image(c, &twin);
  const DeviceImage dev(im, 0), float_dev(twin, 0);
  EXPECT_TRUE(dev.has_vectors());
  EXPECT_EQ(float_dev.device_bytes() - dev.device_bytes(), 2 * std::size_t(c.entries) * c.dim);
  const std::vector<float> queries = gknn::test::grid_queries(70, c.dim, c.seed + 6);
  for (std::int64_t nq : {1, 70}) {
    for (int k : {1, 6, 40})
      for (int refine : {1, 1000})
        for (int probes : {1, c.lists})
          expect_refined_equal(im, dev, queries, nq, refined(k, probes, refine));
    for (int k : {1, 7, int(c.entries) + 5}) expect_exact_equal(im, dev, queries, nq, k);
  }
}

// Bit strings: the Hamming distance, on the GPU as on the CPU.
TEST_P(IvfpqExactGpu, BitVectorsEqualCpu) {
  GKNN_NEED_GPU();
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::bit_image(c);
  const DeviceImage dev(im, 0);
  EXPECT_TRUE(dev.has_vectors());
  std::vector<float> queries = gknn::test::grid_queries(70, c.dim, c.seed + 7);
  for (auto& v : queries) v = v > 0 ? 1.0f : 0.0f;
  for (std::int64_t nq : {1, 70}) {
    for (int k : {1, 6, 40})
      for (int refine : {1, 1000})
        for (int probes : {1, c.lists})
          expect_refined_equal(im, dev, queries, nq, refined(k, probes, refine));
    for (int k : {1, 7, int(c.entries) + 5}) expect_exact_equal(im, dev, queries, nq, k);
  }
}

// More than one row selection holds (k past 2048), and several query
// batches of the brute force, with binary16 and bit rows.
TEST(IvfpqExactGpu, PackedRowsLargeKAndManyQueries) {
  GKNN_NEED_GPU();
  Image twin;
  const Image half = gknn::test::half_image({8, 4, 6, 6, 5000, Metric::L2, 32}, &twin);
  const Image bits = gknn::test::bit_image({13, 13, 4, 6, 5000, Metric::L2, 33});
  const DeviceImage hdev(half, 0), bdev(bits, 0);
  const std::vector<float> hq = gknn::test::grid_queries(20000, 8, 34);
  std::vector<float> bq = gknn::test::grid_queries(20000, 13, 35);
  for (auto& v : bq) v = v > 0 ? 1.0f : 0.0f;
  expect_exact_equal(half, hdev, hq, 3, 2100);
  expect_exact_equal(bits, bdev, bq, 3, 2100);
  expect_refined_equal(half, hdev, hq, 3, refined(2100, 6, 2));
  expect_exact_equal(half, hdev, hq, 20000, 3);  // 2^26 / 5000 queries a batch: two batches
  expect_exact_equal(bits, bdev, bq, 20000, 3);
}

// Continuous clustered data (no infinities): the GEMM path certifies most
// queries, in every precision, and must still equal the CPU; cosine keeps
// raw vectors of varied norms.
TEST(IvfpqExactGpu, TrainedIndexEqualsCpuInEveryPrecision) {
  GKNN_NEED_GPU();
  for (Metric metric : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    const int dim = 48, nq = 300;
    std::vector<float> x = gknn::test::clustered(20000 + nq, dim, 80, 0.4f, 41);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + float(i / dim % 5);  // varied norms
    const std::vector<float> queries(x.end() - nq * dim, x.end());
    x.resize(20000 * dim);
    gknn::ivfpq::Params p;
    p.dim = dim, p.lists = 64, p.m = 12, p.nbits = 8, p.metric = metric;
    Image im = gknn::test::build_index(p, x, 5000, 0);
    im.vectors.resize(x.size());
    for (std::size_t e = 0; e < im.ids.size(); ++e)
      std::copy_n(x.begin() + im.ids[e] * dim, dim, im.vectors.begin() + e * dim);
    const DeviceImage dev(im, 0);
    for (GemmPrecision precision : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16})
      for (int k : {1, 10, 100}) expect_exact_equal(im, dev, queries, nq, k, precision);
    for (int k : {10, 100}) expect_refined_equal(im, dev, queries, nq, refined(k, 8, 10));
  }
}

// More candidates than one row selection holds (refine x k > 2048: the PQ
// stage selects row by row), and k itself past it.
TEST(IvfpqExactGpu, LargeCandidateCountsEqualCpu) {
  GKNN_NEED_GPU();
  const Image im = gknn::test::awkward_image({8, 4, 6, 6, 5000, Metric::L2, 27});
  const DeviceImage dev(im, 0);
  const std::vector<float> queries = gknn::test::grid_queries(3, 8, 28);
  expect_refined_equal(im, dev, queries, 3, refined(30, 3, 100));
  expect_refined_equal(im, dev, queries, 3, refined(2100, 6, 2));
  expect_exact_equal(im, dev, queries, 3, 2100);
}

// Vectors are optional: without them the image holds what it held before
// and the PQ search gives the same results; the exact searches say why not.
TEST(IvfpqExactGpu, VectorsAreOptional) {
  GKNN_NEED_GPU();
  const Image im = gknn::test::awkward_image({17, 17, 4, 9, 600, Metric::L2, 29});
  Image bare = im;
  bare.vectors.clear();
  const DeviceImage with(im, 0), without(bare, 0);
  EXPECT_FALSE(without.has_vectors());
  const std::size_t n = im.ids.size(), dim = 17;
  const std::size_t pq_bytes =
      sizeof(float) * (im.quantizer.centroids.size() + im.quantizer.codebooks.size()) + im.codes.size() +
      sizeof(std::int64_t) * (n + im.offsets.size());
  EXPECT_EQ(without.device_bytes(), pq_bytes);
  EXPECT_EQ(with.device_bytes(), pq_bytes + sizeof(float) * n * dim + 2 * sizeof(std::int64_t) * n);

  const std::vector<float> queries = gknn::test::grid_queries(20, 17, 30);
  const int k = 15;
  std::vector<std::int64_t> a(20 * k), b(20 * k);
  std::vector<float> da(20 * k), db(20 * k);
  with.search(queries.data(), 20, {k, 3}, a.data(), da.data());
  without.search(queries.data(), 20, {k, 3}, b.data(), db.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(0, std::memcmp(da.data(), db.data(), sizeof(float) * da.size()));

  std::vector<double> dist(20 * k);
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0)
        without.search_exact(queries.data(), 20, k, a.data(), dist.data());
      else
        without.search_refined(queries.data(), 20, refined(k, 3, 2), a.data(), dist.data());
      ADD_FAILURE() << "searched exact distances without vectors";
    } catch (const gknn::Error& e) {
      EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("no vectors"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(with.search(queries.data(), 1, refined(k, 3, 2), a.data(), da.data()), gknn::Error);
  EXPECT_THROW(with.search_refined(queries.data(), 1, refined(k, 3, 0), a.data(), dist.data()), gknn::Error);
}

TEST(IvfpqExactGpu, EmptyImagePadsAndMovedFromRejects) {
  GKNN_NEED_GPU();
  const Image im = gknn::test::awkward_image({3, 3, 4, 4, 0, Metric::Cosine, 31});
  DeviceImage dev(im, 0);
  EXPECT_TRUE(dev.has_vectors());
  const std::vector<float> q = gknn::test::grid_queries(2, 3, 3);
  std::vector<std::int64_t> ids(8, 5);
  std::vector<double> dist(8, 0.0);
  dev.search_exact(q.data(), 2, 4, ids.data(), dist.data());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ids[i] == -1 && std::isnan(dist[i])) << i;
  std::fill(ids.begin(), ids.end(), 5);
  dev.search_refined(q.data(), 2, refined(4, 2, 3), ids.data(), dist.data());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ids[i] == -1 && std::isnan(dist[i])) << i;
  DeviceImage moved = std::move(dev);
  EXPECT_THROW(dev.search_exact(q.data(), 2, 4, ids.data(), dist.data()), gknn::Error);
  EXPECT_THROW(dev.search_refined(q.data(), 2, refined(4, 2, 3), ids.data(), dist.data()), gknn::Error);
}

}  // namespace
