// Images with stored vectors for the exact-search tests (re-rank and exact
// search), and the brute-force oracle they are checked against.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gknn/distance.h"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq_data.h"

namespace gknn::test {

inline std::string metric_label(Metric m) {
  return m == Metric::L2 ? "L2" : m == Metric::InnerProduct ? "InnerProduct" : "Cosine";
}

struct AwkwardImage {
  int dim, m, nbits, lists;
  std::int64_t entries;
  Metric metric;
  unsigned seed;
};

inline void PrintTo(const AwkwardImage& c, std::ostream* os) {
  *os << "dim " << c.dim << " m " << c.m << " nbits " << c.nbits << " lists " << c.lists << " entries "
      << c.entries << " " << metric_label(c.metric);
}

// An image built by hand, not trained: a random quantizer, entries spread
// over the lists unevenly (every third list empty), random codes, and
// vectors on a coarse integer grid (so exact distances tie often), a few of
// them zero, NaN or infinite. Ids are distinct TID-like integers
// (block << 16 | offset) in a random order, so ids are not sorted within a
// list and id order differs from entry order.
inline ivfpq::Image awkward_image(const AwkwardImage& c) {
  std::mt19937 rng(c.seed);
  std::uniform_int_distribution<int> grid(-2, 2);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  ivfpq::Image im;
  ivfpq::Params& p = im.quantizer.params;
  p.dim = c.dim, p.lists = c.lists, p.m = c.m, p.nbits = c.nbits, p.metric = c.metric;
  im.quantizer.centroids.resize(std::size_t(c.lists) * c.dim);
  for (auto& v : im.quantizer.centroids) v = float(grid(rng));
  im.quantizer.codebooks.resize(std::size_t(c.m) * (std::size_t(1) << c.nbits) * (c.dim / c.m));
  for (auto& v : im.quantizer.codebooks) v = 0.5f * gauss(rng);

  std::vector<int> usable;
  for (int l = 0; l < c.lists; ++l)
    if (l % 3 != 1 || c.lists == 1) usable.push_back(l);
  std::vector<std::int32_t> list_of(c.entries);
  std::uniform_int_distribution<std::size_t> pick(0, usable.size() - 1);
  for (auto& l : list_of) l = usable[std::min(pick(rng), pick(rng))];  // uneven sizes
  im.offsets.assign(c.lists + 1, 0);
  for (auto l : list_of) ++im.offsets[l + 1];
  for (int l = 0; l < c.lists; ++l) im.offsets[l + 1] += im.offsets[l];

  std::vector<std::int64_t> tids(c.entries);
  for (std::int64_t i = 0; i < c.entries; ++i) tids[i] = ((i / 7 + 1) << 16) | (i % 7 + 1);
  std::shuffle(tids.begin(), tids.end(), rng);

  const int cs = ivfpq::code_size(p);
  im.codes.resize(std::size_t(c.entries) * cs);
  for (auto& b : im.codes) b = std::uint8_t(rng());
  if ((c.m * c.nbits) % 8 != 0)  // bits past the last code stay zero
    for (std::int64_t e = 0; e < c.entries; ++e)
      im.codes[e * cs + cs - 1] &= (1u << ((c.m * c.nbits) % 8)) - 1;
  im.ids.resize(c.entries);
  im.vectors.resize(std::size_t(c.entries) * c.dim);
  std::vector<std::int64_t> fill(im.offsets.begin(), im.offsets.end() - 1);
  for (std::int64_t i = 0; i < c.entries; ++i) {
    const std::int64_t at = fill[list_of[i]]++;
    im.ids[at] = tids[i];
    float* v = im.vectors.data() + at * c.dim;
    for (int d = 0; d < c.dim; ++d) v[d] = float(grid(rng));
    if (i % 37 == 5) std::fill(v, v + c.dim, 0.0f);         // cosine: NaN distance
    if (i % 41 == 9) v[c.dim / 2] = NAN;                    // NaN distance everywhere
    if (i % 43 == 11) v[0] = i % 2 ? INFINITY : -INFINITY;  // infinite (or NaN) distance
  }
  return im;
}

// An awkward image's binary16 twin: each vector scaled off the grid
// (x 0.37, some + 0.001: most elements round when made half; zeros stay),
// stored as half_vectors; `twin` gets the same image with the halves'
// float values as its float vectors. The exact searches over the two must
// agree bit for bit (a halfvec distance is the distance of the widened
// elements). NaN and infinities stay.
inline ivfpq::Image half_image(const AwkwardImage& c, ivfpq::Image* twin) {
  ivfpq::Image im = awkward_image(c);
  im.half_vectors.resize(im.vectors.size());
  for (std::size_t i = 0; i < im.vectors.size(); ++i) {
    const float v = im.vectors[i];  // zeros stay zero (cosine's NaN rows)
    im.half_vectors[i] = float_to_half(v * 0.37f + (v != 0.0f && i % 5 == 0 ? 0.001f : 0.0f));
    im.vectors[i] = half_to_float(im.half_vectors[i]);
  }
  *twin = im;
  twin->half_vectors.clear();
  im.vectors.clear();
  return im;
}

// An awkward image's bit-string twin: element d of an entry is set where its
// grid value is > 0; stored packed, first element in the most significant bit
// (PostgreSQL's layout); pad bits zero.
inline ivfpq::Image bit_image(const AwkwardImage& c) {
  ivfpq::Image im = awkward_image(c);
  const std::size_t row = (std::size_t(c.dim) + 7) / 8;
  im.bit_vectors.assign(im.ids.size() * row, 0);
  for (std::size_t e = 0; e < im.ids.size(); ++e)
    for (int d = 0; d < c.dim; ++d)
      if (im.vectors[e * c.dim + d] > 0) im.bit_vectors[e * row + d / 8] |= std::uint8_t(0x80 >> (d % 8));
  im.vectors.clear();
  return im;
}

// The oracle of bit images: queries (0/1 values) packed, the popcount of
// the XOR with each entry's bytes, a full sort by (count, id).
inline void oracle_bits(const ivfpq::Image& im, const float* queries, std::int64_t nq, int k,
                        std::vector<std::int64_t>& ids, std::vector<double>& dist) {
  const int dim = im.quantizer.params.dim;
  const std::size_t row = (std::size_t(dim) + 7) / 8;
  ids.assign(nq * k, -7);
  dist.assign(nq * k, 0.0);
  for (std::int64_t q = 0; q < nq; ++q) {
    std::vector<std::uint8_t> packed(row, 0);
    for (int d = 0; d < dim; ++d)
      if (queries[q * dim + d] != 0) packed[d / 8] |= std::uint8_t(0x80 >> (d % 8));
    std::vector<std::pair<double, std::int64_t>> all;
    for (std::size_t e = 0; e < im.ids.size(); ++e) {
      int count = 0;
      for (std::size_t b = 0; b < row; ++b)
        count += __builtin_popcount(im.bit_vectors[e * row + b] ^ packed[b]);
      all.push_back({double(count), im.ids[e]});
    }
    std::sort(all.begin(), all.end());
    for (int j = 0; j < k; ++j) {
      const bool real = j < int(all.size());
      ids[q * k + j] = real ? all[j].second : -1;
      dist[q * k + j] = real ? all[j].first : NAN;
    }
  }
}

// Queries on the same grid, a zero one among them.
inline std::vector<float> grid_queries(std::int64_t nq, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> grid(-2, 2);
  std::vector<float> q(std::size_t(nq) * dim);
  for (auto& v : q) v = float(grid(rng));
  if (nq > 2) std::fill(q.begin() + 2 * dim, q.begin() + 3 * dim, 0.0f);
  return q;
}

// The oracle: the k best of `entries` (image positions) for one query, by a
// full sort on (gknn::distance, NaN last, id); padded with id -1, NaN.
inline void oracle_rank(const ivfpq::Image& im, const float* query, std::vector<std::int64_t> entries, int k,
                        std::int64_t* ids, double* dist) {
  const ivfpq::Params& p = im.quantizer.params;
  std::vector<std::pair<double, std::int64_t>> all;
  for (std::int64_t e : entries)
    all.push_back({distance(p.metric, im.vectors.data() + e * p.dim, query, p.dim), im.ids[e]});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    const bool na = std::isnan(a.first), nb = std::isnan(b.first);
    if (na != nb) return nb;
    if (!na && a.first != b.first) return a.first < b.first;
    return a.second < b.second;
  });
  for (int j = 0; j < k; ++j) {
    const bool real = j < int(all.size());
    ids[j] = real ? all[j].second : -1;
    dist[j] = real ? all[j].first : NAN;
  }
}

