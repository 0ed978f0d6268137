// exact_knn_gpu: the algorithm the chooser (gknn/plan.h) picks, for a host
// base (gknn/knn.h) or a resident one (distance/knn_resident.h).
#include "distance/knn_resident.h"
#include "gknn/knn.h"
#include "gknn/plan.h"
#include "runtime/cublas_loader.h"

namespace gknn {

void exact_knn_gpu(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident(r, device, ids, distances); });
}

void exact_knn_resident(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                        const GemmBaseSource& prepared, const std::int64_t* row_ids) {
  validate(req);
  const KnnChoice c = choose_knn(req.n, req.nq, req.dim, req.k, req.metric, load_cublas() != nullptr,
                                 exact_knn_gpu_fused_fits(req.dim, req.k, device));
  switch (c.algo) {
    case KnnAlgo::Scan:
      return exact_knn_resident_scan(req, device, ids, distances, row_ids);
    case KnnAlgo::Fused:
      return exact_knn_resident_fused(req, device, ids, distances, row_ids);
    case KnnAlgo::Gemm:
      return exact_knn_resident_gemm(req, device, ids, distances, prepared ? prepared() : nullptr, row_ids);
    case KnnAlgo::BruteForce:
      return exact_knn_resident_bruteforce(req, device, ids, distances, row_ids);
  }
}

}  // namespace gknn
