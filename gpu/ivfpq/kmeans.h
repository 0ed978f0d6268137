// Lloyd k-means for the coarse quantizer and the PQ codebooks (not a public
// header). The device only decides where the nearest-centroid searches run;
// everything else runs on the host in a fixed order, so a CPU and a GPU run
// return the same centroids bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace gknn::ivfpq {

// out[i] = the centroid nearest to point i by L2, ties by lower centroid
// number: exact 1-NN through exact_knn_cpu / exact_knn_gpu, which return
// the same ids (test_knn asserts it).
void nearest_centroids(const float* points, std::int64_t n, const float* centroids, std::int64_t k, int dim,
                       int device, std::int32_t* out);

struct KmeansSpec {
  const float* points = nullptr;  // n x dim, host
  std::int64_t n = 0;             // >= 1
  int dim = 0;
  int k = 0;  // may exceed n: the extra centroids start as copies and are split
  int iters = 1;
  std::uint64_t seed = 0;
  int device = -1;
};

// k x dim centroids. `after_iteration(i)` runs after iteration i (1-based),
// the place for progress and cancellation.
std::vector<float> kmeans(const KmeansSpec& spec, const std::function<void(int)>& after_iteration);

}  // namespace gknn::ivfpq
