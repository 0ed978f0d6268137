// Exact kNN with distance and k-selection fused in one kernel (the thesis'
// fused kernel): no distance matrix is ever written. For small dimensions,
// where a GEMM is too thin to use the tensor cores and the distance matrix
// would cost more to write and read than the distances cost to compute; and
// for L1, which is no dot product.
//
// A block holds kWarps queries, one per warp, and walks a part of the base in
// tiles of 32 * kE vectors staged in shared memory (rows padded to an odd
// stride, so lanes reading different rows hit different banks). Each lane
// computes kE distances with the shared distance code (bit-identical to the
// SQL operators and the CPU reference) and hands them to the warp's
// SmemSelect (warp_select.cuh): radius prefilter, candidate buffer, sorted
// queue. Words carry (distance, base id), so the selection's order is the
// contract's (distance, id). When there are too few queries to fill the GPU,
// the base is split over P parts (blockIdx.y); the host merges each query's
// P sorted lists, which are short (P * k words).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/knn.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "select/warp_select.cuh"

namespace gknn {
namespace {

using rowsel::KeyLoad;
using rowsel::kWarpSize;
using rowsel::SmemSelect;
using rowsel::W96;
using Load = KeyLoad<double>;  // distances are float8, as SQL sees them

constexpr int kE = 4;                      // base vectors per lane per tile
constexpr int kTileVecs = kWarpSize * kE;  // 128

template <int K>
struct FusedShape {
  static constexpr int kWarps = K >= 512 ? 4 : 8;
  static constexpr int kCap = K <= 32 ? 64 : K <= 128 ? 128 : K <= 512 ? 256 : 512;
};

__host__ __device__ inline int row_stride(int dim) { return dim | 1; }

template <int K>
std::size_t fused_smem_bytes(int dim) {
  using S = FusedShape<K>;
  return std::size_t(S::kWarps) * (S::kCap + K) * sizeof(W96) +
         sizeof(float) * (std::size_t(kTileVecs) * row_stride(dim) + std::size_t(S::kWarps) * dim);
}

template <int K>
__global__ void __launch_bounds__(FusedShape<K>::kWarps* kWarpSize)
    fused_knn(const float* base, std::int64_t n, const float* queries, std::int64_t nq, int dim,
              Metric metric, std::int64_t chunk, int kk, W96* out) {
  using S = FusedShape<K>;
  extern __shared__ __align__(16) unsigned char smem[];
  W96* bufs = reinterpret_cast<W96*>(smem);
  W96* queues = bufs + S::kWarps * S::kCap;
  float* tile = reinterpret_cast<float*>(queues + S::kWarps * K);
  const int stride = row_stride(dim);
  float* qs = tile + kTileVecs * stride;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const std::int64_t q = std::int64_t(blockIdx.x) * S::kWarps + warp;
  const bool active = q < nq;
  const std::int64_t c0 = std::int64_t(blockIdx.y) * chunk, c1 = n < c0 + chunk ? n : c0 + chunk;
  float* query = qs + warp * dim;
  if (active)
    for (int c = lane; c < dim; c += kWarpSize) query[c] = queries[q * dim + c];

  SmemSelect<Load, K, S::kCap> sel;
  sel.init(bufs + warp * S::kCap, queues + warp * K, kk, 0, nullptr, nullptr);
  for (std::int64_t t0 = c0; t0 < c1; t0 += kTileVecs) {
    const int vecs = int(c1 - t0 < kTileVecs ? c1 - t0 : kTileVecs);
    __syncthreads();  // the previous tile is no longer read
    const float* src = base + t0 * dim;
    for (int i = threadIdx.x; i < vecs * dim; i += blockDim.x) tile[(i / dim) * stride + i % dim] = src[i];
    __syncthreads();
    if (!active) continue;
    double e[kE];
    unsigned valid = 0;
#pragma unroll
    for (int j = 0; j < kE; ++j) {
      const int v = j * kWarpSize + lane;  // the column layout buffered_tile expects (kVec = 1)
      e[j] = v < vecs ? canonical_score(distance(metric, tile + v * stride, query, dim)) : 0.0;
      valid |= unsigned(v < vecs) << j;
    }
    sel.template tile<kE, 1>(e, t0, valid);
  }
  if (!active) return;
  sel.flush();
  W96* row = out + (q * gridDim.y + blockIdx.y) * std::int64_t(kk);
  for (int r = 0; r < K / kWarpSize; ++r) {
    const int i = r * kWarpSize + lane;
    if (i < kk) row[i] = sel.get(r);
  }
}

template <typename Fn>
void with_queue_length(int kk, Fn&& fn) {
  int K = 32;
  while (K < kk) K <<= 1;
  switch (K) {
    case 32:
      return fn(std::integral_constant<int, 32>{});
    case 64:
      return fn(std::integral_constant<int, 64>{});
    case 128:
      return fn(std::integral_constant<int, 128>{});
    case 256:
      return fn(std::integral_constant<int, 256>{});
    case 512:
      return fn(std::integral_constant<int, 512>{});
    case 1024:
      return fn(std::integral_constant<int, 1024>{});
    case 2048:
      return fn(std::integral_constant<int, 2048>{});
  }
  throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: k above 2048");
}

// Parts per query: enough warps in flight for about two waves of the GPU,
// each part at least a few tiles and k words long.
std::int64_t parts_for(std::int64_t nq, std::int64_t n, int kk, int warps_per_block, int blocks_per_sm) {
  int device = 0, sms = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t slots = std::int64_t(sms) * std::max(blocks_per_sm, 1) * warps_per_block;
  const std::int64_t want = (2 * slots + nq - 1) / nq;
  const std::int64_t most = std::max<std::int64_t>(1, n / std::max<std::int64_t>(8 * kTileVecs, 4 * kk));
  return std::max<std::int64_t>(1, std::min({want, most, std::int64_t(65535)}));
}

}  // namespace

bool exact_knn_gpu_fused_fits(int dim, int k, int device) {
  if (k < 1 || k > kMaxRowK || dim < 1) return false;
  int max_smem = 0;
  GKNN_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::size_t smem = 0;
  with_queue_length(k, [&](auto kc) { smem = fused_smem_bytes<decltype(kc)::value>(dim); });
  return smem <= std::size_t(max_smem);
}

void exact_knn_gpu_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident_fused(r, device, ids, distances); });
}

