// Exact kNN with distance and k-selection fused in one kernel (the thesis'
// fused kernel): no distance matrix is ever written. For small dimensions,
// where a GEMM is too thin to use the tensor cores and the distance matrix
// would cost more to write and read than the distances cost to compute; and
// for L1, which is no dot product.
//
// A block holds kWarps queries, one per warp, and walks a part of the base in
// tiles of 32 * E vectors (E = 4, or 1 for large dimensions) staged in shared memory (rows padded to an odd
// stride, so lanes reading different rows hit different banks). Each lane
// computes E distances with the shared distance code (bit-identical to the
// SQL operators and the CPU reference) and hands them to the warp's
// SmemSelect (warp_select.cuh): radius prefilter, candidate buffer, sorted
// queue. Words carry (distance, base id), so the selection's order is the
// contract's (distance, id). When there are too few queries to fill the GPU,
// the base is split over P parts (blockIdx.y); the host merges each query's
// P sorted lists, which are short (P * k words).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "distance/group_distance.cuh"
#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/knn.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/warp_select.cuh"

namespace gknn {
namespace {

using rowsel::KeyLoad;
using rowsel::kWarpSize;
using rowsel::SmemSelect;
using rowsel::W96;
using Load = KeyLoad<double>;  // distances are float8, as SQL sees them

// Base vectors per lane per tile: 4 (tiles of 128 vectors), or 1 (32) where
// 128 rows of the dimension would not fit in shared memory (Fashion-MNIST's
// 784 dimensions: a 128-row tile is 402 KB, a 32-row one 100 KB).
constexpr int kWideE = 4, kNarrowE = 1;

template <int K>
struct FusedShape {
  static constexpr int kWarps = K >= 512 ? 4 : 8;
  static constexpr int kCap = K <= 32 ? 64 : K <= 128 ? 128 : K <= 512 ? 256 : 512;
};

__host__ __device__ inline int row_stride(int dim) { return dim | 1; }

// From this dimension on, a tile's distances are computed by groups of eight
// threads, one (query, row) pair each, by every warp of the block (group_distance,
// the same bits), then read by the queries' warps from shared memory: with
// one thread per row, only the warps of the block's queries computed, so a
// lone query's block left seven of its eight warps idle and ran about three
// times slower than the memory (Fashion-MNIST's rows, one query: 183 us).
// Only launches of at most kGroupedQueries queries are grouped: with more,
// their own warps keep the block busy and the per-thread rows are faster
// (H100, 60,000 x 784, grouped against not: 1 query 0.218 -> 0.17 ms a call,
// 2 queries 0.23 -> 0.21, 4 queries 0.26 -> 0.30).
constexpr int kGroupedDim = 64, kGroupedQueries = 2;

template <int K, int E>
std::size_t fused_smem_bytes(int dim) {
  using S = FusedShape<K>;
  return std::size_t(S::kWarps) * (S::kCap + K) * sizeof(W96) +
         sizeof(float) * (std::size_t(kWarpSize) * E * row_stride(dim) + std::size_t(S::kWarps) * dim);
}

// Shared memory a grouped launch adds after fused_smem_bytes: the tile's
// distances for the block's queries (and room to align them).
template <int K, int E>
std::size_t grouped_smem_bytes() {
  return sizeof(double) * (FusedShape<K>::kWarps * kWarpSize * E + 1);
}

// Loads issued at once per thread when a tile is staged.
constexpr int kStageBatch = 8;

// Copies `vecs` rows of `dim` floats from `src` into the tile's padded rows,
// flat over the tile, each thread issuing kStageBatch loads before it stores
// any, 16-byte loads where the rows allow: a thread copying one element at a
// time waited for each load in turn, and the kernel ran about eight times
// slower than the memory (Fashion-MNIST's rows, one query: 0.71 ms).
template <typename V>
__device__ __forceinline__ void stage_rows(float* tile, int stride, const V* src, int vecs, int row_words) {
  constexpr int kW = sizeof(V) / sizeof(float);
  const int total = vecs * row_words;
  for (int i0 = threadIdx.x; i0 < total; i0 += kStageBatch * blockDim.x) {
    V v[kStageBatch];
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < total) v[u] = __ldg(src + i);
    }
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i >= total) break;
      const int r = i / row_words;
      float* d = tile + r * stride + (i - r * row_words) * kW;
      const float* w = reinterpret_cast<const float*>(&v[u]);
#pragma unroll
      for (int c = 0; c < kW; ++c) d[c] = w[c];
    }
  }
}

__device__ __forceinline__ void stage_tile(float* tile, int stride, const float* src, int vecs, int dim) {
  if ((dim & 3) == 0 && (reinterpret_cast<std::uintptr_t>(src) & 15) == 0)
    stage_rows(tile, stride, reinterpret_cast<const float4*>(src), vecs, dim >> 2);
  else
    stage_rows(tile, stride, src, vecs, dim);
}

