// Exact kNN on the GPU, first version: a distance kernel that runs the
// shared distance code (built with -fmad=false so it matches the CPU bit for
// bit) over a tile of queries, then a stable segmented sort per query, so
// ties keep ascending ids. The k-selection kernels of the kernel issue
// replace the sort; the contract (and the tests) stay.
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <climits>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/knn.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn {
namespace {

__global__ void score_tile(const float* base, std::int64_t n, const float* queries, int dim, Metric metric,
                           double* scores, std::int64_t* ids) {
  std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  std::int64_t q = blockIdx.y;
  std::int64_t at = q * n + i;
  scores[at] = canonical_score(distance(metric, base + i * dim, queries + q * dim, dim));
  ids[at] = i;
}

__global__ void segment_offsets(int* offsets, int segments, std::int64_t n) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s <= segments) offsets[s] = static_cast<int>(s * n);
}

// Queries per tile: the sort holds 32 bytes per (query, base) pair.
std::int64_t tile_queries(std::int64_t n, std::int64_t nq) {
  std::size_t free_bytes = 0, total = 0;
  GKNN_CUDA(cudaMemGetInfo(&free_bytes, &total));
  std::size_t budget = std::min<std::size_t>(free_bytes / 3, std::size_t(2) << 30);
  std::int64_t by_memory = std::max<std::int64_t>(1, budget / (32 * std::size_t(n)));
  std::int64_t by_index = std::max<std::int64_t>(1, (INT_MAX - 1) / n);
  return std::min({nq, by_memory, by_index, std::int64_t(65535)});
}

}  // namespace

void exact_knn_gpu_bruteforce(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident_bruteforce(r, device, ids, distances); });
}

void exact_knn_resident_bruteforce(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                                   const std::int64_t* row_ids) {
  validate(req);
  if (req.n >= INT_MAX) throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu: base too large");
  GKNN_CUDA(cudaSetDevice(device));
  const std::int64_t take = std::min<std::int64_t>(req.k, req.n);
  pad_results(ids, distances, req.nq * req.k);
  if (take == 0 || req.nq == 0) return;

  // Stream-ordered on the calling thread's stream (threads of the GPU
  // service search at once; see exact_knn_resident_fused).
  const cudaStream_t s = thread_stream(device);
  AsyncBuffer<float> d_queries(req.nq * req.dim, s);
  GKNN_CUDA(cudaMemcpyAsync(d_queries.get(), req.queries, sizeof(float) * req.nq * req.dim,
                            cudaMemcpyHostToDevice, s));

  const std::int64_t tile = tile_queries(req.n, req.nq);
  const std::size_t pairs = tile * req.n;
  AsyncBuffer<double> keys_in(pairs, s), keys_out(pairs, s);
  AsyncBuffer<std::int64_t> vals_in(pairs, s), vals_out(pairs, s);
  AsyncBuffer<int> offsets(tile + 1, s);
  AsyncBuffer<double> top_keys(tile * take, s);
  AsyncBuffer<std::int64_t> top_ids(tile * take, s);

  std::size_t temp_bytes = 0;
  GKNN_CUDA(cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, keys_in.get(), keys_out.get(),
                                                      vals_in.get(), vals_out.get(), int(pairs), int(tile),
                                                      offsets.get(), offsets.get() + 1, s));
  AsyncBuffer<unsigned char> temp(temp_bytes, s);

  for (std::int64_t q0 = 0; q0 < req.nq; q0 += tile) {
    const int rows = static_cast<int>(std::min(tile, req.nq - q0));
    dim3 grid(static_cast<unsigned>((req.n + 255) / 256), rows);
    score_tile<<<grid, 256, 0, s>>>(req.base, req.n, d_queries.get() + q0 * req.dim, req.dim, req.metric,
                                    keys_in.get(), vals_in.get());
    GKNN_CUDA(cudaGetLastError());
    segment_offsets<<<(rows + 256) / 256, 256, 0, s>>>(offsets.get(), rows, req.n);
    GKNN_CUDA(cudaGetLastError());
    GKNN_CUDA(cub::DeviceSegmentedSort::StableSortPairs(temp.get(), temp_bytes, keys_in.get(), keys_out.get(),
                                                        vals_in.get(), vals_out.get(), int(rows * req.n),
                                                        rows, offsets.get(), offsets.get() + 1, s));
    // Each query's first `take` pairs, packed, then rows -> ids.
    GKNN_CUDA(cudaMemcpy2DAsync(top_keys.get(), sizeof(double) * take, keys_out.get(), sizeof(double) * req.n,
                                sizeof(double) * take, rows, cudaMemcpyDeviceToDevice, s));
    GKNN_CUDA(cudaMemcpy2DAsync(top_ids.get(), sizeof(std::int64_t) * take, vals_out.get(),
                                sizeof(std::int64_t) * req.n, sizeof(std::int64_t) * take, rows,
                                cudaMemcpyDeviceToDevice, s));
    if (row_ids) map_rows_async(top_ids.get(), rows * take, row_ids, s);
    GKNN_CUDA(cudaMemcpy2DAsync(distances + q0 * req.k, sizeof(double) * req.k, top_keys.get(),
                                sizeof(double) * take, sizeof(double) * take, rows, cudaMemcpyDeviceToHost,
                                s));
    GKNN_CUDA(cudaMemcpy2DAsync(ids + q0 * req.k, sizeof(std::int64_t) * req.k, top_ids.get(),
                                sizeof(std::int64_t) * take, sizeof(std::int64_t) * take, rows,
                                cudaMemcpyDeviceToHost, s));
    GKNN_CUDA(cudaStreamSynchronize(s));
  }
}

}  // namespace gknn
