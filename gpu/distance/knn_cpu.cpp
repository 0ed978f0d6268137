// CPU reference for exact kNN: the test oracle for the GPU path and the
// fallback where no GPU is usable.
#include <algorithm>
#include <numeric>
#include <vector>

#include "gknn/error.h"
#include "gknn/knn.h"

namespace gknn {

void validate(const KnnRequest& req) {
  if (req.dim < 1 || req.k < 0 || req.n < 0 || req.nq < 0)
    throw Error(ErrorCode::InvalidArgument, "exact_knn: bad sizes");
  if ((req.n > 0 && !req.base) || (req.nq > 0 && !req.queries))
    throw Error(ErrorCode::InvalidArgument, "exact_knn: missing input");
}

void exact_knn_cpu(const KnnRequest& req, std::int64_t* ids, double* distances) {
  validate(req);
  const std::int64_t take = std::min<std::int64_t>(req.k, req.n);
  std::vector<double> score(req.n);
  std::vector<std::int64_t> order(req.n);
  for (std::int64_t q = 0; q < req.nq; ++q) {
    const float* query = req.queries + q * req.dim;
    for (std::int64_t i = 0; i < req.n; ++i)
      score[i] = canonical_score(distance(req.metric, req.base + i * req.dim, query, req.dim));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + take, order.end(),
                      [&](std::int64_t a, std::int64_t b) { return score_less(score[a], a, score[b], b); });
    std::int64_t* row_ids = ids + q * req.k;
    double* row_dist = distances + q * req.k;
    for (std::int64_t j = 0; j < req.k; ++j) {
      row_ids[j] = j < take ? order[j] : -1;
      row_dist[j] = j < take ? score[order[j]] : canonical_score(NAN);
    }
  }
}

}  // namespace gknn
