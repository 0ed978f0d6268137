// Exact kNN through a GEMM (Faiss §5.1), with results equal to exact float32
// search in every precision.
//
//   1. Augmented rows make the GEMM produce the ranking value directly, so
//      nothing else touches the distance matrix between the GEMM's write and
//      the k-select's read (the "fused norm-add"):
//        L2      q' = [-2q, 1]        y' = [y, |y|^2]   q'.y' = |q-y|^2 - |q|^2
//        IP      q' = [-q]            y' = [y]          q'.y' = -(q.y)
//        cosine  q' = [-q/|q|, 1]     y' = [y/|y|, z]   z = 3 for |y| = 0 (ranked last)
//   2. Base tiles of the matrix go through select_rows_gpu (k' = k plus a
//      margin per query), tiles merge into k' candidates per query. GEMMs of
//      the next tile are queued on the other stream before the current
//      tile's selection, so they overlap.
//   3. Candidates are re-ranked with gknn::distance (the same code as the SQL
//      operators and the CPU reference) and sorted by (distance, id).
//   4. A query is certified when the best excluded candidate cannot beat the
//      k-th exact one: its proxy, minus a rigorous bound on the GEMM's error
//      (input rounding of the chosen precision plus float accumulation),
//      still ranks strictly after it. Queries that are not certified (near
//      ties at the margin, zero vectors) are recomputed by brute force.
#include <cuda_bf16.h>

#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/knn.h"
#include "gknn/select.h"
#include "runtime/cublas_loader.h"
#include "runtime/cuda_check.h"
#include "runtime/gemm.h"
#include "runtime/stream_tools.h"
#include "select/rows_async.h"
#include "select/bitonic_topk.cuh"

