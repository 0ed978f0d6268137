// The exact search that skips lists by their bounds (search_exact_pruned_cpu):
// the full scan's answers (search_exact_cpu, itself checked against the
// brute-force oracle), ties and NaNs included, while reading far fewer
// entries on clustered data; and its argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"
#include "ivfpq_data.h"
#include "ivfpq_delta_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::Image;
using gknn::test::AwkwardImage;

// Pruned against full scan for nq queries and each k; returns the distances computed.
std::int64_t expect_full_scans(const Image& im, const std::vector<float>& queries, std::int64_t nq,
                               std::vector<int> ks) {
  const gknn::ivfpq::ListBounds bounds = gknn::ivfpq::list_bounds(im);
  std::int64_t read = 0;
  for (int k : ks) {
    std::vector<std::int64_t> ids(nq * k, -7), want_ids(nq * k, -9);
    std::vector<double> dist(nq * k), want_dist(nq * k);
    read = gknn::ivfpq::search_exact_pruned_cpu(im, bounds, queries.data(), nq, k, ids.data(), dist.data());
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, want_ids.data(), want_dist.data());
    EXPECT_EQ(ids, want_ids) << "k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "k " << k;
  }
  return read;
}

// Hand-made images: grid vectors (many equal distances), a few NaN or
// infinite, entries spread unevenly, centroids unrelated to their lists.
TEST(IvfpqExactPruned, AwkwardImagesGiveTheFullScansAnswers) {
  for (const AwkwardImage& c :
       {AwkwardImage{1, 1, 4, 5, 300, Metric::L2, 1}, AwkwardImage{3, 1, 8, 4, 250, Metric::L2, 4},
        AwkwardImage{17, 1, 4, 9, 400, Metric::L2, 5}, AwkwardImage{784, 16, 4, 5, 150, Metric::L2, 7}}) {
    const Image im = gknn::test::awkward_image(c);
    const std::vector<float> queries = gknn::test::grid_queries(6, c.dim, c.seed + 3);
    expect_full_scans(im, queries, 6, {1, 7, int(c.entries) + 5});
  }
}

// A bound that is exactly met: list 1 (centroid 0, entries at -1 and 1,
// radius 1) has the bound 3 - 1 = 2 for the query 3, and its entry 1 is at
// exactly 2, as list 0's entry 5 is. Read first (its bound is also 2, and
// ties go by list), list 0 makes 2 the k-th best; list 1 must still be read,
// since its entry ties and has the lower id.
TEST(IvfpqExactPruned, AnEntryOnItsListsBoundIsRead) {
  Image im = gknn::test::awkward_image({1, 1, 4, 2, 3, Metric::L2, 21});
  im.quantizer.centroids = {5.0f, 0.0f};
  im.offsets = {0, 1, 3};
  im.ids = {200, 100, 300};
  im.vectors = {5.0f, 1.0f, -1.0f};
  const float query[1] = {3.0f};
  const gknn::ivfpq::ListBounds bounds = gknn::ivfpq::list_bounds(im);
  EXPECT_EQ(bounds.radius, (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(bounds.centre_distance, (std::vector<double>{0.0, 1.0, 1.0}));
  std::vector<std::int64_t> ids(1);
  std::vector<double> dist(1);
  EXPECT_EQ(gknn::ivfpq::search_exact_pruned_cpu(im, bounds, query, 1, 1, ids.data(), dist.data()), 3);
  EXPECT_EQ(ids[0], 100);
  EXPECT_EQ(dist[0], 2.0);
  // Both entries at 2 for k = 2, in id order.
  ids.resize(2);
  dist.resize(2);
  EXPECT_EQ(gknn::ivfpq::search_exact_pruned_cpu(im, bounds, query, 1, 2, ids.data(), dist.data()), 3);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{100, 200}));
}