template <int K, int E>
__global__ void __launch_bounds__(FusedShape<K>::kWarps* kWarpSize)
    fused_knn(const float* base, std::int64_t n, const float* queries, std::int64_t nq, int dim,
              Metric metric, std::int64_t chunk, int kk, const std::int64_t* row_ids, bool grouped, W96* out,
              std::int64_t* out_ids) {
  using S = FusedShape<K>;
  constexpr int kTileVecs = kWarpSize * E;
  extern __shared__ __align__(16) unsigned char smem[];
  W96* bufs = reinterpret_cast<W96*>(smem);
  W96* queues = bufs + S::kWarps * S::kCap;
  float* tile = reinterpret_cast<float*>(queues + S::kWarps * K);
  const int stride = row_stride(dim);
  float* qs = tile + kTileVecs * stride;
  double* tile_dist = reinterpret_cast<double*>(  // the next 8-byte boundary (grouped_smem_bytes has room)
      (reinterpret_cast<std::uintptr_t>(qs + S::kWarps * dim) + 7) & ~std::uintptr_t(7));

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const std::int64_t q = std::int64_t(blockIdx.x) * S::kWarps + warp;
  const bool active = q < nq;
  const int queries_here = int(nq < S::kWarps ? nq : S::kWarps);  // grouped: nq <= kGroupedQueries
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
    stage_tile(tile, stride, src, vecs, dim);
    __syncthreads();
    if (grouped) {
      const int groups = blockDim.x / kGroupLanes, l8 = threadIdx.x % kGroupLanes;
      for (int pair = threadIdx.x / kGroupLanes; pair < queries_here * vecs; pair += groups) {
        const int qq = pair / vecs, v = pair % vecs;
        const double d = group_distance(metric, tile + v * stride, qs + qq * dim, dim, l8);
        if (l8 == 0) tile_dist[qq * kTileVecs + v] = canonical_score(d);
      }
      __syncthreads();
    }
    if (!active) continue;
    double e[E];
    unsigned valid = 0;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const int v = j * kWarpSize + lane;  // the column layout buffered_tile expects (kVec = 1)
      if (v < vecs)
        e[j] = grouped ? tile_dist[warp * kTileVecs + v]
                       : canonical_score(distance(metric, tile + v * stride, query, dim));
      else
        e[j] = 0.0;
      valid |= unsigned(v < vecs) << j;
    }
    sel.template tile<E, 1>(e, t0, valid);
  }
  if (!active) return;
  sel.flush();
  const std::int64_t at = (q * gridDim.y + blockIdx.y) * std::int64_t(kk);
  for (int r = 0; r < K / kWarpSize; ++r) {
    const int i = r * kWarpSize + lane;
    if (i >= kk) continue;
    const W96 w = sel.get(r);
    out[at + i] = w;
    // The id beside the word, so the host merge needs no second trip.
    const bool none = w.col == ~std::uint32_t(0);
    out_ids[at + i] = none ? -1 : row_ids ? row_ids[w.col] : std::int64_t(w.col);
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

// The largest dynamic shared memory a block of `device` may have.
int max_smem_of(int device) {
  int max_smem = 0;
  GKNN_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return max_smem;
}

// Calls fn(K, E) for the queue length that holds kk and the widest tile
// whose shared memory fits `max_smem`; false when none fits.
template <typename Fn>
bool with_shape(int kk, int dim, int max_smem, Fn&& fn) {
  bool fits = false;
  with_queue_length(kk, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    if (fused_smem_bytes<K, kWideE>(dim) <= std::size_t(max_smem)) {
      fits = true;
      fn(kc, std::integral_constant<int, kWideE>{});
    } else if (fused_smem_bytes<K, kNarrowE>(dim) <= std::size_t(max_smem)) {
      fits = true;
      fn(kc, std::integral_constant<int, kNarrowE>{});
    }
  });
  return fits;
}

// Parts per query: enough warps in flight for about two waves of the GPU,
// each part at least a few tiles and k words long.
std::int64_t parts_for(std::int64_t nq, std::int64_t n, int kk, int tile_vecs, int warps_per_block,
                       int blocks_per_sm) {
  int device = 0, sms = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t slots = std::int64_t(sms) * std::max(blocks_per_sm, 1) * warps_per_block;
  const std::int64_t want = (2 * slots + nq - 1) / nq;
  const std::int64_t most = std::max<std::int64_t>(1, n / std::max<std::int64_t>(8 * tile_vecs, 4 * kk));
  return std::max<std::int64_t>(1, std::min({want, most, std::int64_t(65535)}));
}

}  // namespace

bool exact_knn_gpu_fused_fits(int dim, int k, int device) {
  if (k < 1 || k > kMaxRowK || dim < 1) return false;
  return with_shape(k, dim, max_smem_of(device), [](auto, auto) {});
}

void exact_knn_gpu_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident_fused(r, device, ids, distances); });
}

