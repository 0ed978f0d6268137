// DeviceImage::updated against the CPU reference: a GPU-resident image
// brought up to date by a chain of deltas searches exactly as the CPU
// search of the edited image and as a DeviceImage made afresh from it (the
// PQ search, the re-rank and the exact search: same ids, same distance
// bits), holds the same bytes, and gives back the same ids; the image it
// came from is left as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"
#include "gpu_env.h"
#include "ivfpq_data.h"
#include "ivfpq_delta_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::DeviceImage;
using gknn::ivfpq::Image;
using gknn::ivfpq::ImageDelta;
using gknn::ivfpq::SearchParams;
using gknn::test::AwkwardImage;

SearchParams params(int k, int probes, int refine = 0) {
  SearchParams sp;
  sp.k = k, sp.probes = probes, sp.refine = refine;
  return sp;
}

// Every search of `dev` equals the CPU's on `im`.
void expect_searches_equal(const Image& im, const DeviceImage& dev, const std::vector<float>& queries,
                           std::int64_t nq, const std::string& where) {
  const int lists = im.quantizer.params.lists;
  for (int k : {1, 9, 60})
    for (int probes : {1, 3, lists}) {
      std::vector<std::int64_t> ic(nq * k), ig(nq * k, -7);
      std::vector<float> fc(nq * k), fg(nq * k);
      gknn::ivfpq::search_cpu(im, queries.data(), nq, params(k, probes), ic.data(), fc.data());
      dev.search(queries.data(), nq, params(k, probes), ig.data(), fg.data());
      EXPECT_EQ(ic, ig) << where << " search k " << k << " probes " << probes;
      EXPECT_EQ(0, std::memcmp(fc.data(), fg.data(), sizeof(float) * fc.size())) << where;
      if (!gknn::ivfpq::has_vectors(im)) continue;
      std::vector<double> dc(nq * k), dg(nq * k);
      gknn::ivfpq::search_refined_cpu(im, queries.data(), nq, params(k, probes, 3), ic.data(), dc.data());
      dev.search_refined(queries.data(), nq, params(k, probes, 3), ig.data(), dg.data());
      EXPECT_EQ(ic, ig) << where << " refined k " << k << " probes " << probes;
      EXPECT_EQ(0, std::memcmp(dc.data(), dg.data(), sizeof(double) * dc.size())) << where;
    }
  if (!gknn::ivfpq::has_vectors(im)) return;
  for (int k : {1, 7, int(im.ids.size()) + 3}) {
    std::vector<std::int64_t> ic(nq * k), ig(nq * k, -7);
    std::vector<double> dc(nq * k), dg(nq * k);
    gknn::ivfpq::search_exact_cpu(im, queries.data(), nq, k, ic.data(), dc.data());
    dev.search_exact(queries.data(), nq, k, ig.data(), dg.data());
    EXPECT_EQ(ic, ig) << where << " exact k " << k;
    EXPECT_EQ(0, std::memcmp(dc.data(), dg.data(), sizeof(double) * dc.size())) << where << " exact k " << k;
  }
}

std::vector<std::int64_t> all_ids(const DeviceImage& dev, std::int64_t n) {
  std::vector<std::int64_t> ids(n);
  dev.copy_ids(0, n, ids.data());
  return ids;
}

class IvfpqDeltaGpu : public ::testing::TestWithParam<AwkwardImage> {};

