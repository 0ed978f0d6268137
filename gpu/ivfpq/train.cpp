// train(): coarse k-means on the sample, then the PQ's k-means of all m
// sub-spaces in lockstep on the residuals of the sample to their nearest
// coarse centroids. The rows of each phase stay with its Assigner (on a GPU,
// uploaded once); only centroids and labels move per iteration.
#include <algorithm>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/assign.h"
#include "ivfpq/common.h"
#include "ivfpq/kmeans.h"

namespace gknn::ivfpq {

Quantizer train(const Params& p, const float* sample, std::int64_t n, int device, const Progress& progress) {
  validate(p);
  if (n < 1 || !sample) throw Error(ErrorCode::InvalidArgument, "ivfpq: train needs at least one sample row");
  Quantizer q;
  q.params = p;
  q.params.lists = static_cast<int>(std::min<std::int64_t>(p.lists, n));
  const std::vector<float> x = prepared_rows(p, sample, n);

  std::vector<std::int32_t> list_of(n);
  {
    Assigner rows(x.data(), n, p.dim, device);
    const KmeansSpec coarse{x.data(), n, p.dim, p.dim, q.params.lists, 1, p.kmeans_iters, p.seed};
    q.centroids = kmeans(coarse, rows, [&](int, int it) {
      check_progress(progress, Phase::CoarseKmeans, it, p.kmeans_iters);
    });
    rows.nearest(q.centroids.data(), q.params.lists, p.dim, 1, list_of.data());
  }

  // Sub-space j is group j, seeded p.seed + 1 + j; progress counts
  // sub-space iterations, m per lockstep iteration.
  const std::vector<float> resid = residuals(x.data(), n, p.dim, q.centroids.data(), list_of.data());
  Assigner subs(resid.data(), n, p.dim, device);
  const KmeansSpec pq{resid.data(), n, p.dim, dsub(p), ksub(p), p.m, p.kmeans_iters, p.seed + 1};
  q.codebooks = kmeans(pq, subs, [&](int j, int it) {
    check_progress(progress, Phase::PqKmeans, std::int64_t(it - 1) * p.m + j + 1,
                   std::int64_t(p.m) * p.kmeans_iters);
  });
  return q;
}

}  // namespace gknn::ivfpq
