// DeviceImage::search_exact_pruned against the CPU's full scan
// (search_exact_cpu): the same ids and distance bits, ties, NaNs and the
// bounds' rounding cases included, while computing a small part of the
// distances on clustered data; and search_exact wherever the bounds do not
// apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gknn/ivfpq.h"
#include "gpu_env.h"
#include "ivfpq_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::DeviceImage;
using gknn::ivfpq::Image;
using gknn::test::AwkwardImage;

// Pruned on the GPU against the CPU's full scan, for nq queries and each k;
// returns the distances computed at the last k.
std::int64_t expect_full_scans(const Image& im, const DeviceImage& dev, const std::vector<float>& queries,
                               std::int64_t nq, std::vector<int> ks,
                               gknn::ivfpq::Pruning pruning = gknn::ivfpq::Pruning::Always) {
  std::int64_t computed = -1;
  for (int k : ks) {
    std::vector<std::int64_t> ids(nq * k, -7), want_ids(nq * k, -9);
    std::vector<double> dist(nq * k), want_dist(nq * k);
    dev.search_exact_pruned(queries.data(), nq, k, ids.data(), dist.data(), &computed, pruning);
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, want_ids.data(), want_dist.data());
    EXPECT_EQ(ids, want_ids) << "nq " << nq << " k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "nq " << nq << " k " << k;
    EXPECT_GE(computed, 0);
    EXPECT_LE(computed, nq * std::int64_t(im.ids.size()));
  }
  return computed;
}

std::int64_t expect_full_scans(const Image& im, const std::vector<float>& queries, std::int64_t nq,
                               std::vector<int> ks) {
  const DeviceImage dev(im, 0);
  return expect_full_scans(im, dev, queries, nq, ks);
}

// Grid vectors (ties), NaN and infinite elements, empty lists, ids out of
// order; 1 query, 5, and 40 (three groups of the scan); k up to past the
// entries, and past the row selection (search_exact's path).
TEST(IvfpqExactPrunedGpu, AwkwardImagesGiveTheFullScansAnswers) {
  GKNN_NEED_GPU();
  for (const AwkwardImage& c :
       {AwkwardImage{1, 1, 4, 5, 300, Metric::L2, 1}, AwkwardImage{3, 1, 8, 4, 250, Metric::L2, 4},
        AwkwardImage{17, 1, 4, 9, 400, Metric::L2, 5}, AwkwardImage{784, 16, 4, 5, 150, Metric::L2, 7},
        AwkwardImage{2, 1, 4, 40, 3000, Metric::L2, 8}}) {
    const Image im = gknn::test::awkward_image(c);
    const DeviceImage dev(im, 0);
    const std::vector<float> queries = gknn::test::grid_queries(40, c.dim, c.seed + 3);
    for (std::int64_t nq : {1, 5, 40}) expect_full_scans(im, dev, queries, nq, {1, 7, int(c.entries) + 5});
    expect_full_scans(im, dev, queries, 3, {2049});
  }
}