// A list whose vectors are far from every query is skipped, and one with a
// NaN element (NaN radius) is always read.
TEST(IvfpqExactPruned, FarListsAreSkippedNanListsRead) {
  Image im = gknn::test::awkward_image({2, 1, 4, 3, 6, Metric::L2, 22});
  im.quantizer.centroids = {0, 0, 100, 100, -100, 100};
  im.offsets = {0, 2, 4, 6};
  im.ids = {1, 2, 3, 4, 5, 6};
  im.vectors = {0, 1, 1, 0, 100, 101, 101, 100, -100, 100, NAN, 100};
  const gknn::ivfpq::ListBounds bounds = gknn::ivfpq::list_bounds(im);
  EXPECT_TRUE(std::isnan(bounds.radius[2]));
  const float query[2] = {0.5f, 0.5f};
  std::vector<std::int64_t> ids(2);
  std::vector<double> dist(2);
  // List 2 (NaN) first, then list 0; list 1's bound ~139 is past the k-th.
  EXPECT_EQ(gknn::ivfpq::search_exact_pruned_cpu(im, bounds, query, 1, 2, ids.data(), dist.data()), 4);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2}));
  // A query with a NaN element bounds nothing: every list is read.
  const float nan_query[2] = {NAN, 0.0f};
  EXPECT_EQ(gknn::ivfpq::search_exact_pruned_cpu(im, bounds, nan_query, 1, 2, ids.data(), dist.data()), 6);
  const std::vector<float> queries = {0.5f, 0.5f, NAN, 0.0f, 100.0f, 99.0f, 1e30f, -1e30f};
  expect_full_scans(im, queries, 4, {1, 2, 6, 9});
}

// Bounds are differences of rounded doubles: entries far from their
// centroid but near the query (2^-52 against 1) must not lose to
// cancellation, in a list bound, a ring bound, or a tie of duplicates.
TEST(IvfpqExactPruned, CancellationInTheBoundsSkipsNothing) {
  const float t = std::ldexp(3.0f, -54), y = std::ldexp(13.0f, -55);
  const std::vector<float> query = {t};
  // List 1's computed bound 2^-52 is above its entry's distance 0.75 x 2^-52.
  expect_full_scans(gknn::test::hand_made(1, {y, -1.0f}, {0, 1, 2}, {2, 1}, {y, 0.0f}), query, 1, {1, 2});
  expect_full_scans(gknn::test::hand_made(1, {-1.0f}, {0, 2}, {2, 1}, {y, 0.0f}), query, 1,
                    {1, 2});  // ring bound
  expect_full_scans(gknn::test::hand_made(1, {-1.0f}, {0, 2}, {2, 1}, {0.0f, 0.0f}), query, 1,
                    {1});  // duplicates
  // Duplicates 50,000 from their centroid, the query one float step away.
  float b = 0.001f;
  for (int i = 0; i < 300; ++i, b = std::nextafter(b, 1.0f)) {
    const Image im = gknn::test::hand_made(2, {0.0f, -50000.0f}, {0, 2}, {2, 1}, {1000.0f, b, 1000.0f, b});
    expect_full_scans(im, {1000.0f, std::nextafter(b, 1.0f)}, 1, {1});
  }
}

// The operator's float squares underflow: 1e-23 and 2e-23 are both at
// distance 0 from the query 0 (a tie, by id), though the true distances
// differ; likewise a query one subnormal step from an entry.
TEST(IvfpqExactPruned, UnderflowTiesAreRead) {
  expect_full_scans(gknn::test::hand_made(1, {1e-23f, 2e-23f}, {0, 1, 2}, {2, 1}, {1e-23f, 2e-23f}), {0.0f},
                    1, {1, 2});
  const float tiny = std::numeric_limits<float>::denorm_min();
  expect_full_scans(
      gknn::test::hand_made(2, {0.5f, 0.0f, 0.0f, 0.0f}, {0, 1, 2}, {2, 1}, {0.5f, 0.0f, 0.0f, 0.0f}),
      {0.5f, tiny}, 1, {1, 2});
}

