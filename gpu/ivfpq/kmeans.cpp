// Lloyd k-means, deterministic on every device (see kmeans.h):
// - initial centroids: distinct sample rows from a seeded shuffle (splitmix64,
//   so the choice does not depend on the standard library);
// - assignment: exact nearest centroid (Assigner, assign.h);
// - update: means summed in double, rows in index order;
// - an empty cluster takes half of the largest one, the two centroids pushed
//   apart by a small symmetric perturbation (Faiss's split_clusters, with
//   the largest cluster instead of a random one: no extra randomness).
// More centroids than points is allowed (a PQ codebook of 2^nbits on a small
// sample): the spare centroids start as copies of rows and stay so.
#include "ivfpq/kmeans.h"

#include <algorithm>
#include <numeric>

namespace gknn::ivfpq {
namespace {

constexpr float kSplitEps = 1.0f / 1024.0f;  // Faiss's EPS

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The first min(k, n) rows of a seeded partial Fisher-Yates shuffle, cycled
// when k > n (the copies are empty after the first assignment and split).
void initial_centroids(const KmeansSpec& s, int g, float* c) {
  std::vector<std::int64_t> rows(s.n);
  std::iota(rows.begin(), rows.end(), 0);
  const std::int64_t take = std::min<std::int64_t>(s.k, s.n);
  std::uint64_t state = s.seed + std::uint64_t(g);
  for (std::int64_t i = 0; i < take; ++i)
    std::swap(rows[i], rows[i + std::int64_t(splitmix64(state) % std::uint64_t(s.n - i))]);
  for (int j = 0; j < s.k; ++j) {
    const float* row = s.points + rows[j % take] * s.ld + std::int64_t(g) * s.dim;
    std::copy(row, row + s.dim, c + std::size_t(j) * s.dim);
  }
}

// New centroids of group g: the mean of each non-empty cluster (empty ones
// keep theirs until split). Returns the cluster sizes.
std::vector<std::int64_t> update_means(const KmeansSpec& s, int g, const std::int32_t* assign,
                                       float* centroids) {
  std::vector<double> sums(std::size_t(s.k) * s.dim, 0.0);
  std::vector<std::int64_t> sizes(s.k, 0);
  for (std::int64_t i = 0; i < s.n; ++i) {
    const float* x = s.points + i * s.ld + std::int64_t(g) * s.dim;
    double* sum = sums.data() + std::size_t(assign[i]) * s.dim;
    ++sizes[assign[i]];
    for (int d = 0; d < s.dim; ++d) sum[d] += x[d];
  }
  for (int c = 0; c < s.k; ++c)
    if (sizes[c] > 0)
      for (int d = 0; d < s.dim; ++d)
        centroids[std::size_t(c) * s.dim + d] =
            static_cast<float>(sums[std::size_t(c) * s.dim + d] / sizes[c]);
  return sizes;
}

// Each empty cluster, in order, becomes a perturbed copy of the largest
// (lowest number on ties) and is credited half its points, so the next
// assignment divides that cluster between the two. A single point is never
// split (as in Faiss): with more centroids than points, the spare ones keep
// their copies of sample rows.
void split_empty(int k, int dim, std::vector<std::int64_t>& sizes, float* centroids) {
  for (int ci = 0; ci < k; ++ci) {
    if (sizes[ci] != 0) continue;
    const int cj = int(std::max_element(sizes.begin(), sizes.end()) - sizes.begin());
    if (sizes[cj] < 2) return;
    float* a = centroids + std::size_t(ci) * dim;
    float* b = centroids + std::size_t(cj) * dim;
    for (int d = 0; d < dim; ++d) {
      const float up = b[d] * (1.0f + kSplitEps), down = b[d] * (1.0f - kSplitEps);
      a[d] = d % 2 == 0 ? up : down;
      b[d] = d % 2 == 0 ? down : up;
    }
    sizes[ci] = sizes[cj] / 2;
    sizes[cj] -= sizes[ci];
  }
}

}  // namespace

std::vector<float> kmeans(const KmeansSpec& spec, Assigner& assigner,
                          const std::function<void(int, int)>& after) {
  const std::size_t group_size = std::size_t(spec.k) * spec.dim;
  std::vector<float> centroids(group_size * spec.groups);
  for (int g = 0; g < spec.groups; ++g) initial_centroids(spec, g, centroids.data() + g * group_size);
  std::vector<std::int32_t> assign(std::size_t(spec.groups) * spec.n);
  for (int it = 1; it <= spec.iters; ++it) {
    assigner.nearest(centroids.data(), spec.k, spec.dim, spec.groups, assign.data());
    for (int g = 0; g < spec.groups; ++g) {
      float* c = centroids.data() + g * group_size;
      std::vector<std::int64_t> sizes = update_means(spec, g, assign.data() + g * spec.n, c);
      split_empty(spec.k, spec.dim, sizes, c);
      if (after) after(g, it);
    }
  }
  return centroids;
}

}  // namespace gknn::ivfpq
