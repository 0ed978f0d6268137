// DeviceImage::search_exact: the exact kNN code of gknn/knn.h (the fused
// kernel, or the GEMM with its certified re-rank, as gknn/plan.h chooses)
// over the resident vectors. They are stored in id order, so the kNN code's
// ties by row are ties by id, and its rows map back to ids through
// ranked_ids: the results of search_exact_cpu, bit for bit.
#include <cstdint>

#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
#include "ivfpq/exact_rows.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {

const GemmBase* DeviceImage::Impl::gemm_base() const {
  std::lock_guard<std::mutex> lock(gemm_mu);
  if (!gemm) gemm = std::make_unique<GemmBase>(vectors.get(), entries, params.dim, params.metric, device);
  return gemm.get();
}

KnnRequest DeviceImage::Impl::exact_request(const float* queries, std::int64_t nq, int k) const {
  KnnRequest r;
  r.base = vectors.get();
  r.n = entries;
  r.queries = queries;
  r.nq = nq;
  r.dim = params.dim;
  r.k = k;
  r.metric = params.metric;
  return r;
}

void DeviceImage::search_exact(const float* queries, std::int64_t nq, int k, std::int64_t* ids,
                               double* distances, GemmPrecision precision) const {
  check_exact(queries, nq, k, ids, distances);
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: search on a moved-from DeviceImage");
  if (!impl_->with_vectors)
    throw Error(ErrorCode::InvalidArgument, "ivfpq: the image holds no vectors (exact distances need them)");
  if (nq == 0 || k == 0) return;
  if (impl_->entries == 0) return pad_results(ids, distances, nq * k);
  const Impl& im = *impl_;
  GKNN_CUDA(cudaSetDevice(im.device));
  if (im.element != VectorElement::Float32)  // binary16 or bit rows (exact_rows.h)
    return packed_exact_search(im.element, im.packed.get(), im.entries, im.params.dim, im.params.metric,
                               im.ranked_ids.get(), queries, nq, k, ids, distances, thread_stream(im.device));
  KnnRequest r = im.exact_request(queries, nq, k);
  r.precision = precision;
  // Rows are in id order: the kNN code's rows map to ids on the device.
  exact_knn_resident(
      r, im.device, ids, distances, [&] { return im.gemm_base(); }, im.ranked_ids.get());
}

}  // namespace gknn::ivfpq