// A trained index over clustered data, more lists than clusters (as an
// index is sized for its data): the full scan's answers, computing a small
// part of the distances (1.5 % here; 3.4 % when lists were read whole, 31.7 %
// with 200 clusters in the 128 lists, whose radii then span clusters).
TEST(IvfpqExactPruned, ClusteredDataReadsFewLists) {
  using gknn::test::ClusteredImage;
  const ClusteredImage c = gknn::test::clustered_image();
  const std::int64_t n = ClusteredImage::kEntries, nq = ClusteredImage::kQueries;
  const std::int64_t read = expect_full_scans(c.image, c.queries, nq, {10});
  std::printf("pruned exact, %lld x %d in %d lists, k 10: %.1f %% of the entries read\n", (long long)n,
              ClusteredImage::kDim, ClusteredImage::kLists, 100.0 * double(read) / double(n * nq));
  EXPECT_LT(read, n * nq / 10);
  EXPECT_GE(read, 10 * nq);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

// Bounds carried across deltas (list_bounds_after) are the edited image's
// list_bounds bit for bit, through removals, insertions, replacements and
// ids reused with other vectors; the pruned search over them gives the
// full scan's answers; bounds of another image are refused.
TEST(IvfpqExactPruned, BoundsCarriedAcrossDeltasEqualBoundsMadeAgain) {
  Image im = gknn::test::awkward_image({3, 1, 4, 9, 400, Metric::L2, 31});
  gknn::ivfpq::ListBounds bounds = gknn::ivfpq::list_bounds(im);
  std::int64_t next_id = std::int64_t(1) << 40;
  const std::vector<float> queries = gknn::test::grid_queries(6, 3, 33);
  for (int step = 0; step < 16; ++step) {
    gknn::test::Lists lists;
    const gknn::ivfpq::ImageDelta delta =
        gknn::test::random_delta(im, 8, 100 + step, &next_id, step % 2 == 1, &lists);
    const Image next = gknn::ivfpq::apply_delta(im, delta);
    const gknn::ivfpq::ListBounds carried = gknn::ivfpq::list_bounds_after(bounds, delta, next);
    const gknn::ivfpq::ListBounds made = gknn::ivfpq::list_bounds(next);
    EXPECT_EQ(carried.offsets, made.offsets) << "step " << step;
    EXPECT_TRUE(same_bits(carried.centre_distance, made.centre_distance)) << "step " << step;
    EXPECT_TRUE(same_bits(carried.radius, made.radius)) << "step " << step;
    for (int k : {1, 7}) {
      std::vector<std::int64_t> ids(6 * k), want_ids(6 * k);
      std::vector<double> dist(6 * k), want_dist(6 * k);
      gknn::ivfpq::search_exact_pruned_cpu(next, carried, queries.data(), 6, k, ids.data(), dist.data());
      gknn::ivfpq::search_exact_cpu(next, queries.data(), 6, k, want_ids.data(), want_dist.data());
      EXPECT_EQ(ids, want_ids) << "step " << step << " k " << k;
      EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "step " << step << " k " << k;
    }
    if (step == 15) {
      // Bounds of another image: refused (by the size check, the delta's
      // plan, or the lists it makes).
      const gknn::ivfpq::ListBounds other =
          gknn::ivfpq::list_bounds(gknn::test::awkward_image({3, 1, 4, 9, 399, Metric::L2, 31}));
      gknn::test::expect_invalid([&] { gknn::ivfpq::list_bounds_after(other, delta, next); }, "ivfpq");
      gknn::test::expect_invalid([&] { gknn::ivfpq::list_bounds_after(carried, delta, next); }, "ivfpq");
    }
    im = next;
    bounds = carried;
  }
}

TEST(IvfpqExactPruned, RejectsOtherImagesAndMetrics) {
  Image im = gknn::test::awkward_image({3, 1, 4, 4, 50, Metric::L2, 23});
  const gknn::ivfpq::ListBounds bounds = gknn::ivfpq::list_bounds(im);
  const std::vector<float> q = gknn::test::grid_queries(1, 3, 2);
  std::vector<std::int64_t> ids(5);
  std::vector<double> dist(5);
  Image other = gknn::test::awkward_image({3, 1, 4, 4, 51, Metric::L2, 23});
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_pruned_cpu(other, bounds, q.data(), 1, 5, ids.data(), dist.data()); },
      "another image");
  Image ip = gknn::test::awkward_image({3, 1, 4, 4, 50, Metric::InnerProduct, 23});
  gknn::test::expect_invalid([&] { gknn::ivfpq::list_bounds(ip); }, "L2");
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_pruned_cpu(ip, bounds, q.data(), 1, 5, ids.data(), dist.data()); },
      "L2");
  Image bare = im;
  bare.vectors.clear();
  gknn::test::expect_invalid([&] { gknn::ivfpq::list_bounds(bare); }, "vectors");
}

}  // namespace