void exact_knn_resident_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  validate(req);
  if (req.k > kMaxRowK) throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: k above 2048");
  if (req.n >= (std::int64_t(1) << 32) - 1)
    throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: base too large");
  for (std::int64_t j = 0; j < req.nq * req.k; ++j) {
    ids[j] = -1;
    distances[j] = canonical_score(NAN);
  }
  const int kk = static_cast<int>(std::min<std::int64_t>(req.k, req.n));
  if (kk == 0 || req.nq == 0) return;
  GKNN_CUDA(cudaSetDevice(device));
  DeviceBuffer<float> d_queries(req.nq * req.dim);
  GKNN_CUDA(
      cudaMemcpy(d_queries.get(), req.queries, sizeof(float) * req.nq * req.dim, cudaMemcpyHostToDevice));

  with_queue_length(kk, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    using S = FusedShape<K>;
    const std::size_t smem = fused_smem_bytes<K>(req.dim);
    int max_smem = 0;
    GKNN_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (smem > std::size_t(max_smem))
      throw Error(ErrorCode::InvalidArgument,
                  "exact_knn_gpu_fused: dimension too large for the fused kernel");
    GKNN_CUDA(cudaFuncSetAttribute(fused_knn<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    GKNN_CUDA(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_knn<K>, S::kWarps * kWarpSize, smem));
    const std::int64_t P = parts_for(req.nq, req.n, kk, S::kWarps, per_sm);
    const std::int64_t chunk = (req.n + P - 1) / P;
    const std::int64_t parts = (req.n + chunk - 1) / chunk;
    // Queries per launch: the grid's x dimension and the output buffer bound it.
    const std::int64_t per_launch = std::min<std::int64_t>(
        req.nq, std::max<std::int64_t>(S::kWarps, (std::int64_t(1) << 26) / (parts * kk)));
    DeviceBuffer<W96> d_words(per_launch * parts * kk);
    std::vector<W96> words(per_launch * parts * kk);
    for (std::int64_t q0 = 0; q0 < req.nq; q0 += per_launch) {
      const std::int64_t rows = std::min(per_launch, req.nq - q0);
      dim3 grid(unsigned((rows + S::kWarps - 1) / S::kWarps), unsigned(parts));
      fused_knn<K><<<grid, S::kWarps * kWarpSize, smem>>>(req.base, req.n, d_queries.get() + q0 * req.dim,
                                                          rows, req.dim, req.metric, chunk, kk,
                                                          d_words.get());
      GKNN_CUDA(cudaGetLastError());
      GKNN_CUDA(
          cudaMemcpy(words.data(), d_words.get(), sizeof(W96) * rows * parts * kk, cudaMemcpyDeviceToHost));
      // Each part's list is sorted by (distance, id); merge the parts.
      for (std::int64_t r = 0; r < rows; ++r) {
        W96* first = words.data() + r * parts * kk;
        W96* last = first + parts * kk;
        std::partial_sort(first, first + kk, last,
                          [](const W96& a, const W96& b) { return rowsel::wless(a, b); });
        for (int i = 0; i < kk; ++i) {
          if (first[i].col == ~std::uint32_t(0)) break;  // fewer than kk vectors in all parts
          ids[(q0 + r) * req.k + i] = first[i].col;
          distances[(q0 + r) * req.k + i] = select::KeyBits<double>::key(first[i].key);
        }
      }
    }
  });
}

}  // namespace gknn
