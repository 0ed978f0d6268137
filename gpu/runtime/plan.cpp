// The chooser: see gknn/plan.h.
#include "gknn/plan.h"

#include "gknn/knn.h"
#include "gknn/select.h"

namespace gknn {

KnnChoice choose_knn(std::int64_t n, std::int64_t nq, int dim, int k, Metric metric, bool have_cublas,
                     bool fused_fits) {
  // One crossover for every dimension, between the measured ones (see plan.h).
  const bool scan_ok = exact_knn_gpu_scan_fits(dim, k);
  if (scan_ok && nq <= kScanMaxQueries)
    return {KnnAlgo::Scan, "few queries: each row read once for all, batched k-selection"};
  const bool gemm_ok = have_cublas && exact_knn_gpu_gemm_fits(n, k, metric);
  if (gemm_ok) return {KnnAlgo::Gemm, "GEMM with fused norms, batched k-selection, exact re-rank"};
  const bool fused_ok = fused_fits && k <= kFusedMaxK && n < (std::int64_t(1) << 32) - 1;
  if (fused_ok) return {KnnAlgo::Fused, "GEMM path unavailable for this shape or metric"};
  if (scan_ok) return {KnnAlgo::Scan, "neither the GEMM path nor the fused kernel holds this shape"};
  return {KnnAlgo::BruteForce, "no selection kernel holds this k"};
}

TopkChoice choose_topk(std::int64_t n, std::int64_t k) {
  (void)n;
  if (k <= kMaxBitonicK) return {TopkAlgo::Bitonic, "k <= 1024: sampled threshold + bitonic top-k"};
  return {TopkAlgo::SampleSelect, "k > 1024: SampleSelect"};
}

const char* algo_name(KnnAlgo a) {
  switch (a) {
    case KnnAlgo::Scan:
      return "scan";
    case KnnAlgo::Fused:
      return "fused";
    case KnnAlgo::Gemm:
      return "gemm";
    case KnnAlgo::BruteForce:
      return "bruteforce";
  }
  return "?";
}

const char* algo_name(TopkAlgo a) { return a == TopkAlgo::Bitonic ? "bitonic" : "sampleselect"; }

}  // namespace gknn
