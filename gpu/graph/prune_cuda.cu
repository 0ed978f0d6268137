// The build's prune (rules.cpp's prune_knn_row, CAGRA's rank-based detour
// count) of every node at once on a GPU, a warp per node: the same edges
// in the same order as the CPU's, since a node's result depends only on
// counts and ranks. On CPU threads it was the build's second phase (H200
// host, 16 cores, 1M x 128: 6.3 s; bench/results/graph-build-H200-2026-11-28.md).
#include <climits>

#include "graph/common.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

constexpr int kWarps = 4;                                // nodes per block
constexpr int kTableSlots = 2 * kMaxIntermediateDegree;  // rank table per node, power of 2
static_assert((kTableSlots & (kTableSlots - 1)) == 0, "open addressing needs a power of two");

constexpr int kTableBits = 9;
static_assert(kTableSlots == 1 << kTableBits, "kTableBits");

// The multiplicative hash's high bits (the low ones depend on id's low bits only).
__device__ __forceinline__ unsigned table_slot(std::uint32_t id) {
  return (id * 2654435761u) >> (32 - kTableBits);
}

// The candidate's first rank in the list, -1 when it is not there.
__device__ int table_rank(const std::uint32_t* keys, const int* ranks, std::uint32_t id) {
  for (unsigned h = table_slot(id);; h = (h + 1) & (kTableSlots - 1)) {
    if (keys[h] == id) return ranks[h];
    if (keys[h] == kNoNode) return -1;
  }
}

__global__ void __launch_bounds__(kWarps * 32)
    prune_kernel(const std::uint32_t* __restrict__ knn, std::int64_t n, int kdeg, int degree,
                 std::uint32_t* __restrict__ out) {
  __shared__ std::uint32_t keys_all[kWarps][kTableSlots];
  __shared__ int ranks_all[kWarps][kTableSlots];
  __shared__ int count_all[kWarps][kMaxIntermediateDegree];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t x = std::int64_t(blockIdx.x) * kWarps + w;
  if (x >= n) return;  // a whole warp
  std::uint32_t* keys = keys_all[w];
  int* ranks = ranks_all[w];
  int* count = count_all[w];
  const std::uint32_t* cand = knn + x * kdeg;
  // m: the candidates before the first empty slot.
  int m = kdeg;
  for (int b = 0; b < kdeg; b += 32) {
    const unsigned empty = __ballot_sync(0xffffffffu, b + lane < kdeg && cand[b + lane] == kNoNode);
    if (empty) {
      m = b + __ffs(empty) - 1;
      break;
    }
  }
  for (int h = lane; h < kTableSlots; h += 32) keys[h] = kNoNode, ranks[h] = INT_MAX;
  for (int j = lane; j < m; j += 32) count[j] = 0;
  __syncwarp();
  for (int r = lane; r < m; r += 32) {
    const std::uint32_t id = cand[r];
    for (unsigned h = table_slot(id);; h = (h + 1) & (kTableSlots - 1)) {
      const std::uint32_t prev = atomicCAS(&keys[h], kNoNode, id);
      if (prev == kNoNode || prev == id) {
        atomicMin(&ranks[h], r);
        break;
      }
    }
  }
  __syncwarp();
  // Candidate i's row entry p detours the edge to rank j when j > i, j > p
  // (rows end at their first empty slot; a rank p >= m - 1 detours nothing).
  const int reach = min(kdeg, m - 1);
  for (int i = 0; i + 1 < m; ++i) {
    const std::uint32_t* row = knn + std::int64_t(cand[i]) * kdeg;
    bool ended = false;
    for (int b = 0; b < reach && !ended; b += 32) {
      const int p = b + lane;
      const std::uint32_t y = p < reach ? row[p] : kNoNode;
      const unsigned empty = __ballot_sync(0xffffffffu, p < reach && y == kNoNode);
      const int stop = empty ? b + __ffs(empty) - 1 : INT_MAX;
      ended = empty != 0;
      if (p < reach && p < stop) {
        const int j = table_rank(keys, ranks, y);
        if (j > i && j > p) atomicAdd(&count[j], 1);
      }
    }
  }
  __syncwarp();
  // Kept: the `degree` first by (count, rank), in that order.
  const int kept = min(m, degree);
  std::uint32_t* o = out + x * degree;
  for (int a = lane; a < m; a += 32) {
    int pos = 0;
    for (int b = 0; b < m; ++b) pos += count[b] < count[a] || (count[b] == count[a] && b < a);
    if (pos < kept) o[pos] = cand[a];
  }
  for (int s = kept + lane; s < degree; s += 32) o[s] = kNoNode;
}

}  // namespace

void prune_gpu(const std::vector<std::uint32_t>& knn, std::int64_t n, int kdeg, int degree, int device,
               std::uint32_t* pruned) {
  if (n == 0) return;
  if (kdeg > kMaxIntermediateDegree || degree < 1)
    throw Error(ErrorCode::InvalidArgument, "graph prune_gpu: bad degrees");
  use_device(device);
  const cudaStream_t s = thread_stream(device);
  DeviceBuffer<std::uint32_t> d_knn(knn.size()), d_out(std::size_t(n) * degree);
  GKNN_CUDA(cudaMemcpyAsync(d_knn.get(), knn.data(), knn.size() * sizeof(std::uint32_t),
                            cudaMemcpyHostToDevice, s));
  prune_kernel<<<unsigned((n + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(d_knn.get(), n, kdeg, degree,
                                                                           d_out.get());
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaMemcpyAsync(pruned, d_out.get(), std::size_t(n) * degree * sizeof(std::uint32_t),
                            cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaStreamSynchronize(s));
}

}  // namespace gknn::graph
