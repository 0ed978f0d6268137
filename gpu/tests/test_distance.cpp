#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gknn/distance.h"

namespace {

std::vector<float> random_vec(std::mt19937& rng, int n) {
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Distance, KnownValues) {
  const float a[] = {1, 2, 3}, b[] = {4, 5, 6};
  EXPECT_DOUBLE_EQ(gknn::l2_distance(a, b, 3), std::sqrt(27.0));
  EXPECT_FLOAT_EQ(gknn::inner_product(a, b, 3), 32.0f);
  EXPECT_FLOAT_EQ(gknn::l1_distance(a, b, 3), 9.0f);
  EXPECT_NEAR(gknn::cosine_distance(a, b, 3), 1.0 - 32.0 / std::sqrt(14.0 * 77.0), 1e-12);
  EXPECT_DOUBLE_EQ(gknn::norm(a, 3), std::sqrt(14.0));
  EXPECT_DOUBLE_EQ(gknn::distance(gknn::Metric::InnerProduct, a, b, 3), -32.0);
}

TEST(Distance, CosineOfZeroVectorIsNaN) {
  const float z[] = {0, 0}, a[] = {1, 2};
  EXPECT_TRUE(std::isnan(gknn::cosine_distance(z, a, 2)));
  EXPECT_DOUBLE_EQ(gknn::cosine_distance(a, a, 2), 0.0);
  const float neg[] = {-1, -2};
  EXPECT_DOUBLE_EQ(gknn::cosine_distance(a, neg, 2), 2.0);  // clamped similarity
}

// Lane sums agree with a double-precision reference to float rounding, for
// lengths that exercise the tail loop.
TEST(Distance, MatchesDoubleReference) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 100, 784, 1001}) {
    auto a = random_vec(rng, n), b = random_vec(rng, n);
    double l2 = 0, ip = 0, l1 = 0;
    for (int i = 0; i < n; ++i) {
      double d = double(a[i]) - b[i];
      l2 += d * d;
      ip += double(a[i]) * b[i];
      l1 += std::fabs(d);
    }
    EXPECT_NEAR(gknn::l2_squared_distance(a.data(), b.data(), n), l2, 1e-5 * l2 + 1e-6) << n;
    EXPECT_NEAR(gknn::l1_distance(a.data(), b.data(), n), l1, 1e-5 * l1 + 1e-6) << n;
    double scale = 0;
    for (int i = 0; i < n; ++i) scale += std::fabs(double(a[i]) * b[i]);
    EXPECT_NEAR(gknn::inner_product(a.data(), b.data(), n), ip, 1e-5 * scale + 1e-6) << n;
  }
}

TEST(Distance, SymmetricInArguments) {
  std::mt19937 rng(11);
  auto a = random_vec(rng, 37), b = random_vec(rng, 37);
  for (auto m : {gknn::Metric::L2, gknn::Metric::InnerProduct, gknn::Metric::Cosine, gknn::Metric::L1})
    EXPECT_EQ(gknn::distance(m, a.data(), b.data(), 37), gknn::distance(m, b.data(), a.data(), 37));
}

TEST(Distance, CanonicalScoreAndOrder) {
  double nan_neg = -std::nan("");
  double c = gknn::canonical_score(nan_neg);
  EXPECT_TRUE(std::isnan(c));
  EXPECT_FALSE(std::signbit(c));
  EXPECT_FALSE(std::signbit(gknn::canonical_score(-0.0)));
  EXPECT_TRUE(gknn::score_less(1.0, 5, 2.0, 1));
  EXPECT_TRUE(gknn::score_less(1.0, 1, 1.0, 2));
  EXPECT_FALSE(gknn::score_less(1.0, 2, 1.0, 1));
  EXPECT_TRUE(gknn::score_less(INFINITY, 9, c, 0));  // NaN above +inf
  EXPECT_FALSE(gknn::score_less(c, 0, INFINITY, 9));
  EXPECT_TRUE(gknn::score_less(c, 0, c, 1));
}

// Every finite binary16 value at random (subnormals, both zeros, the extremes).
std::vector<std::uint16_t> random_halves(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> bits(0, 0xffff);
  std::vector<std::uint16_t> v(n);
  for (auto& h : v) {
    do h = std::uint16_t(bits(rng));
    while ((h & 0x7c00) == 0x7c00);  // no NaN or infinity: halfvec stores none
  }
  return v;
}

std::vector<float> widened(const std::vector<std::uint16_t>& h) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = gknn::half_to_float(h[i]);
  return f;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// A distance over halves is the distance over their float values, bit for
// bit, in every mix of element types and every metric (what the halfvec
// operators compute), for lengths that exercise the tail loop.
TEST(Distance, HalvesAreTheirFloatValues) {
  std::mt19937 rng(17);
  for (int n : {1, 2, 7, 8, 9, 15, 17, 100, 784, 1001, 3072}) {
    const auto ha = random_halves(rng, n), hb = random_halves(rng, n);
    const auto fa = widened(ha), fb = widened(hb);
    for (auto m : {gknn::Metric::L2, gknn::Metric::InnerProduct, gknn::Metric::Cosine, gknn::Metric::L1}) {
      const double want = gknn::distance(m, fa.data(), fb.data(), n);
      EXPECT_TRUE(same_bits(gknn::distance(m, ha.data(), hb.data(), n), want)) << n << " " << int(m);
      EXPECT_TRUE(same_bits(gknn::distance(m, ha.data(), fb.data(), n), want)) << n << " " << int(m);
      EXPECT_TRUE(same_bits(gknn::distance(m, fa.data(), hb.data(), n), want)) << n << " " << int(m);
    }
  }
  const std::uint16_t one = 0x3c00, two = 0x4000;                                // 1.0, 2.0
  const std::uint16_t a[] = {one, two, 0x4200}, b[] = {0x4400, 0x4500, 0x4600};  // {1,2,3}, {4,5,6}
  EXPECT_DOUBLE_EQ(gknn::l2_distance(a, b, 3), std::sqrt(27.0));
  EXPECT_FLOAT_EQ(gknn::inner_product(a, b, 3), 32.0f);
}

}  // namespace
