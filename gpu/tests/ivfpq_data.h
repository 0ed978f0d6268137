// Data and helpers shared by the IVF-PQ tests: clustered synthetic vectors,
// an Image built from encode()'s output, recall against exact search.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gknn/ivfpq.h"
#include "gknn/knn.h"

namespace gknn::test {

// n x dim rows around `clusters` Gaussian centres (spread 1, noise `noise`).
inline std::vector<float> clustered(std::int64_t n, int dim, int clusters, float noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> centres(std::size_t(clusters) * dim), x(std::size_t(n) * dim);
  for (auto& c : centres) c = gauss(rng);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = pick(rng);
    for (int d = 0; d < dim; ++d) x[i * dim + d] = centres[std::size_t(c) * dim + d] + noise * gauss(rng);
  }
  return x;
}

// n x dim standard normal rows.
inline std::vector<float> gaussian(std::int64_t n, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(std::size_t(n) * dim);
  for (auto& v : x) v = gauss(rng);
  return x;
}

// Entries grouped by list, in row order within a list; ids are row numbers.
inline ivfpq::Image make_image(const ivfpq::Quantizer& q, const std::vector<std::int32_t>& list_of,
                               const std::vector<std::uint8_t>& codes) {
  const int cs = ivfpq::code_size(q.params);
  const std::int64_t n = std::int64_t(list_of.size());
  ivfpq::Image im;
  im.quantizer = q;
  im.offsets.assign(q.params.lists + 1, 0);
  for (auto l : list_of) ++im.offsets[l + 1];
  for (int l = 0; l < q.params.lists; ++l) im.offsets[l + 1] += im.offsets[l];
  im.codes.resize(codes.size());
  im.ids.resize(n);
  std::vector<std::int64_t> fill(im.offsets.begin(), im.offsets.end() - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = fill[list_of[i]]++;
    im.ids[at] = i;
    std::copy(codes.begin() + i * cs, codes.begin() + (i + 1) * cs, im.codes.begin() + at * cs);
  }
  return im;
}

// Train on the first `sample` rows, encode all n, build the image.
inline ivfpq::Image build_index(const ivfpq::Params& p, const std::vector<float>& x, std::int64_t sample,
                                int device) {
  const std::int64_t n = std::int64_t(x.size()) / p.dim;
  ivfpq::Quantizer q = ivfpq::train(p, x.data(), sample, device);
  std::vector<std::int32_t> list_of(n);
  std::vector<std::uint8_t> codes(std::size_t(n) * ivfpq::code_size(q.params));
  ivfpq::encode(q, x.data(), n, device, list_of.data(), codes.data());
  return make_image(q, list_of, codes);
}

// Exact top-k ids (CPU reference) of the queries over x.
inline std::vector<std::int64_t> exact_ids(const std::vector<float>& x, const std::vector<float>& queries,
                                           int dim, int k, Metric metric) {
  KnnRequest r;
  r.base = x.data();
  r.n = std::int64_t(x.size()) / dim;
  r.queries = queries.data();
  r.nq = std::int64_t(queries.size()) / dim;
  r.dim = dim;
  r.k = k;
  r.metric = metric;
  std::vector<std::int64_t> ids(r.nq * k);
  std::vector<double> dist(r.nq * k);
  exact_knn_cpu(r, ids.data(), dist.data());
  return ids;
}

// Mean fraction of each query's exact top-k found in its approximate top-k.
inline double recall(const std::vector<std::int64_t>& exact, const std::vector<std::int64_t>& approx, int k) {
  const std::size_t nq = exact.size() / k;
  std::size_t hits = 0;
  for (std::size_t q = 0; q < nq; ++q) {
    std::set<std::int64_t> truth(exact.begin() + q * k, exact.begin() + (q + 1) * k);
    for (int j = 0; j < k; ++j) hits += truth.count(approx[q * k + j]);
  }
  return double(hits) / double(nq * k);
}

}  // namespace gknn::test
