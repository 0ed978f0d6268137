// Input distributions for the k-selection tests (the papers' adversaries
// among them), generated from a seed so every failure reproduces.
#pragma once

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace gknn::test {

enum class Dist {
  Uniform,
  Ascending,
  Descending,
  AllEqual,
  FewDistinct,
  BucketKiller,
  SignedZeros,
  NonFinite
};

inline std::string dist_name(Dist d) {
  const char* names[] = {"Uniform",     "Ascending",    "Descending",  "AllEqual",
                         "FewDistinct", "BucketKiller", "SignedZeros", "NonFinite"};
  return names[static_cast<int>(d)];
}

inline const std::vector<Dist>& all_dists() {
  static const std::vector<Dist> d = {Dist::Uniform,     Dist::Ascending,   Dist::Descending,
                                      Dist::AllEqual,    Dist::FewDistinct, Dist::BucketKiller,
                                      Dist::SignedZeros, Dist::NonFinite};
  return d;
}

template <typename Key>
std::vector<Key> make_keys(Dist dist, std::int64_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1000.0, 1000.0);
  std::vector<Key> v(n);
  auto val = [](double x) {
    return static_cast<Key>(std::is_floating_point<Key>::value ? x : std::floor(x));
  };
  for (auto& x : v) x = val(u(rng));
  switch (dist) {
    case Dist::Uniform:
      break;
    case Dist::Ascending:
      std::sort(v.begin(), v.end());
      break;
    case Dist::Descending:
      std::sort(v.begin(), v.end(), [](Key a, Key b) { return b < a; });
      break;
    case Dist::AllEqual:
      std::fill(v.begin(), v.end(), val(1.0));
      break;
    case Dist::FewDistinct:
      for (auto& x : v) x = val(double(rng() % 4));
      break;
    case Dist::BucketKiller:  // all 1.0 but four values, each one digit away
      std::fill(v.begin(), v.end(), val(1.0));
      if (std::is_floating_point<Key>::value) {
        for (int d = 0; d < 4 && d < n; ++d) {
          float f = 1.0f;
          std::uint32_t bits;
          std::memcpy(&bits, &f, 4);
          bits ^= 1u << (8 * d + 1);
          std::memcpy(&f, &bits, 4);
          v[(rng() % n)] = static_cast<Key>(f);
        }
      } else {
        for (int d = 0; d < 4 && d < n; ++d)
          v[rng() % n] = static_cast<Key>(1 + (std::int64_t(1) << (8 * d)));
      }
      break;
    case Dist::SignedZeros:
      for (auto& x : v) x = (rng() % 3 == 0) ? val(-(double(rng() % 5))) : (rng() % 2 ? Key(0) : val(-0.0));
      break;
    case Dist::NonFinite:
      if (std::is_floating_point<Key>::value) {
        for (auto& x : v) {
          switch (rng() % 8) {
            case 0:
              x = std::numeric_limits<Key>::quiet_NaN();
              break;
            case 1:
              x = -std::numeric_limits<Key>::quiet_NaN();
              break;
            case 2:
              x = std::numeric_limits<Key>::infinity();
              break;
            case 3:
              x = -std::numeric_limits<Key>::infinity();
              break;
            default:
              break;
          }
        }
      } else {
        for (auto& x : v)
          if (rng() % 4 == 0)
            x = (rng() % 2) ? std::numeric_limits<Key>::max() : std::numeric_limits<Key>::min();
      }
      break;
  }
  return v;
}

}  // namespace gknn::test
