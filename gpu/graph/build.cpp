// build_cpu / build_gpu: the kNN graph (knn_graph.cpp) then CAGRA's
// optimisation (optimise.cpp). build_gpu runs the kNN graph and the prune,
// the larger part of the work, on the GPU; the rest of the optimisation runs
// on CPU threads in both (bench/results/graph-build-H200-2026-11-28.md).
#include <string>

#include "graph/common.h"

namespace gknn::graph {
namespace {

Graph build(const float* vectors, std::int64_t n, const BuildParams& p, int device,
            const Progress& progress) {
  validate(p);
  if (n < 0 || n >= std::int64_t(kNoNode))
    throw Error(ErrorCode::InvalidArgument,
                "graph build: n must be between 0 and " + std::to_string(kNoNode - 1));
  if (n > 0 && !vectors) throw Error(ErrorCode::InvalidArgument, "graph build: missing vectors");
  const int kdeg = effective_intermediate_degree(p, n);
  const std::vector<std::uint32_t> knn = knn_graph(vectors, n, kdeg, p, device, progress);
  Graph g = optimise(knn, n, kdeg, vectors, p, progress, device);
  connect(g, vectors, p, nullptr, progress);
  return g;
}

}  // namespace

Graph build_cpu(const float* vectors, std::int64_t n, const BuildParams& p, const Progress& progress) {
  return build(vectors, n, p, -1, progress);
}

Graph build_gpu(const float* vectors, std::int64_t n, const BuildParams& p, int device,
                const Progress& progress) {
  if (device < 0) throw Error(ErrorCode::InvalidArgument, "graph build_gpu: device must be >= 0");
  return build(vectors, n, p, device, progress);
}

}  // namespace gknn::graph
