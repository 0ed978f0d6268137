// The IVF-PQ image the kernel benchmarks search: the quantizer trained on
// `device` (gknn::ivfpq::kCpu: the CPU) from the first `sample` rows of
// `base`, every row encoded there, the entries laid out list by list (ids =
// row numbers) with their vectors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gknn/ivfpq.h"

inline gknn::ivfpq::Image bench_image(const std::vector<float>& base, const gknn::ivfpq::Params& p,
                                      std::int64_t sample, int device = 0) {
  const int dim = p.dim, cs = gknn::ivfpq::code_size(p);
  const std::int64_t n = std::int64_t(base.size()) / dim;
  gknn::ivfpq::Image image;
  image.quantizer = gknn::ivfpq::train(p, base.data(), std::min(n, sample), device);
  std::vector<std::int32_t> list_of(n);
  std::vector<std::uint8_t> codes(std::size_t(n) * cs);
  gknn::ivfpq::encode(image.quantizer, base.data(), n, device, list_of.data(), codes.data());
  image.offsets.assign(p.lists + 1, 0);
  for (std::int32_t l : list_of) image.offsets[l + 1]++;
  for (int l = 0; l < p.lists; ++l) image.offsets[l + 1] += image.offsets[l];
  std::vector<std::int64_t> fill(image.offsets.begin(), image.offsets.end() - 1);
  image.codes.resize(codes.size());
  image.ids.resize(n);
  image.vectors.resize(base.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = fill[list_of[i]]++;
    std::copy_n(&codes[i * cs], cs, &image.codes[at * cs]);
    image.ids[at] = i;
    std::copy_n(&base[i * dim], dim, &image.vectors[at * dim]);
  }
  return image;
}
