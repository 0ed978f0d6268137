// Exact distances on an IVF-PQ image with stored vectors, on the CPU: the
// re-rank of the PQ candidates (search_refined_cpu) and the exact search
// (search_exact_cpu) against a brute-force oracle (a full sort by the SQL
// operator's value, NaN last, then id).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::Image;
using gknn::ivfpq::SearchParams;
using gknn::test::AwkwardImage;

SearchParams refined(int k, int probes, int refine) {
  SearchParams sp;
  sp.k = k, sp.probes = probes, sp.refine = refine;
  return sp;
}

class IvfpqExactCpu : public ::testing::TestWithParam<AwkwardImage> {};

TEST_P(IvfpqExactCpu, ExactSearchEqualsTheOracle) {
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::awkward_image(c);
  const std::int64_t nq = 5;
  const std::vector<float> queries = gknn::test::grid_queries(nq, c.dim, c.seed + 1);
  for (int k : {1, 7, int(c.entries) + 5}) {  // the last: more than the entries
    std::vector<std::int64_t> ids(nq * k, -7), want_ids;
    std::vector<double> dist(nq * k), want_dist;
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ids.data(), dist.data());
    gknn::test::oracle_exact(im, queries.data(), nq, k, want_ids, want_dist);
    EXPECT_EQ(ids, want_ids) << "k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "k " << k;
  }
}

TEST_P(IvfpqExactCpu, RefinedSearchEqualsTheOracle) {
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::awkward_image(c);
  const std::int64_t nq = 4;
  const std::vector<float> queries = gknn::test::grid_queries(nq, c.dim, c.seed + 2);
  for (int k : {1, 6, 40})
    for (int refine : {1, 4, 1000})
      for (int probes : {1, 2, c.lists}) {
        const SearchParams sp = refined(k, probes, refine);
        std::vector<std::int64_t> ids(nq * k, -7), want_ids;
        std::vector<double> dist(nq * k), want_dist;
        gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, sp, ids.data(), dist.data());
        gknn::test::oracle_refined(im, queries.data(), nq, sp, want_ids, want_dist);
        EXPECT_EQ(ids, want_ids) << "k " << k << " refine " << refine << " probes " << probes;
        EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist))
            << "k " << k << " refine " << refine << " probes " << probes;
      }
}

// Every list probed and every entry a candidate: the re-rank is the exact
// search.
TEST_P(IvfpqExactCpu, RefiningEverythingIsTheExactSearch) {
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::awkward_image(c);
  const std::int64_t nq = 3;
  const int k = 9;
  const std::vector<float> queries = gknn::test::grid_queries(nq, c.dim, c.seed + 3);
  std::vector<std::int64_t> ids(nq * k), exact_ids(nq * k);
  std::vector<double> dist(nq * k), exact_dist(nq * k);
  gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, refined(k, c.lists, int(c.entries)), ids.data(),
                                  dist.data());
  gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, exact_ids.data(), exact_dist.data());
  EXPECT_EQ(ids, exact_ids);
  EXPECT_TRUE(gknn::test::same_canonical(exact_dist, dist));
}

INSTANTIATE_TEST_SUITE_P(Shapes, IvfpqExactCpu,
                         ::testing::Values(AwkwardImage{1, 1, 4, 5, 300, Metric::L2, 1},
                                           AwkwardImage{1, 1, 5, 3, 200, Metric::InnerProduct, 2},
                                           AwkwardImage{3, 3, 4, 7, 300, Metric::Cosine, 3},
                                           AwkwardImage{3, 1, 8, 4, 250, Metric::L2, 4},
                                           AwkwardImage{17, 17, 4, 9, 400, Metric::InnerProduct, 5},
                                           AwkwardImage{17, 1, 6, 6, 300, Metric::Cosine, 6},
                                           AwkwardImage{784, 16, 4, 5, 150, Metric::L2, 7},
                                           AwkwardImage{784, 49, 5, 4, 120, Metric::Cosine, 8},
                                           AwkwardImage{784, 28, 4, 3, 100, Metric::InnerProduct, 9}),
                         [](const auto& info) {
                           const AwkwardImage& c = info.param;
                           return "dim" + std::to_string(c.dim) + "_m" + std::to_string(c.m) + "_lists" +
                                  std::to_string(c.lists) + "_" + gknn::test::metric_label(c.metric);
                         });