// Exact search by the oracle: every entry ranked.
inline void oracle_exact(const ivfpq::Image& im, const float* queries, std::int64_t nq, int k,
                         std::vector<std::int64_t>& ids, std::vector<double>& dist) {
  const int dim = im.quantizer.params.dim;
  ids.assign(nq * k, -7);
  dist.assign(nq * k, 0.0);
  std::vector<std::int64_t> every(im.ids.size());
  for (std::size_t e = 0; e < every.size(); ++e) every[e] = std::int64_t(e);
  for (std::int64_t q = 0; q < nq; ++q)
    oracle_rank(im, queries + q * dim, every, k, ids.data() + q * k, dist.data() + q * k);
}

// Re-rank by the oracle: search_cpu's refine x k PQ candidates (ids mapped
// back to entries; the ids are distinct), ranked by the oracle.
inline void oracle_refined(const ivfpq::Image& im, const float* queries, std::int64_t nq,
                           const ivfpq::SearchParams& sp, std::vector<std::int64_t>& ids,
                           std::vector<double>& dist) {
  const int dim = im.quantizer.params.dim;
  std::map<std::int64_t, std::int64_t> entry_of;
  for (std::size_t e = 0; e < im.ids.size(); ++e) entry_of[im.ids[e]] = std::int64_t(e);
  const int want = int(std::min<std::int64_t>(std::int64_t(sp.refine) * sp.k, std::int64_t(im.ids.size())));
  ids.assign(nq * sp.k, -7);
  dist.assign(nq * sp.k, 0.0);
  for (std::int64_t q = 0; q < nq; ++q) {
    std::vector<std::int64_t> cand_ids(want);
    std::vector<float> cand_dist(want);
    if (want > 0)
      ivfpq::search_cpu(im, queries + q * dim, 1, {want, sp.probes}, cand_ids.data(), cand_dist.data());
    std::vector<std::int64_t> entries;
    for (std::int64_t id : cand_ids)
      if (id >= 0) entries.push_back(entry_of.at(id));
    oracle_rank(im, queries + q * dim, entries, sp.k, ids.data() + q * sp.k, dist.data() + q * sp.k);
  }
}

