// DeviceImage::search_exact: the exact kNN code of gknn/knn.h (the fused
// kernel, or the GEMM with its certified re-rank, as gknn/plan.h chooses)
// over the resident vectors. They are stored in id order, so the kNN code's
// ties by row are ties by id, and its rows map back to ids through
// ranked_ids: the results of search_exact_cpu, bit for bit.
#include <algorithm>
#include <cstdint>

#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/plan.h"
#include "runtime/cublas_loader.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
#include "ivfpq/exact_rows.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMapChunk = std::int64_t(1) << 24;  // results mapped per copy

// Rows of the id-ordered vectors -> ids (padding, -1, stays).
__global__ void rows_to_ids(std::int64_t* ids, std::int64_t n, const std::int64_t* ranked_ids) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    ids[i] = ids[i] < 0 ? -1 : ranked_ids[ids[i]];
}

}  // namespace

const GemmBase* DeviceImage::Impl::gemm_base() const {
  std::lock_guard<std::mutex> lock(gemm_mu);
  if (!gemm) gemm = std::make_unique<GemmBase>(vectors.get(), entries, params.dim, params.metric, device);
  return gemm.get();
}

void DeviceImage::search_exact(const float* queries, std::int64_t nq, int k, std::int64_t* ids,
                               double* distances, GemmPrecision precision) const {
  check_exact(queries, nq, k, ids, distances);
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: search on a moved-from DeviceImage");
  if (!impl_->with_vectors)
    throw Error(ErrorCode::InvalidArgument, "ivfpq: the image holds no vectors (exact distances need them)");
  if (nq == 0 || k == 0) return;
  if (impl_->entries == 0) return pad_exact(ids, distances, nq * k);
  const Impl& im = *impl_;
  GKNN_CUDA(cudaSetDevice(im.device));
  if (im.element != VectorElement::Float32)  // binary16 or bit rows (exact_rows.h)
    return packed_exact_search(im.element, im.packed.get(), im.entries, im.params.dim, im.params.metric,
                               im.ranked_ids.get(), queries, nq, k, ids, distances, thread_stream(im.device));
  KnnRequest r;
  r.base = im.vectors.get();
  r.n = im.entries;
  r.queries = queries;
  r.nq = nq;
  r.dim = im.params.dim;
  r.k = k;
  r.metric = im.params.metric;
  r.precision = precision;
  const bool gemm = choose_knn(r.n, r.nq, r.dim, r.k, r.metric, load_cublas() != nullptr,
                               exact_knn_gpu_fused_fits(r.dim, r.k, im.device))
                        .algo == KnnAlgo::Gemm;
  exact_knn_resident(r, im.device, ids, distances, gemm ? im.gemm_base() : nullptr);

  const std::int64_t total = nq * std::int64_t(k);
  const cudaStream_t s = thread_stream(im.device);
  AsyncBuffer<std::int64_t> buf(std::min(total, kMapChunk), s);
  for (std::int64_t i0 = 0; i0 < total; i0 += kMapChunk) {
    const std::int64_t n = std::min(kMapChunk, total - i0);
    GKNN_CUDA(cudaMemcpyAsync(buf.get(), ids + i0, sizeof(std::int64_t) * n, cudaMemcpyHostToDevice, s));
    rows_to_ids<<<grid_for(n, kThreads), kThreads, 0, s>>>(buf.get(), n, im.ranked_ids.get());
    GKNN_CUDA(cudaGetLastError());
    GKNN_CUDA(cudaMemcpyAsync(ids + i0, buf.get(), sizeof(std::int64_t) * n, cudaMemcpyDeviceToHost, s));
    GKNN_CUDA(cudaStreamSynchronize(s));
  }
}

}  // namespace gknn::ivfpq