// Binary16 vectors (a halfvec index): the same rows and distance bits as
// the image whose float vectors are the halves' values, and the oracle's.
TEST_P(IvfpqExactCpu, HalfVectorsRankAsTheirFloatValues) {
  const AwkwardImage c = GetParam();
  Image twin;
  const Image im = gknn::test::half_image(c, &twin);
  ASSERT_TRUE(gknn::ivfpq::has_vectors(im));
  ASSERT_EQ(gknn::ivfpq::vector_element(im) == gknn::ivfpq::VectorElement::Float16, c.entries > 0);
  const std::int64_t nq = 4;
  const std::vector<float> queries = gknn::test::grid_queries(nq, c.dim, c.seed + 4);
  for (int k : {1, 7, int(c.entries) + 5}) {
    std::vector<std::int64_t> ids(nq * k), twin_ids(nq * k), want_ids;
    std::vector<double> dist(nq * k), twin_dist(nq * k), want_dist;
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ids.data(), dist.data());
    gknn::ivfpq::search_exact_cpu(twin, queries.data(), nq, k, twin_ids.data(), twin_dist.data());
    gknn::test::oracle_exact(twin, queries.data(), nq, k, want_ids, want_dist);
    EXPECT_EQ(ids, twin_ids) << "k " << k;
    EXPECT_EQ(ids, want_ids) << "k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(twin_dist, dist)) << "k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "k " << k;
  }
  for (int refine : {1, 4}) {
    const SearchParams sp = refined(6, 2, refine);
    std::vector<std::int64_t> ids(nq * sp.k), want_ids;
    std::vector<double> dist(nq * sp.k), want_dist;
    gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, sp, ids.data(), dist.data());
    gknn::test::oracle_refined(twin, queries.data(), nq, sp, want_ids, want_dist);
    EXPECT_EQ(ids, want_ids) << "refine " << refine;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "refine " << refine;
  }
}

// Bit strings (a bit_hamming_ops index): the exact distance is the Hamming
// distance to the query's 0/1 values, whatever the metric, checked against a
// popcount oracle over the packed bytes, ties by id.
TEST_P(IvfpqExactCpu, BitVectorsRankByHammingDistance) {
  const AwkwardImage c = GetParam();
  const Image im = gknn::test::bit_image(c);
  ASSERT_TRUE(gknn::ivfpq::has_vectors(im));
  const std::int64_t nq = 4;
  std::vector<float> queries = gknn::test::grid_queries(nq, c.dim, c.seed + 5);
  for (auto& v : queries) v = v > 0 ? 1.0f : 0.0f;
  for (int k : {1, 7, int(c.entries) + 5}) {
    std::vector<std::int64_t> ids(nq * k), want_ids;
    std::vector<double> dist(nq * k), want_dist;
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ids.data(), dist.data());
    gknn::test::oracle_bits(im, queries.data(), nq, k, want_ids, want_dist);
    EXPECT_EQ(ids, want_ids) << "k " << k;
    EXPECT_TRUE(gknn::test::same_canonical(want_dist, dist)) << "k " << k;
  }
  // The re-rank of every entry is the exact search.
  const int k = 6;
  std::vector<std::int64_t> ids(nq * k), exact_ids(nq * k);
  std::vector<double> dist(nq * k), exact_dist(nq * k);
  gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, refined(k, c.lists, int(c.entries) + 1), ids.data(),
                                  dist.data());
  gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, exact_ids.data(), exact_dist.data());
  EXPECT_EQ(ids, exact_ids);
  EXPECT_TRUE(gknn::test::same_canonical(exact_dist, dist));
}