// Distances compare as the contract states them: canonical (one NaN, +0)
// and otherwise bit for bit.
inline bool same_canonical(const std::vector<double>& want, const std::vector<double>& got) {
  if (want.size() != got.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double a = canonical_score(want[i]), b = got[i];
    if (std::memcmp(&a, &b, sizeof(double)) != 0) return false;
  }
  return true;
}

// f throws Error(InvalidArgument) naming `word` (a test failure otherwise).
inline void expect_invalid(const std::function<void()>& f, const char* word) {
  try {
    f();
    ADD_FAILURE() << "accepted, expected an error naming " << word;
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

// An image of dim-element rows made by hand: centroids (lists x dim), list
// offsets, ids and vectors in entry order.
inline ivfpq::Image hand_made(int dim, std::vector<float> centroids, std::vector<std::int64_t> offsets,
                              std::vector<std::int64_t> ids, std::vector<float> vectors) {
  ivfpq::Image im =
      awkward_image({dim, 1, 4, int(offsets.size()) - 1, std::int64_t(ids.size()), Metric::L2, 24});
  im.quantizer.centroids = std::move(centroids);
  im.offsets = std::move(offsets);
  im.ids = std::move(ids);
  im.vectors = std::move(vectors);
  return im;
}

// The pruned exact search's clustered case: 20,000 x 32 vectors in 100
// tight clusters, an index of 128 lists trained on the CPU (more lists than
// clusters, as an index is sized for its data), its vectors stored; and
// 100 queries from the same clusters.
struct ClusteredImage {
  ivfpq::Image image;
  std::vector<float> queries;
  static constexpr std::int64_t kEntries = 20000, kQueries = 100;
  static constexpr int kDim = 32, kLists = 128;
};
inline ClusteredImage clustered_image() {
  const int dim = ClusteredImage::kDim;
  const std::int64_t n = ClusteredImage::kEntries, nq = ClusteredImage::kQueries;
  std::vector<float> x = clustered(n + nq, dim, 100, 0.3f, 41);
  ClusteredImage c;
  c.queries.assign(x.end() - nq * dim, x.end());
  x.resize(std::size_t(n) * dim);
  ivfpq::Params p;
  p.dim = dim, p.lists = ClusteredImage::kLists, p.m = 8, p.nbits = 8, p.metric = Metric::L2;
  c.image = build_index(p, x, 5000, ivfpq::kCpu);
  c.image.vectors.resize(x.size());
  for (std::size_t e = 0; e < c.image.ids.size(); ++e)
    std::copy_n(x.begin() + c.image.ids[e] * dim, dim, c.image.vectors.begin() + e * dim);
  return c;
}

}  // namespace gknn::test