// Stream-ordered on the calling thread's stream, one host wait per launch:
// the GPU service runs small batches from several threads at once, and a
// cudaMalloc, cudaFree or legacy-stream copy would make them wait for each
// other's work.
void exact_knn_resident_fused(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                              const std::int64_t* row_ids) {
  validate(req);
  if (req.k > kMaxRowK) throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: k above 2048");
  if (req.n >= (std::int64_t(1) << 32) - 1)
    throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: base too large");
  pad_results(ids, distances, req.nq * req.k);
  const int kk = static_cast<int>(std::min<std::int64_t>(req.k, req.n));
  if (kk == 0 || req.nq == 0) return;
  GKNN_CUDA(cudaSetDevice(device));
  const cudaStream_t s = thread_stream(device);
  AsyncBuffer<float> d_queries(req.nq * req.dim, s);
  GKNN_CUDA(cudaMemcpyAsync(d_queries.get(), req.queries, sizeof(float) * req.nq * req.dim,
                            cudaMemcpyHostToDevice, s));

  const bool fits = with_shape(kk, req.dim, max_smem_of(device), [&](auto kc, auto ec) {
    constexpr int K = decltype(kc)::value, E = decltype(ec)::value;
    using S = FusedShape<K>;
    const std::size_t smem = fused_smem_bytes<K, E>(req.dim);
    // Grouped (kGroupedDim): launches of at most kGroupedQueries queries,
    // where their shared memory allows; the others keep fused_smem_bytes,
    // so that as many blocks fit an SM as before.
    const std::size_t smem_grouped = smem + grouped_smem_bytes<K, E>();
    const bool may_group = req.dim >= kGroupedDim && smem_grouped <= std::size_t(max_smem_of(device));
    GKNN_CUDA(cudaFuncSetAttribute(fused_knn<K, E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(may_group ? smem_grouped : smem)));
    int per_sm = 0;
    GKNN_CUDA(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_knn<K, E>, S::kWarps * kWarpSize, smem));
    const std::int64_t P = parts_for(req.nq, req.n, kk, kWarpSize * E, S::kWarps, per_sm);
    const std::int64_t chunk = (req.n + P - 1) / P;
    const std::int64_t parts = (req.n + chunk - 1) / chunk;
    // Queries per launch: the grid's x dimension and the output buffer bound it.
    const std::int64_t per_launch = std::min<std::int64_t>(
        req.nq, std::max<std::int64_t>(S::kWarps, (std::int64_t(1) << 26) / (parts * kk)));
    const std::int64_t words_per_launch = per_launch * parts * kk;
    AsyncBuffer<W96> d_words(words_per_launch, s);
    AsyncBuffer<std::int64_t> d_ids(words_per_launch, s);
    std::vector<W96> words_heap;
    std::vector<std::int64_t> ids_heap;
    W96* words = pinned_or(0, words_per_launch, words_heap);
    std::int64_t* word_ids = pinned_or(1, words_per_launch, ids_heap);
    std::vector<std::int64_t> order(std::size_t(parts) * kk);
    for (std::int64_t q0 = 0; q0 < req.nq; q0 += per_launch) {
      const std::int64_t rows = std::min(per_launch, req.nq - q0);
      dim3 grid(unsigned((rows + S::kWarps - 1) / S::kWarps), unsigned(parts));
      const bool grouped = may_group && rows <= kGroupedQueries;
      fused_knn<K, E><<<grid, S::kWarps * kWarpSize, grouped ? smem_grouped : smem, s>>>(
          req.base, req.n, d_queries.get() + q0 * req.dim, rows, req.dim, req.metric, chunk, kk, row_ids,
          grouped, d_words.get(), d_ids.get());
      GKNN_CUDA(cudaGetLastError());
      const std::int64_t count = rows * parts * kk;
      GKNN_CUDA(cudaMemcpyAsync(words, d_words.get(), sizeof(W96) * count, cudaMemcpyDeviceToHost, s));
      GKNN_CUDA(
          cudaMemcpyAsync(word_ids, d_ids.get(), sizeof(std::int64_t) * count, cudaMemcpyDeviceToHost, s));
      GKNN_CUDA(cudaStreamSynchronize(s));
      // Each part's list is sorted by (distance, row); merge the parts.
      for (std::int64_t r = 0; r < rows; ++r) {
        const W96* first = words + r * parts * kk;
        const std::int64_t* first_id = word_ids + r * parts * kk;
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = std::int64_t(i);
        std::partial_sort(order.begin(), order.begin() + kk, order.end(),
                          [&](std::int64_t a, std::int64_t b) { return rowsel::wless(first[a], first[b]); });
        for (int i = 0; i < kk; ++i) {
          const W96& w = first[order[i]];
          if (w.col == ~std::uint32_t(0)) break;  // fewer than kk vectors in all parts
          ids[(q0 + r) * req.k + i] = first_id[order[i]];
          distances[(q0 + r) * req.k + i] = select::KeyBits<double>::key(w.key);
        }
      }
    }
  });
  if (!fits)
    throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_fused: dimension too large for the fused kernel");
}

}  // namespace gknn