// Equal vectors under shuffled ids: equal distances, returned by ascending
// id (the SQL order with ties by TID), whatever the entry order.
TEST(IvfpqExact, TiesGoToTheLowerId) {
  for (Metric metric : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    Image im = gknn::test::awkward_image({3, 3, 4, 4, 60, metric, 11});
    for (std::size_t i = 0; i < im.vectors.size(); ++i) im.vectors[i] = float(i % 3) + 1.0f;
    std::vector<std::int64_t> sorted = im.ids;
    std::sort(sorted.begin(), sorted.end());
    const float query[3] = {1, -2, 0.5f};
    const int k = 8;
    std::vector<std::int64_t> ids(k), rids(k);
    std::vector<double> dist(k), rdist(k);
    gknn::ivfpq::search_exact_cpu(im, query, 1, k, ids.data(), dist.data());
    gknn::ivfpq::search_refined_cpu(im, query, 1, refined(k, 4, 100), rids.data(), rdist.data());
    EXPECT_EQ(ids, std::vector<std::int64_t>(sorted.begin(), sorted.begin() + k));
    EXPECT_EQ(rids, ids);
    const double d = gknn::distance(metric, im.vectors.data(), query, 3);
    for (int j = 0; j < k; ++j) EXPECT_EQ(dist[j], d);
    EXPECT_FALSE(std::is_sorted(im.ids.begin(), im.ids.end()));
  }
}

// Cosine keeps the raw vectors: the distances are the operator's on them,
// not on normalised copies (a vector and its double differ in norm only).
TEST(IvfpqExact, CosineRanksTheRawVectors) {
  Image im = gknn::test::awkward_image({4, 2, 4, 2, 2, Metric::Cosine, 12});
  const float v[4] = {3, 1, -2, 5};
  std::copy(v, v + 4, im.vectors.begin());
  for (int d = 0; d < 4; ++d) im.vectors[4 + d] = 7.0f * v[d];
  const float query[4] = {0.5f, 2, 1, -1};
  std::vector<std::int64_t> ids(2);
  std::vector<double> dist(2);
  gknn::ivfpq::search_exact_cpu(im, query, 1, 2, ids.data(), dist.data());
  for (int j = 0; j < 2; ++j) {
    const std::int64_t e = std::find(im.ids.begin(), im.ids.end(), ids[j]) - im.ids.begin();
    EXPECT_EQ(dist[j], gknn::distance(Metric::Cosine, im.vectors.data() + 4 * e, query, 4));
  }
}

TEST(IvfpqExact, EmptyImagePads) {
  Image im = gknn::test::awkward_image({3, 3, 4, 4, 0, Metric::L2, 13});
  ASSERT_TRUE(im.vectors.empty());
  EXPECT_TRUE(gknn::ivfpq::has_vectors(im));  // zero entries: zero vectors
  const std::vector<float> q = gknn::test::grid_queries(2, 3, 1);
  std::vector<std::int64_t> ids(2 * 4, 5);
  std::vector<double> dist(2 * 4, 0.0);
  gknn::ivfpq::search_exact_cpu(im, q.data(), 2, 4, ids.data(), dist.data());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ids[i] == -1 && std::isnan(dist[i])) << i;
  std::fill(ids.begin(), ids.end(), 5);
  gknn::ivfpq::search_refined_cpu(im, q.data(), 2, refined(4, 2, 3), ids.data(), dist.data());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ids[i] == -1 && std::isnan(dist[i])) << i;
}

