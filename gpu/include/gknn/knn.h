// Exact k-nearest-neighbour search, batched: nq queries against n base
// vectors, each row of results ordered by (distance, id) with NaN last.
// Shaped as a batch request so a later GPU service can take many at once.
#pragma once

#include <cstdint>

#include "gknn/distance.h"

namespace gknn {

struct KnnRequest {
  const float* base = nullptr;  // n x dim, row-major, host memory
  std::int64_t n = 0;
  const float* queries = nullptr;  // nq x dim, row-major, host memory
  std::int64_t nq = 0;
  int dim = 0;
  int k = 0;
  Metric metric = Metric::L2;
};

// Outputs are nq x k, row-major. A row with fewer than k base vectors is
// padded with id -1 and distance NaN. Distances are the SQL operator values.
void exact_knn_cpu(const KnnRequest& req, std::int64_t* ids, double* distances);
void exact_knn_gpu(const KnnRequest& req, int device, std::int64_t* ids, double* distances);

// Throws Error(InvalidArgument) for inconsistent sizes.
void validate(const KnnRequest& req);

}  // namespace gknn