TEST_P(IvfpqDeltaGpu, ChainsOfDeltasSearchAsTheEditedImage) {
  GKNN_NEED_GPU();
  const AwkwardImage c = GetParam();
  for (int kind = 0; kind < 4; ++kind) {  // float, none, binary16, bit vectors
    Image twin;
    Image im = kind == 2   ? gknn::test::half_image(c, &twin)
               : kind == 3 ? gknn::test::bit_image(c)
                           : gknn::test::awkward_image(c);
    if (kind == 1) im.vectors.clear();
    DeviceImage dev(im, 0);
    const std::vector<float> queries = gknn::test::grid_queries(40, c.dim, c.seed + 7);
    std::int64_t next_id = std::int64_t(1) << 40;
    for (int round = 0; round < 8; ++round) {
      gknn::test::Lists after;
      const ImageDelta d =
          gknn::test::random_delta(im, 2 + round % 5 * 4, c.seed * 50 + round, &next_id, round % 2, &after);
      const Image before = im;
      im = gknn::ivfpq::apply_delta(im, d);
      DeviceImage next = dev.updated(d);
      const std::string where = "round " + std::to_string(round) + " kind " + std::to_string(kind);
      EXPECT_EQ(all_ids(next, std::int64_t(im.ids.size())), im.ids) << where;
      const DeviceImage fresh(im, 0);
      EXPECT_EQ(next.device_bytes(), fresh.device_bytes()) << where;
      EXPECT_EQ(next.has_vectors(), fresh.has_vectors()) << where;
      expect_searches_equal(im, next, queries, 40, where);
      if (round == 0) expect_searches_equal(before, dev, queries, 40, where + " (old image untouched)");
      dev = std::move(next);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, IvfpqDeltaGpu,
                         ::testing::Values(AwkwardImage{3, 3, 5, 7, 400, Metric::Cosine, 71},
                                           AwkwardImage{17, 17, 4, 9, 600, Metric::InnerProduct, 72},
                                           AwkwardImage{16, 8, 8, 6, 3000, Metric::L2, 73},
                                           AwkwardImage{8, 4, 8, 5, 0, Metric::L2, 74}),
                         [](const auto& info) {
                           const AwkwardImage& c = info.param;
                           return "dim" + std::to_string(c.dim) + "_lists" + std::to_string(c.lists) + "_n" +
                                  std::to_string(c.entries) + "_" + gknn::test::metric_label(c.metric);
                         });

// A trained index (continuous data, the GEMM path of the exact search) grown
// by a large delta, then most of it removed.
TEST(IvfpqDeltaGpu, TrainedIndexGrowsAndShrinks) {
  GKNN_NEED_GPU();
  const int dim = 32, n = 6000;
  std::vector<float> x = gknn::test::clustered(2 * n, dim, 40, 0.3f, 75);
  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = 24, p.m = 8, p.nbits = 8, p.metric = Metric::L2;
  Image all = gknn::test::build_index(p, x, 3000, gknn::ivfpq::kCpu);
  all.vectors.resize(x.size());
  for (std::size_t e = 0; e < all.ids.size(); ++e)
    std::copy_n(x.begin() + all.ids[e] * dim, dim, all.vectors.begin() + e * dim);
  // The base: rows < n; the delta appends the others to their lists.
  gknn::test::Lists lists = gknn::test::lists_of(all), base_lists(p.lists);
  ImageDelta grow;
  std::vector<std::uint8_t> grow_rows;  // the new entries' vectors as bytes (Entry::vector)
  for (int l = 0; l < p.lists; ++l) {
    gknn::ivfpq::Splice s;
    s.list = l;
    s.first = std::int64_t(grow.ids.size());
    for (const auto& e : lists[l]) {
      if (e.id < n) {
        base_lists[l].push_back(e);
        continue;
      }
      grow.ids.push_back(e.id);
      grow.codes.insert(grow.codes.end(), e.code.begin(), e.code.end());
      grow_rows.insert(grow_rows.end(), e.vector.begin(), e.vector.end());
    }
    s.count = std::int64_t(grow.ids.size()) - s.first;
    s.at = std::int64_t(base_lists[l].size());
    grow.splices.push_back(s);
  }
  gknn::test::put_rows(grow, gknn::ivfpq::VectorElement::Float32, grow_rows);
  const Image base = gknn::test::image_of(all, base_lists, true);
  const Image grown = gknn::ivfpq::apply_delta(base, grow);
  const DeviceImage dev = DeviceImage(base, 0).updated(grow);
  const std::vector<float> queries = gknn::test::gaussian(300, dim, 76);
  expect_searches_equal(grown, dev, queries, 300, "grown");
  // Remove all but the first entry of every list.
  ImageDelta shrink;
  for (int l = 0; l < p.lists; ++l) {
    const std::int64_t size = grown.offsets[l + 1] - grown.offsets[l];
    if (size > 1) shrink.splices.push_back(gknn::ivfpq::Splice{l, 1, size - 1, 0, 0});
  }
  const Image shrunk = gknn::ivfpq::apply_delta(grown, shrink);
  expect_searches_equal(shrunk, dev.updated(shrink), queries, 300, "shrunk");
}

// A delta that does not fit is refused before anything is made; ids past
// the entries are refused too.
TEST(IvfpqDeltaGpu, MisfitsAreRefused) {
  GKNN_NEED_GPU();
  const Image im = gknn::test::awkward_image({4, 2, 4, 3, 30, Metric::L2, 77});
  const DeviceImage dev(im, 0);
  ImageDelta d;
  d.ids = {5};
  d.codes = {1};
  d.splices = {gknn::ivfpq::Splice{0, 0, 0, 0, 1}};  // no vectors for an image with them
  EXPECT_THROW((void)dev.updated(d), gknn::Error);
  std::vector<std::int64_t> out(40);
  EXPECT_THROW(dev.copy_ids(25, 10, out.data()), gknn::Error);
  EXPECT_NO_THROW(dev.copy_ids(0, 30, out.data()));
}

}  // namespace