TEST(IvfpqExact, RejectsBadArguments) {
  Image im = gknn::test::awkward_image({3, 3, 4, 4, 50, Metric::L2, 14});
  const std::vector<float> q = gknn::test::grid_queries(1, 3, 2);
  std::vector<std::int64_t> ids(10);
  std::vector<double> dist(10);
  std::vector<float> fdist(10);
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_refined_cpu(im, q.data(), 1, refined(5, 1, 0), ids.data(), dist.data()); },
      "refine");
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_cpu(im, q.data(), 1, refined(5, 1, 2), ids.data(), fdist.data()); },
      "refine");
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(im, q.data(), 1, -1, ids.data(), dist.data()); }, "k");
  EXPECT_NO_THROW(gknn::ivfpq::search_exact_cpu(im, q.data(), 0, 5, nullptr, nullptr));

  Image wrong = im;
  wrong.vectors.pop_back();
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(wrong, q.data(), 1, 5, ids.data(), dist.data()); }, "vectors");
  gknn::test::expect_invalid(
      [&] {
        gknn::ivfpq::search_cpu(wrong, q.data(), 1, {5, 1}, ids.data(), fdist.data());
      },
      "vectors");

  // Half vectors of the wrong size, or beside float vectors.
  Image half = im;
  half.half_vectors.assign(im.vectors.size(), 0x3c00);
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(half, q.data(), 1, 5, ids.data(), dist.data()); }, "not several");
  half.vectors.clear();
  EXPECT_NO_THROW(gknn::ivfpq::search_exact_cpu(half, q.data(), 1, 5, ids.data(), dist.data()));
  half.half_vectors.pop_back();
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(half, q.data(), 1, 5, ids.data(), dist.data()); }, "half_vectors");
  Image bits = im;
  bits.vectors.clear();
  bits.bit_vectors.assign(im.ids.size(), 0x80);  // dim 3: one byte per entry
  EXPECT_NO_THROW(gknn::ivfpq::search_exact_cpu(bits, q.data(), 1, 5, ids.data(), dist.data()));
  bits.bit_vectors.push_back(0);
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(bits, q.data(), 1, 5, ids.data(), dist.data()); }, "bit_vectors");

  // Without vectors: the PQ search works as before, the exact ones say why not.
  Image bare = im;
  bare.vectors.clear();
  EXPECT_FALSE(gknn::ivfpq::has_vectors(bare));
  EXPECT_NO_THROW(gknn::ivfpq::search_cpu(bare, q.data(), 1, {5, 1}, ids.data(), fdist.data()));
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_exact_cpu(bare, q.data(), 1, 5, ids.data(), dist.data()); }, "no vectors");
  gknn::test::expect_invalid(
      [&] { gknn::ivfpq::search_refined_cpu(bare, q.data(), 1, refined(5, 1, 2), ids.data(), dist.data()); },
      "no vectors");
}

// A trained index over clustered data, vectors attached in entry order:
// the exact search is the exact kNN (ids are row numbers, so its ties by row
// are ties by id), and re-ranking lifts the PQ search's recall.
TEST(IvfpqExact, RefiningLiftsRecallOnATrainedIndex) {
  const int dim = 32, k = 10, nq = 100;
  std::vector<float> x = gknn::test::clustered(8000 + nq, dim, 60, 0.3f, 31);
  const std::vector<float> queries(x.end() - nq * dim, x.end());
  x.resize(8000 * dim);
  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = 32, p.m = 8, p.nbits = 8, p.metric = Metric::L2;
  Image im = gknn::test::build_index(p, x, 4000, gknn::ivfpq::kCpu);
  im.vectors.resize(x.size());
  for (std::size_t e = 0; e < im.ids.size(); ++e)
    std::copy_n(x.begin() + im.ids[e] * dim, dim, im.vectors.begin() + e * dim);
  const std::vector<std::int64_t> truth = gknn::test::exact_ids(x, queries, dim, k, Metric::L2);

  std::vector<std::int64_t> ids(nq * k), pq_ids(nq * k), refined_ids(nq * k);
  std::vector<double> dist(nq * k), refined_dist(nq * k);
  std::vector<float> pq_dist(nq * k);
  gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ids.data(), dist.data());
  EXPECT_EQ(ids, truth);
  gknn::ivfpq::search_cpu(im, queries.data(), nq, {k, 8}, pq_ids.data(), pq_dist.data());
  gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, refined(k, 8, 10), refined_ids.data(),
                                  refined_dist.data());
  const double pq = gknn::test::recall(truth, pq_ids, k), rr = gknn::test::recall(truth, refined_ids, k);
  std::printf("recall@10, 8 probes: PQ %.3f, refine 10 %.3f\n", pq, rr);
  EXPECT_GE(rr, 0.95);
  EXPECT_GT(rr, pq);
  for (int q = 0; q < nq; ++q)
    for (int j = 1; j < k; ++j) EXPECT_LE(refined_dist[q * k + j - 1], refined_dist[q * k + j]);
}

}  // namespace