// The CPU reference's own hard cases (test_ivfpq_exact_pruned.cpp): an entry
// exactly on its list's bound; a NaN list; cancellation in the double
// bounds; float underflow making distinct vectors tie.
TEST(IvfpqExactPrunedGpu, BoundaryCasesGiveTheFullScansAnswers) {
  GKNN_NEED_GPU();
  using gknn::test::hand_made;
  expect_full_scans(hand_made(1, {5.0f, 0.0f}, {0, 1, 3}, {200, 100, 300}, {5.0f, 1.0f, -1.0f}), {3.0f}, 1,
                    {1, 2, 3});
  const Image far = hand_made(2, {0, 0, 100, 100, -100, 100}, {0, 2, 4, 6}, {1, 2, 3, 4, 5, 6},
                              {0, 1, 1, 0, 100, 101, 101, 100, -100, 100, NAN, 100});
  expect_full_scans(far, {0.5f, 0.5f, NAN, 0.0f, 100.0f, 99.0f, 1e30f, -1e30f}, 4, {1, 2, 6, 9});
  const float t = std::ldexp(3.0f, -54), y = std::ldexp(13.0f, -55);
  expect_full_scans(hand_made(1, {y, -1.0f}, {0, 1, 2}, {2, 1}, {y, 0.0f}), {t}, 1, {1, 2});
  expect_full_scans(hand_made(1, {-1.0f}, {0, 2}, {2, 1}, {y, 0.0f}), {t}, 1, {1, 2});
  expect_full_scans(hand_made(1, {-1.0f}, {0, 2}, {2, 1}, {0.0f, 0.0f}), {t}, 1, {1});
  float b = 0.001f;
  for (int i = 0; i < 40; ++i, b = std::nextafter(b, 1.0f)) {
    const Image im = hand_made(2, {0.0f, -50000.0f}, {0, 2}, {2, 1}, {1000.0f, b, 1000.0f, b});
    expect_full_scans(im, {1000.0f, std::nextafter(b, 1.0f)}, 1, {1});
  }
  expect_full_scans(hand_made(1, {1e-23f, 2e-23f}, {0, 1, 2}, {2, 1}, {1e-23f, 2e-23f}), {0.0f}, 1, {1, 2});
  const float tiny = std::numeric_limits<float>::denorm_min();
  expect_full_scans(hand_made(2, {0.5f, 0.0f, 0.0f, 0.0f}, {0, 1, 2}, {2, 1}, {0.5f, 0.0f, 0.0f, 0.0f}),
                    {0.5f, tiny}, 1, {1, 2});
}

// A trained index over clustered data: the full scan's answers, computing a
// small part of the distances; its bounds counted in device_bytes once made.
TEST(IvfpqExactPrunedGpu, ClusteredDataComputesFewDistances) {
  GKNN_NEED_GPU();
  using gknn::test::ClusteredImage;
  const ClusteredImage c = gknn::test::clustered_image();
  const std::int64_t n = ClusteredImage::kEntries;
  const DeviceImage dev(c.image, 0);
  const std::size_t before = dev.device_bytes();
  for (std::int64_t q : {1, 16, 100}) {
    const std::int64_t computed = expect_full_scans(c.image, dev, c.queries, q, {10});
    std::printf("pruned exact (GPU), %lld x %d in %d lists, %lld queries, k 10: %.1f %% of the distances\n",
                (long long)n, ClusteredImage::kDim, ClusteredImage::kLists, (long long)q,
                100.0 * double(computed) / double(n * q));
    EXPECT_LT(computed, n * q / 10);
    EXPECT_GE(computed, 10 * q);
  }
  EXPECT_EQ(dev.device_bytes() - before, std::size_t(n) * (4 + 8) + std::size_t(ClusteredImage::kLists) * 8);
}

// More rows than one pass of the scan holds for 16 queries (its matrix of
// 64 MB): the keys of the second pass start at its first row.
TEST(IvfpqExactPrunedGpu, SeveralPassesGiveTheFullScansAnswers) {
  GKNN_NEED_GPU();
  const int dim = 2, lists = 64, nq = 16;
  const std::int64_t n = 1100000;
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> centroids(lists * dim), x(std::size_t(n) * dim);
  for (auto& v : centroids) v = 10.0f * gauss(rng);
  std::vector<std::vector<std::int64_t>> members(lists);
  for (std::int64_t i = 0; i < n; ++i) {
    const int l = int(rng() % lists);
    for (int d = 0; d < dim; ++d) x[i * dim + d] = centroids[l * dim + d] + gauss(rng);
    members[l].push_back(i);
  }
  std::vector<std::int64_t> offsets{0}, ids;
  std::vector<float> vectors;
  for (const auto& m : members) {
    for (std::int64_t i : m) {
      ids.push_back((n - i) * 3);  // id order is not entry order
      vectors.insert(vectors.end(), x.begin() + i * dim, x.begin() + (i + 1) * dim);
    }
    offsets.push_back(std::int64_t(ids.size()));
  }
  const Image im = gknn::test::hand_made(dim, centroids, offsets, ids, vectors);
  std::vector<float> queries(std::size_t(nq) * dim);
  for (auto& v : queries) v = 10.0f * gauss(rng);
  const std::int64_t computed = expect_full_scans(im, queries, nq, {10, 100});
  EXPECT_LT(computed, n * nq / 4);
}

