// apply_delta on a host Image: the result is the image whose lists were
// edited as the delta says (entries, order, codes, ids and vectors equal to
// the oracle's), and a delta that does not fit is refused with the image
// unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"
#include "ivfpq_delta_data.h"
#include "ivfpq_exact_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::Image;
using gknn::ivfpq::ImageDelta;
using gknn::ivfpq::Splice;
using gknn::test::AwkwardImage;

void expect_same_image(const Image& want, const Image& got) {
  EXPECT_EQ(want.offsets, got.offsets);
  EXPECT_EQ(want.codes, got.codes);
  EXPECT_EQ(want.ids, got.ids);
  ASSERT_EQ(want.vectors.size(), got.vectors.size());
  if (!want.vectors.empty())  // memcmp of no vectors would pass null pointers (UBSan)
    EXPECT_EQ(0, std::memcmp(want.vectors.data(), got.vectors.data(), sizeof(float) * want.vectors.size()));
  EXPECT_EQ(want.half_vectors, got.half_vectors);
  EXPECT_EQ(want.bit_vectors, got.bit_vectors);
}

class IvfpqDeltaCpu : public ::testing::TestWithParam<AwkwardImage> {};

// A chain of random deltas (removals, insertions, replacements, appends,
// reused ids), each applied to the last result, equals the oracle's image
// every time, made anew or edited in place; with float, binary16 or bit
// vectors, and without.
TEST_P(IvfpqDeltaCpu, ChainsOfDeltasEqualTheEditedImage) {
  const AwkwardImage c = GetParam();
  // Stored vectors: float, none, binary16, bit strings.
  for (int kind = 0; kind < 4; ++kind) {
    Image twin;
    Image im = kind == 2   ? gknn::test::half_image(c, &twin)
               : kind == 3 ? gknn::test::bit_image(c)
                           : gknn::test::awkward_image(c);
    if (kind == 1) im.vectors.clear();
    std::int64_t next_id = std::int64_t(1) << 40;
    for (int round = 0; round < 12; ++round) {
      gknn::test::Lists after;
      const ImageDelta d =
          gknn::test::random_delta(im, 1 + round % 7 * 3, c.seed * 100 + round, &next_id, round % 2, &after);
      // An image of no entries takes the delta's vectors (random_delta gives
      // it float ones).
      const bool vec =
          im.ids.empty() || !im.vectors.empty() || !im.half_vectors.empty() || !im.bit_vectors.empty();
      const auto element =
          im.ids.empty() ? gknn::ivfpq::VectorElement::Float32 : gknn::ivfpq::vector_element(im);
      const Image want = gknn::test::image_of(im, after, vec, element);
      const Image got = gknn::ivfpq::apply_delta(im, d);
      expect_same_image(want, got);
      Image edited = im;
      gknn::ivfpq::apply_delta_in_place(edited, d);
      expect_same_image(want, edited);
      im = got;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, IvfpqDeltaCpu,
                         ::testing::Values(AwkwardImage{1, 1, 4, 1, 50, Metric::L2, 61},
                                           AwkwardImage{3, 3, 5, 7, 300, Metric::Cosine, 62},
                                           AwkwardImage{17, 17, 4, 9, 400, Metric::InnerProduct, 63},
                                           AwkwardImage{8, 4, 8, 5, 0, Metric::L2, 64}),
                         [](const auto& info) {
                           const AwkwardImage& c = info.param;
                           return "dim" + std::to_string(c.dim) + "_lists" + std::to_string(c.lists) + "_n" +
                                  std::to_string(c.entries) + "_" + gknn::test::metric_label(c.metric);
                         });

// Insertions at one place keep the given order; a splice at a list's end
// appends; a delta of nothing changes nothing.
TEST(IvfpqDeltaCpu, InsertionsAtOnePlaceKeepTheirOrder) {
  Image im = gknn::test::awkward_image({4, 2, 4, 3, 30, Metric::L2, 65});
  const std::int64_t size0 = im.offsets[1] - im.offsets[0];
  ImageDelta d;
  for (int i = 0; i < 3; ++i) {
    d.ids.push_back(1000 + i);
    d.codes.push_back(std::uint8_t(i));
    for (int j = 0; j < 4; ++j) d.vectors.push_back(float(i));
  }
  d.splices = {Splice{0, 1, 0, 2, 1}, Splice{0, 1, 0, 0, 2}, Splice{0, size0, 0, 0, 1}};
  const Image got = gknn::ivfpq::apply_delta(im, d);
  ASSERT_EQ(got.offsets[1], size0 + 4);
  EXPECT_EQ(got.ids[0], im.ids[0]);
  EXPECT_EQ(got.ids[1], 1002);
  EXPECT_EQ(got.ids[2], 1000);
  EXPECT_EQ(got.ids[3], 1001);
  EXPECT_EQ(got.ids[4], im.ids[1]);
  EXPECT_EQ(got.ids[size0 + 3], 1000);
  expect_same_image(im, gknn::ivfpq::apply_delta(im, ImageDelta{}));
}

// What does not fit is refused: splices out of order or overlapping, past a
// list's end, of a list that does not exist, using missing new entries;
// new entries without vectors for an image that has them, or the reverse;
// codes of the wrong size.
TEST(IvfpqDeltaCpu, DeltasThatDoNotFitAreRefused) {
  const Image im = gknn::test::awkward_image({4, 2, 4, 3, 30, Metric::L2, 66});
  const std::int64_t size0 = im.offsets[1] - im.offsets[0];
  ImageDelta one;
  one.ids = {77};
  one.codes = {1};
  one.vectors = {1, 2, 3, 4};
  auto refused = [&](ImageDelta d) {
    try {
      (void)gknn::ivfpq::apply_delta(im, d);
      return false;
    } catch (const gknn::Error& e) {
      return e.code() == gknn::ErrorCode::InvalidArgument;
    }
  };
  auto with = [&](std::vector<Splice> s) {
    ImageDelta d = one;
    d.splices = std::move(s);
    return d;
  };
  EXPECT_FALSE(refused(with({Splice{0, 0, 1, 0, 1}})));
  Image kept = im;
  EXPECT_THROW(gknn::ivfpq::apply_delta_in_place(kept, with({Splice{0, size0 + 1, 0, 0, 1}})), gknn::Error);
  expect_same_image(im, kept);                                                 // refused in place: unchanged
  EXPECT_TRUE(refused(with({Splice{1, 0, 0, 0, 1}, Splice{0, 0, 0, 0, 1}})));  // lists out of order
  EXPECT_TRUE(refused(with({Splice{0, 3, 0, 0, 1}, Splice{0, 1, 0, 0, 1}})));  // positions out of order
  EXPECT_TRUE(refused(with({Splice{0, 0, 3, 0, 1}, Splice{0, 2, 1, 0, 0}})));  // overlapping
  EXPECT_TRUE(refused(with({Splice{0, size0, 1, 0, 0}})));                     // past the end
  EXPECT_TRUE(refused(with({Splice{0, size0 + 1, 0, 0, 1}})));
  EXPECT_TRUE(refused(with({Splice{3, 0, 0, 0, 1}})));  // no such list
  EXPECT_TRUE(refused(with({Splice{-1, 0, 0, 0, 1}})));
  EXPECT_TRUE(refused(with({Splice{0, 0, 0, 0, 2}})));  // missing new entries
  EXPECT_TRUE(refused(with({Splice{0, 0, 0, 1, 1}})));
  EXPECT_TRUE(refused(with({Splice{0, -1, 0, 0, 1}})));
  ImageDelta bare = with({Splice{0, 0, 0, 0, 1}});
  bare.vectors.clear();
  EXPECT_TRUE(refused(bare));  // an image with vectors needs them
  ImageDelta odd = with({Splice{0, 0, 0, 0, 1}});
  odd.vectors.pop_back();
  EXPECT_TRUE(refused(odd));
  ImageDelta halves = with({Splice{0, 0, 0, 0, 1}});
  halves.vectors.clear();
  halves.half_vectors = {1, 2, 3, 4};
  EXPECT_TRUE(refused(halves));  // vectors of another element type
  ImageDelta wide = with({Splice{0, 0, 0, 0, 1}});
  wide.codes.push_back(0);
  EXPECT_TRUE(refused(wide));
  Image novec = im;
  novec.vectors.clear();
  EXPECT_THROW((void)gknn::ivfpq::apply_delta(novec, with({Splice{0, 0, 0, 0, 1}})), gknn::Error);
  EXPECT_NO_THROW((void)gknn::ivfpq::apply_delta(novec, bare));
}

}  // namespace