namespace gknn {
namespace {

constexpr int kDimAlign = 8;  // augmented rows padded for aligned GEMM operands
constexpr std::int64_t kBaseTile = 32768;
constexpr int kRerankSlots = 4096;  // candidates re-ranked per query (power of two >= k')
constexpr int kRerankThreads = 256;

int augmented_dim(int dim) { return (dim + 1 + kDimAlign - 1) / kDimAlign * kDimAlign; }

// One warp per row: the augmented row and |row|^2 (float, lane sums as in
// distance.h; only used for bounds and the L2 column).
__global__ void augment_rows(const float* x, std::int64_t rows, int dim, int dp, Metric metric, bool query,
                             float* out, double* sqnorm) {
  std::int64_t row = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* v = x + row * dim;
  double acc = 0;
  for (int i = lane; i < dim; i += 32) acc += double(v[i]) * v[i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  float* o_row = out + row * dp;
  const double norm = sqrt(acc);
  float scale = 1.0f, extra = 0.0f;
  switch (metric) {
    case Metric::L2:
      scale = query ? -2.0f : 1.0f;
      extra = query ? 1.0f : float(acc);
      break;
    case Metric::InnerProduct:
      scale = query ? -1.0f : 1.0f;
      break;
    case Metric::Cosine:
      scale = norm > 0 ? float((query ? -1.0 : 1.0) / norm) : 0.0f;
      extra = query ? 1.0f : (norm > 0 ? 0.0f : 3.0f);
      break;
    default:
      break;
  }
  for (int i = lane; i < dp; i += 32) o_row[i] = i < dim ? v[i] * scale : (i == dim ? extra : 0.0f);
  if (lane == 0) sqnorm[row] = acc;
}

__global__ void to_bf16(const float* in, std::int64_t n, __nv_bfloat16* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

// Tile results (column index within the tile) into the per-query partial
// list, as global ids.
__global__ void scatter_partials(const float* keys, const std::uint32_t* cols, int rows, int kk,
                                 std::int64_t tile_base, int slot, int ld, float* pkeys,
                                 std::uint32_t* pids) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * kk) return;
  int r = i / kk, j = i % kk;
  pkeys[std::int64_t(r) * ld + slot * kk + j] = keys[i];
  pids[std::int64_t(r) * ld + slot * kk + j] =
      cols[i] == 0xffffffffu ? 0xffffffffu : std::uint32_t(tile_base + cols[i]);
}

// One block per query: exact distances of the k' candidates, sorted by
// (distance, id); the first k written; certified or not.
__global__ void __launch_bounds__(kRerankThreads)
    rerank(const float* base, const float* queries, int dim, Metric metric, const std::uint32_t* cand_ids,
           int ld, const float* cand_proxy, const std::uint32_t* cand_cols, int kk, int k,
           const double* q_sqnorm, double y_max_sq, double u_gemm, std::int64_t* out_ids, double* out_dist,
           int* uncertified) {
  using P = select::Packing<double, std::uint64_t>;
  using Word = P::Word;
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  const int q = blockIdx.x;
  const float* query = queries + std::int64_t(q) * dim;
  for (int j = threadIdx.x; j < kRerankSlots; j += kRerankThreads) {
    Word w = select::max_word<Word>();
    if (j < kk) {
      std::uint32_t col = cand_cols[std::int64_t(q) * kk + j];
      std::uint32_t id = col == 0xffffffffu ? 0xffffffffu : cand_ids[std::int64_t(q) * ld + col];
      if (id != 0xffffffffu)
        w = P::pack(canonical_score(distance(metric, base + std::int64_t(id) * dim, query, dim)), id, false);
    }
    s[j] = w;
  }
  __syncthreads();
  select::local_sort<Word, kRerankSlots, kRerankThreads>(s, kRerankSlots);  // one ascending run
  for (int j = threadIdx.x; j < k; j += kRerankThreads) {
    out_ids[std::int64_t(q) * k + j] = std::int64_t(P::payload(s[j]));
    out_dist[std::int64_t(q) * k + j] = P::key(s[j], false);
  }
  if (threadIdx.x != 0) return;
  // The best excluded candidate's proxy is at least the k'-th proxy.
  const double proxy = cand_proxy[std::int64_t(q) * kk + kk - 1];
  const double kth = P::key(s[k - 1], false);
  const double gamma = (dim + 2) * 1.2e-7;  // float accumulation, with room
  const double qn2 = q_sqnorm[q];
  double lower;  // a lower bound of every excluded candidate's exact distance
  switch (metric) {
    case Metric::L2: {
      double err = 2.0 * (u_gemm + gamma) * (qn2 + 2.0 * y_max_sq + 2.0 * sqrt(qn2 * y_max_sq));
      double sq = (proxy - err + qn2) * (1.0 - gamma);
      lower = sq > 0 ? sqrt(sq) : 0.0;
      break;
    }
    case Metric::InnerProduct:
      lower = proxy - 2.0 * (u_gemm + gamma) * sqrt(qn2 * y_max_sq);
      break;
    default:  // cosine: unit vectors
      lower = 1.0 + proxy - 4.0 * (u_gemm + gamma);
      break;
  }
  bool ok = !isnan(kth) && qn2 > 0 && lower > kth;
  if (!ok) uncertified[q] = 1;
}

// The largest |y|^2 of the base, rows with a NaN ignored: such a row's
// exact distance is NaN, so it ranks after every other row whatever the
// bound says (and the k-th distance being NaN leaves a query uncertified).
struct MaxIgnoringNan {
  __host__ __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

double largest_square(const double* d_sq, std::int64_t n, cudaStream_t st) {
  AsyncBuffer<double> out(1, st);
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceReduce::Reduce(nullptr, bytes, d_sq, out.get(), n, MaxIgnoringNan{}, 0.0, st));
  AsyncBuffer<unsigned char> temp(bytes, st);
  GKNN_CUDA(cub::DeviceReduce::Reduce(temp.get(), bytes, d_sq, out.get(), n, MaxIgnoringNan{}, 0.0, st));
  double host = 0;
  GKNN_CUDA(cudaMemcpyAsync(&host, out.get(), sizeof(double), cudaMemcpyDeviceToHost, st));
  GKNN_CUDA(cudaStreamSynchronize(st));
  return host;
}

// Augmented base rows, their |y|^2 and the largest of them, on `st`.
void augment_base(const float* base, std::int64_t n, int dim, Metric metric, float* aug, double* sq,
                  double* y_max_sq, cudaStream_t st) {
  const int dp = augmented_dim(dim);
  augment_rows<<<unsigned((n * 32 + 255) / 256), 256, 0, st>>>(base, n, dim, dp, metric, false, aug, sq);
  GKNN_CUDA(cudaGetLastError());
  *y_max_sq = largest_square(sq, n, st);
}

}  // namespace

// The candidate list: k plus a margin for the re-rank.
static std::int64_t candidates_for(std::int64_t k) { return k + std::max<std::int64_t>(32, k / 2); }

bool exact_knn_gpu_gemm_fits(std::int64_t n, int k, Metric metric) {
  const std::int64_t kk = candidates_for(k);
  return metric != Metric::L1 && kk <= kMaxRowK && kk <= kRerankSlots && n >= 4 * kk &&
         n < (std::int64_t(1) << 32) - 1;
}

void exact_knn_gpu_gemm(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident_gemm(r, device, ids, distances); });
}

