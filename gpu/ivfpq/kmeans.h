// Lloyd k-means for the coarse quantizer and the PQ codebooks (not a public
// header). The Assigner only decides where the nearest-centroid searches run;
// everything else runs on the host in a fixed order, so a CPU and a GPU run
// return the same centroids bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ivfpq/assign.h"

namespace gknn::ivfpq {

// `groups` independent k-means run in lockstep (one assignment call per
// iteration for all of them): the PQ's m sub-spaces, or the coarse quantizer
// as a single group.
struct KmeansSpec {
  const float* points = nullptr;  // host; group g of row i: points + i * ld + g * dim
  std::int64_t n = 0;             // >= 1
  std::int64_t ld = 0;
  int dim = 0;
  int k = 0;  // may exceed n: the extra centroids start as copies and are split
  int groups = 1;
  int iters = 1;
  std::uint64_t seed = 0;  // group g's initialisation uses seed + g
};

// groups x k x dim centroids. `assigner` holds the same rows as the spec.
// `after(g, i)` runs when group g has finished iteration i (1-based), the
// place for progress and cancellation.
std::vector<float> kmeans(const KmeansSpec& spec, Assigner& assigner,
                          const std::function<void(int group, int iteration)>& after);

}  // namespace gknn::ivfpq
