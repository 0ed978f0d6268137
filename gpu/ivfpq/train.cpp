// train(): coarse k-means on the sample, then one k-means per PQ sub-space
// on the residuals of the sample to their nearest coarse centroids.
#include <algorithm>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/common.h"
#include "ivfpq/kmeans.h"

namespace gknn::ivfpq {
namespace {

// Sub-space j's codebook from its columns of the residuals. Each sub-space
// has its own seed, derived from the one in the params.
void train_codebooks(const Params& p, const std::vector<float>& resid, std::int64_t n, int device,
                     const Progress& progress, std::vector<float>& codebooks) {
  const int ds = dsub(p), ks = ksub(p);
  const std::int64_t total = std::int64_t(p.m) * p.kmeans_iters;
  codebooks.resize(std::size_t(p.m) * ks * ds);
  for (int j = 0; j < p.m; ++j) {
    const std::vector<float> sub = subspace(resid.data(), n, p.dim, j, ds);
    KmeansSpec spec{sub.data(), n, ds, ks, p.kmeans_iters, p.seed + 1 + std::uint64_t(j), device};
    const std::vector<float> cb = kmeans(spec, [&](int it) {
      check_progress(progress, Phase::PqKmeans, std::int64_t(j) * p.kmeans_iters + it, total);
    });
    std::copy(cb.begin(), cb.end(), codebooks.begin() + std::size_t(j) * ks * ds);
  }
}

}  // namespace

Quantizer train(const Params& p, const float* sample, std::int64_t n, int device, const Progress& progress) {
  validate(p);
  if (n < 1 || !sample) throw Error(ErrorCode::InvalidArgument, "ivfpq: train needs at least one sample row");
  Quantizer q;
  q.params = p;
  q.params.lists = static_cast<int>(std::min<std::int64_t>(p.lists, n));
  const std::vector<float> x = prepared_rows(p, sample, n);

  KmeansSpec coarse{x.data(), n, p.dim, q.params.lists, p.kmeans_iters, p.seed, device};
  q.centroids =
      kmeans(coarse, [&](int it) { check_progress(progress, Phase::CoarseKmeans, it, p.kmeans_iters); });

  std::vector<std::int32_t> list_of(n);
  nearest_centroids(x.data(), n, q.centroids.data(), q.params.lists, p.dim, device, list_of.data());
  const std::vector<float> resid = residuals(x.data(), n, p.dim, q.centroids.data(), list_of.data());
  train_codebooks(p, resid, n, device, progress, q.codebooks);
  return q;
}

}  // namespace gknn::ivfpq