GemmBase::GemmBase(const float* base_, std::int64_t n_, int dim_, Metric metric_, int device)
    : base(base_), metric(metric_), dim(dim_), n(n_), aug(n_ * augmented_dim(dim_)), sq(n_) {
  if (n > 0) augment_base(base, n, dim, metric, aug.get(), sq.get(), &y_max_sq, thread_stream(device));
}

std::size_t GemmBase::bytes() const { return aug.size() * sizeof(float) + sq.size() * sizeof(double); }

void exact_knn_resident_gemm(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                             const GemmBase* prepared, const std::int64_t* row_ids) {
  validate(req);
  const Cublas* blas = load_cublas();
  const std::int64_t kk = candidates_for(req.k);
  if (!blas || !exact_knn_gpu_gemm_fits(req.n, req.k, req.metric) || req.k == 0 || req.nq == 0)
    return exact_knn_resident_bruteforce(req, device, ids, distances, row_ids);
  GKNN_CUDA(cudaSetDevice(device));

  const int dim = req.dim, dp = augmented_dim(dim);
  const std::int64_t n = req.n, nq = req.nq, k = req.k;
  // The calling thread's two streams: every temporary is taken on the
  // first, which the second waits for before it uses any, and freed there
  // after both are done (each tile waits for its stream below).
  const cudaStream_t streams[2] = {thread_stream(device, 0), thread_stream(device, 1)};
  const bool use_prepared = prepared && prepared->metric == req.metric && prepared->n == n &&
                            prepared->dim == dim && prepared->base == req.base;
  AsyncBuffer<float> d_queries(nq * dim, streams[0]), q_aug(nq * dp, streams[0]);
  AsyncBuffer<float> own_aug(use_prepared ? 0 : n * dp, streams[0]);
  AsyncBuffer<double> own_sq(use_prepared ? 0 : n, streams[0]), q_sq(nq, streams[0]);
  GKNN_CUDA(cudaMemcpyAsync(d_queries.get(), req.queries, sizeof(float) * nq * dim, cudaMemcpyHostToDevice,
                            streams[0]));
  const float* base_aug = use_prepared ? prepared->aug.get() : own_aug.get();
  double y_max_sq = use_prepared ? prepared->y_max_sq : 0.0;
  if (!use_prepared)
    augment_base(req.base, n, dim, req.metric, own_aug.get(), own_sq.get(), &y_max_sq, streams[0]);
  augment_rows<<<unsigned((nq * 32 + 255) / 256), 256, 0, streams[0]>>>(
      d_queries.get(), nq, dim, dp, req.metric, true, q_aug.get(), q_sq.get());
  GKNN_CUDA(cudaGetLastError());

  Gemm gemm(blas, req.precision);
  const bool bf16 = req.precision == GemmPrecision::Bf16;
  AsyncBuffer<__nv_bfloat16> base_h(bf16 ? n * dp : 0, streams[0]), q_h(bf16 ? nq * dp : 0, streams[0]);
  if (bf16) {
    to_bf16<<<1024, 256, 0, streams[0]>>>(base_aug, n * dp, base_h.get());
    to_bf16<<<1024, 256, 0, streams[0]>>>(q_aug.get(), nq * dp, q_h.get());
    GKNN_CUDA(cudaGetLastError());
  }
  const void* y_in = bf16 ? static_cast<const void*>(base_h.get()) : base_aug;
  const void* q_in = bf16 ? static_cast<const void*>(q_h.get()) : q_aug.get();
  const std::size_t elem = bf16 ? sizeof(__nv_bfloat16) : sizeof(float);

  const std::int64_t tiles = (n + kBaseTile - 1) / kBaseTile;
  const std::int64_t tq =
      std::max<std::int64_t>(1, std::min<std::int64_t>(nq, (std::int64_t(1) << 28) / kBaseTile));
  const int ld = static_cast<int>(tiles * kk);
  AsyncBuffer<float> dist0(tq * kBaseTile, streams[0]), dist1(tq * kBaseTile, streams[0]);
  float* const dist[2] = {dist0.get(), dist1.get()};
  // A tile's selection per stream, so that the streams never wait for the
  // host: each writes its own tile results and its own slots of the partials.
  AsyncBuffer<float> tkeys0(tq * kk, streams[0]), tkeys1(tq * kk, streams[0]);
  AsyncBuffer<std::uint32_t> tcols0(tq * kk, streams[0]), tcols1(tq * kk, streams[0]);
  float* const tkeys[2] = {tkeys0.get(), tkeys1.get()};
  std::uint32_t* const tcols[2] = {tcols0.get(), tcols1.get()};
  AsyncBuffer<float> pkeys(tq * ld, streams[0]), ckeys(tq * kk, streams[0]);
  AsyncBuffer<std::uint32_t> pids(tq * ld, streams[0]), ccols(tq * kk, streams[0]);
  AsyncBuffer<std::int64_t> out_ids(tq * k, streams[0]);
  AsyncBuffer<double> out_dist(tq * k, streams[0]);
  AsyncBuffer<int> uncertified(tq, streams[0]);
  stream_wait(streams[1], streams[0]);  // the second stream sees the buffers made on the first
  const int rerank_smem = kRerankSlots * sizeof(select::U128);
  GKNN_CUDA(cudaFuncSetAttribute(rerank, cudaFuncAttributeMaxDynamicSharedMemorySize, rerank_smem));
  std::vector<std::int64_t> redo;

  for (std::int64_t q0 = 0; q0 < nq; q0 += tq) {
    const int rows = static_cast<int>(std::min(tq, nq - q0));
    const char* qptr = static_cast<const char*>(q_in) + q0 * dp * elem;
    auto issue_gemm = [&](std::int64_t t) {
      const int s = int(t & 1);
      const std::int64_t b0 = t * kBaseTile;
      const int cols = static_cast<int>(std::min(kBaseTile, n - b0));
      gemm.run(s, streams[s], static_cast<const char*>(y_in) + b0 * dp * elem, cols, dp, qptr, rows, dp, dp,
               dist[s], static_cast<int>(kBaseTile));
    };
    issue_gemm(0);
    for (std::int64_t t = 0; t < tiles; ++t) {
      const int s = int(t & 1);
      const std::int64_t b0 = t * kBaseTile;
      const std::int64_t cols = std::min(kBaseTile, n - b0);
      // The next GEMM writes the other buffer; it waits for that buffer's
      // previous selection (same stream) and overlaps this one.
      if (t + 1 < tiles) issue_gemm(t + 1);
      select_rows_async<float, std::uint32_t>(dist[s], rows, cols, kBaseTile, int(kk), SelectOrder::Smallest,
                                              tkeys[s], tcols[s], streams[s]);
      scatter_partials<<<unsigned((rows * kk + 255) / 256), 256, 0, streams[s]>>>(
          tkeys[s], tcols[s], rows, int(kk), b0, int(t), ld, pkeys.get(), pids.get());
      GKNN_CUDA(cudaGetLastError());
    }
    stream_wait(streams[0], streams[1]);  // every tile's partials are in
    select_rows_async<float, std::uint32_t>(pkeys.get(), rows, ld, ld, int(kk), SelectOrder::Smallest,
                                            ckeys.get(), ccols.get(), streams[0]);
    // ccols index each query's row of partials; rerank maps them to ids.
    GKNN_CUDA(cudaMemsetAsync(uncertified.get(), 0, sizeof(int) * rows, streams[0]));
    rerank<<<rows, kRerankThreads, rerank_smem, streams[0]>>>(
        req.base, d_queries.get() + q0 * dim, dim, req.metric, pids.get(), ld, ckeys.get(), ccols.get(),
        int(kk), int(k), q_sq.get() + q0, y_max_sq, gemm.input_rounding(), out_ids.get(), out_dist.get(),
        uncertified.get());
    GKNN_CUDA(cudaGetLastError());
    if (row_ids) map_rows_async(out_ids.get(), rows * k, row_ids, streams[0]);
    GKNN_CUDA(cudaMemcpyAsync(ids + q0 * k, out_ids.get(), sizeof(std::int64_t) * rows * k,
                              cudaMemcpyDeviceToHost, streams[0]));
    GKNN_CUDA(cudaMemcpyAsync(distances + q0 * k, out_dist.get(), sizeof(double) * rows * k,
                              cudaMemcpyDeviceToHost, streams[0]));
    std::vector<int> flags(rows);
    GKNN_CUDA(cudaMemcpyAsync(flags.data(), uncertified.get(), sizeof(int) * rows, cudaMemcpyDeviceToHost,
                              streams[0]));
    GKNN_CUDA(cudaStreamSynchronize(streams[0]));
    for (int r = 0; r < rows; ++r)
      if (flags[r]) redo.push_back(q0 + r);
  }
  if (redo.empty()) return;
  // Queries the bound could not certify: again through an fp32 GEMM when the
  // first pass was reduced precision (its error band is far narrower), else
  // exact distances to every row (the scan where its selection holds k,
  // brute force otherwise), for just those queries.
  std::vector<float> sub(redo.size() * dim);
  for (std::size_t i = 0; i < redo.size(); ++i)
    std::copy(req.queries + redo[i] * dim, req.queries + (redo[i] + 1) * dim, sub.begin() + i * dim);
  KnnRequest again = req;
  again.queries = sub.data();
  again.nq = static_cast<std::int64_t>(redo.size());
  std::vector<std::int64_t> sub_ids(again.nq * k);
  std::vector<double> sub_dist(again.nq * k);
  if (req.precision != GemmPrecision::Fp32) {
    again.precision = GemmPrecision::Fp32;
    exact_knn_resident_gemm(again, device, sub_ids.data(), sub_dist.data(), prepared, row_ids);
  } else if (exact_knn_gpu_scan_fits(dim, int(k))) {  // each row read once per 16 queries, no sort
    exact_knn_resident_scan(again, device, sub_ids.data(), sub_dist.data(), row_ids);
  } else {
    exact_knn_resident_bruteforce(again, device, sub_ids.data(), sub_dist.data(), row_ids);
  }
  for (std::size_t i = 0; i < redo.size(); ++i) {
    std::copy(sub_ids.begin() + i * k, sub_ids.begin() + (i + 1) * k, ids + redo[i] * k);
    std::copy(sub_dist.begin() + i * k, sub_dist.begin() + (i + 1) * k, distances + redo[i] * k);
  }
}

}  // namespace gknn