// Many small lists (more than the 64 a first k-th best takes) and a k
// those lists cannot fill (no first k-th best: nothing pruned), 40 queries
// (three groups) over two passes: the full scan's answers throughout.
TEST(IvfpqExactPrunedGpu, SmallListsAndLargeKGiveTheFullScansAnswers) {
  GKNN_NEED_GPU();
  const int dim = 2, lists = 200, nq = 40;
  const std::int64_t n = 1100000;
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> centroids(lists * dim), vectors;
  for (auto& v : centroids) v = 30.0f * gauss(rng);
  std::vector<std::int64_t> offsets{0}, ids;
  for (int l = 0; l < lists; ++l) {
    // List sizes 1 to 11 but for the last, which holds the rest.
    const std::int64_t size = l + 1 < lists ? 1 + l % 11 : n - offsets.back();
    for (std::int64_t i = 0; i < size; ++i) {
      ids.push_back(std::int64_t(ids.size()) * 7 % n);
      for (int d = 0; d < dim; ++d) vectors.push_back(centroids[l * dim + d] + gauss(rng));
    }
    offsets.push_back(std::int64_t(ids.size()));
  }
  const Image im = gknn::test::hand_made(dim, centroids, offsets, ids, vectors);
  std::vector<float> queries(std::size_t(nq) * dim);
  for (auto& v : queries) v = 30.0f * gauss(rng);
  expect_full_scans(im, queries, nq, {10, 700});
}

// Adaptive: where pruning computes a large share of the distances (two
// far apart lists of uniform data, the queries in one: each query reads
// its list whole, half the entries), the whole scan after the first calls,
// pruned again one call in sixteen; the answers the same throughout.
TEST(IvfpqExactPrunedGpu, AdaptiveScansWholeWherePruningReadsMuch) {
  GKNN_NEED_GPU();
  const int dim = 32, nq = 8;
  const std::int64_t n = 4000;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> vectors(std::size_t(n) * dim), queries(std::size_t(nq) * dim), centroids(2 * dim);
  for (int d = 0; d < dim; ++d) centroids[d] = 10.0f, centroids[dim + d] = -10.0f;
  for (std::int64_t i = 0; i < n; ++i)
    for (int d = 0; d < dim; ++d) vectors[i * dim + d] = u(rng) + (i < n / 2 ? 10.0f : -10.0f);
  for (auto& v : queries) v = u(rng) + 10.0f;
  std::vector<std::int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  const Image im = gknn::test::hand_made(dim, centroids, {0, n / 2, n}, ids, vectors);
  const DeviceImage dev(im, 0);
  int whole = 0, pruned = 0;
  for (int call = 0; call < 40; ++call) {
    const std::int64_t computed =
        expect_full_scans(im, dev, queries, nq, {10}, gknn::ivfpq::Pruning::Adaptive);
    whole += computed == nq * n;
    pruned += computed == nq * n / 2;
  }
  EXPECT_EQ(whole + pruned, 40);
  EXPECT_GE(pruned, 4);  // the first three, and retries
  EXPECT_LE(pruned, 8);
}

// Other metrics and elements: search_exact's answers, every entry counted.
TEST(IvfpqExactPrunedGpu, OtherImagesAreSearchedWhole) {
  GKNN_NEED_GPU();
  const AwkwardImage ip{17, 1, 4, 9, 400, Metric::InnerProduct, 5}, cos{3, 3, 4, 7, 500, Metric::Cosine, 6};
  for (const AwkwardImage& c : {ip, cos}) {
    const Image im = gknn::test::awkward_image(c);
    const std::vector<float> queries = gknn::test::grid_queries(5, c.dim, c.seed + 3);
    EXPECT_EQ(expect_full_scans(im, queries, 5, {1, 7}), 5 * c.entries);
  }
  Image twin;
  const Image half = gknn::test::half_image({17, 1, 4, 9, 400, Metric::L2, 9}, &twin);
  const std::vector<float> queries = gknn::test::grid_queries(5, 17, 12);
  EXPECT_EQ(expect_full_scans(half, queries, 5, {3}), 5 * 400);
}

}  // namespace
