// map_rows_async (distance/knn_resident.h): kNN results' row numbers ->
// the ids a resident base's rows stand for, on the device, so a caller
// searching an image in its own row order needs no host round trip.
#include "distance/knn_resident.h"
#include "runtime/stream_tools.h"

namespace gknn {
namespace {

constexpr int kThreads = 256;

__global__ void rows_to_ids(std::int64_t* ids, std::int64_t n, const std::int64_t* row_ids) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    ids[i] = ids[i] < 0 ? -1 : row_ids[ids[i]];
}

}  // namespace

void map_rows_async(std::int64_t* ids, std::int64_t n, const std::int64_t* row_ids, cudaStream_t s) {
  if (n == 0) return;
  rows_to_ids<<<grid_for(n, kThreads), kThreads, 0, s>>>(ids, n, row_ids);
  GKNN_CUDA(cudaGetLastError());
}

}  // namespace gknn
