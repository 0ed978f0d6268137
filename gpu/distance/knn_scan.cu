// Exact kNN for a few queries over a resident base: every row read once for
// up to 16 queries (distances_many: eight threads a row, each query's sum in
// distance()'s lanes and order, so the CPU's bits), the distances written as
// a matrix, then each query's k best by the batched row selection
// (select_rows, ties by column = row). The fused kernel kept one query per
// warp and each lane summed a whole row: with few queries most warps idled
// and the kernel was bound by their arithmetic, about 3.5x the memory's time
// for one query over 1M x 128 and growing with every query
// (bench/results/knn-resident-H200-2026-11-28.md). Here the base is read once
// for the batch, the matrix costs 4 bytes a (query, row) each way: 0.30-0.87x
// the fused kernel's time at every measured shape, below the GEMM path's up
// to 32 queries (knn-resident-scan-H200-2026-11-28.md).
//
// Keys: where the distance is a monotone function of one float sum (L2: its
// square root; inner product: its negation; L1: itself) the matrix holds that
// float, which ranks rows exactly as the distance does, ties included (a
// float's square root in double is exact enough to keep distinct floats
// distinct), and the distance is computed from the k kept sums. Cosine needs
// three sums: its matrix holds the distance itself, as a double.
//
// The base goes in passes of rows whose matrix fits kScanScratchBytes; each
// pass keeps its k best per query and the host merges the passes' lists.
// A caller may fill the passes' matrices itself (ScanKeys, knn_resident.h:
// ivfpq's pruned exact search puts +inf where its bounds rule a row out).
#include <algorithm>
#include <string>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "distance/distances_many.cuh"
#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/knn.h"
#include "gknn/plan.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/rows_async.h"

namespace gknn {
namespace {

// The matrix of one pass: queries x rows keys (a 1M-row pass of 16 queries
// with float keys).
constexpr std::size_t kScanScratchBytes = std::size_t(64) << 20;
constexpr std::int64_t kMinPassRows = 65536;

static_assert(kScanMaxDim * sizeof(float) <= kConstantsSmemMax,
              "one query of kScanMaxDim fits shared memory");

template <int METRIC>
using ScanKey = std::conditional_t<METRIC == int(Metric::Cosine), double, float>;

// The key a row's sums rank by (see above).
template <int METRIC>
__device__ __forceinline__ ScanKey<METRIC> scan_key(float s, float na, float nb) {
  if constexpr (METRIC == int(Metric::Cosine))
    return finish_distance<METRIC>(s, na, nb);
  else if constexpr (METRIC == int(Metric::InnerProduct))
    return -s;
  else
    return s;
}

// The operator's distance from a kept key.
template <int METRIC>
__device__ __forceinline__ double key_distance(ScanKey<METRIC> key) {
  if constexpr (METRIC == int(Metric::L2))
    return sqrt(static_cast<double>(key));
  else
    return static_cast<double>(key);  // -s for inner product: exact in double
}

// distances_many's rows: a pass of `n` base rows of `dim` floats, query q's
// key of row p at out[q * n + p].
template <int METRIC>
struct PassRows {
  const float* base;
  std::int64_t n;
  int dim;
  ScanKey<METRIC>* out;
  __device__ std::int64_t positions() const { return n; }
  __device__ const float* row(std::int64_t p) const { return base + p * dim; }
  __device__ void store(std::int64_t p, int q, float s, float na, float nb) const {
    out[q * n + p] = scan_key<METRIC>(s, na, nb);
  }
};

// Two shapes of the kernel, by row length. Long rows: 8 elements loaded by
// each thread before it sums (0.58 ms for 16 queries over 1M x 128 where 4
// took 0.61, 0.31 where 4 took 0.34 over 60,000 x 784; 16 no better:
// knn-resident-scan-H200-2026-11-28.md). Short rows (dim <= kShortRow): 4
// loads ahead and registers capped for 4 blocks an SM (the 16-query L2
// kernel took 80 registers, 3 blocks): 1M x 128, 8 to 32 queries, 14-17 %
// less time; over 784 dimensions the same shape lost 5-10 % from 12 queries
// up (knn-scan-occupancy-H200-2026-11-28.md). Not for cosine: its three
// sums a query spill about 1 KB under the cap.
constexpr int kShortRow = 256;

template <int METRIC, int QT, bool SHORT>
__global__ void __launch_bounds__(kDistanceThreads, SHORT ? 4 : 1)
    scan_distances(PassRows<METRIC> rows, const float* queries, int nq, int qdim) {
  distances_many<METRIC, QT, PassRows<METRIC>, SHORT ? 4 : 8>(rows, queries, nq, qdim);
}

template <int METRIC, int QT, bool SHORT>
void launch_scan(const PassRows<METRIC>& pr, const float* queries, int nq, std::int64_t groups,
                 std::size_t smem, cudaStream_t s) {
  const std::int64_t grid =
      std::min<std::int64_t>(groups, distance_blocks<scan_distances<METRIC, QT, SHORT>>(smem));
  scan_distances<METRIC, QT, SHORT><<<unsigned(grid), kDistanceThreads, smem, s>>>(pr, queries, nq, pr.dim);
}

// A pass's k best (columns within the pass) -> distances and ids at
// [q][pass][j] of the call's lists; an empty slot -> id -1, NaN.
template <int METRIC>
__global__ void finish_pass(const ScanKey<METRIC>* keys, const std::uint32_t* cols, std::int64_t nq, int kk,
                            std::int64_t pass, std::int64_t passes, std::int64_t first_row,
                            const std::int64_t* row_ids, double* dist, std::int64_t* ids) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nq * kk) return;
  const std::int64_t q = i / kk, j = i - q * kk, at = (q * passes + pass) * kk + j;
  if (cols[i] == ~std::uint32_t(0)) {
    ids[at] = -1;
    dist[at] = canonical_score(NAN);
    return;
  }
  const std::int64_t row = first_row + cols[i];
  ids[at] = row_ids ? row_ids[row] : row;
  dist[at] = canonical_score(key_distance<METRIC>(keys[i]));
}

template <typename F>
void with_knn_metric(Metric m, F&& f) {
  switch (m) {
    case Metric::L2:
      return f(std::integral_constant<int, int(Metric::L2)>{});
    case Metric::InnerProduct:
      return f(std::integral_constant<int, int(Metric::InnerProduct)>{});
    case Metric::Cosine:
      return f(std::integral_constant<int, int(Metric::Cosine)>{});
    case Metric::L1:
      return f(std::integral_constant<int, int(Metric::L1)>{});
  }
  throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_scan: unknown metric");
}

// Queues one pass (rows [first, first + rows) of the base) on `s`: the
// matrix, the selection, the pass's lists.
template <int METRIC>
void queue_pass(const KnnRequest& req, const float* d_queries, std::int64_t first, std::int64_t rows, int kk,
                std::int64_t pass, std::int64_t passes, const std::int64_t* row_ids, ScanKey<METRIC>* matrix,
                ScanKey<METRIC>* sel_keys, std::uint32_t* sel_cols, double* dist, std::int64_t* ids,
                ScanKeys* keys, StageTrace& trace, cudaStream_t s) {
  constexpr int kRows = kDistanceThreads / kDistanceLanes;
  if constexpr (METRIC == int(Metric::L2)) {
    if (keys) keys->keys(d_queries, req.nq, first, rows, matrix, s);
  }
  if (!keys) {
    const PassRows<METRIC> pr{req.base + first * req.dim, rows, req.dim, matrix};
    with_queries_per_thread(int(req.nq), req.dim, [&](auto qt) {
      constexpr int QT = decltype(qt)::value;
      const std::size_t smem = constants_smem<QT>(req.dim);
      const std::int64_t groups = (rows + kRows * rows_per_thread(QT) - 1) / (kRows * rows_per_thread(QT));
      if constexpr (METRIC != int(Metric::Cosine)) {
        if (req.dim <= kShortRow)
          return launch_scan<METRIC, QT, true>(pr, d_queries, int(req.nq), groups, smem, s);
      }
      launch_scan<METRIC, QT, false>(pr, d_queries, int(req.nq), groups, smem, s);
    });
  }
  GKNN_CUDA(cudaGetLastError());
  trace.mark("distances");
  select_rows_async(matrix, req.nq, rows, rows, kk, SelectOrder::Smallest, sel_keys, sel_cols, s);
  const std::int64_t slots = req.nq * kk;
  finish_pass<METRIC><<<unsigned((slots + 255) / 256), 256, 0, s>>>(sel_keys, sel_cols, req.nq, kk, pass,
                                                                    passes, first, row_ids, dist, ids);
  GKNN_CUDA(cudaGetLastError());
  trace.mark("select");
}

// Query q's k best of its passes' lists (each sorted by (distance, row), the
// passes in row order, so a list position orders ties by row as well).
void merge_passes(const double* dist, const std::int64_t* ids, std::int64_t nq, std::int64_t passes, int kk,
                  int k, std::int64_t* out_ids, double* out_dist) {
  std::vector<std::int64_t> order(std::size_t(passes) * kk);
  for (std::int64_t q = 0; q < nq; ++q) {
    const double* d = dist + q * passes * kk;
    const std::int64_t* id = ids + q * passes * kk;
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = std::int64_t(i);
    if (passes > 1)
      std::partial_sort(order.begin(), order.begin() + kk, order.end(), [&](std::int64_t a, std::int64_t b) {
        if ((id[a] < 0) != (id[b] < 0)) return id[b] < 0;  // empty slots last
        return score_less(d[a], a, d[b], b);
      });
    for (int i = 0; i < kk && id[order[i]] >= 0; ++i) {
      out_ids[q * k + i] = id[order[i]];
      out_dist[q * k + i] = d[order[i]];
    }
  }
}

}  // namespace

bool exact_knn_gpu_scan_fits(int dim, int k) { return k <= kMaxRowK && dim <= kScanMaxDim; }

void exact_knn_gpu_scan(const KnnRequest& req, int device, std::int64_t* ids, double* distances) {
  with_uploaded_base(req, device,
                     [&](const KnnRequest& r) { exact_knn_resident_scan(r, device, ids, distances); });
}

// Stream-ordered on the calling thread's stream, one host wait per group of
// queries (see exact_knn_resident_fused). Queries go kSharedConstants at a
// time (the kernel reads the base once per that many anyway), which bounds
// the matrix and the passes' lists whatever nq is.
void exact_knn_resident_scan(const KnnRequest& req, int device, std::int64_t* ids, double* distances,
                             const std::int64_t* row_ids, ScanKeys* keys) {
  validate(req);
  if (!exact_knn_gpu_scan_fits(req.dim, req.k))
    throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_scan: k above " + std::to_string(kMaxRowK) +
                                                " or dimension above " + std::to_string(kScanMaxDim));
  if (keys && req.metric != Metric::L2)
    throw Error(ErrorCode::InvalidArgument, "exact_knn_gpu_scan: a caller's keys are L2 sums");
  pad_results(ids, distances, req.nq * req.k);
  const int kk = static_cast<int>(std::min<std::int64_t>(req.k, req.n));
  if (kk == 0 || req.nq == 0) return;
  GKNN_CUDA(cudaSetDevice(device));
  const cudaStream_t s = thread_stream(device);
  StageTrace trace(s, "GKNN_SCAN_TRACE", "scan");  // where a call's GPU time goes
  with_knn_metric(req.metric, [&](auto m) {
    constexpr int M = decltype(m)::value;
    using Key = ScanKey<M>;
    const std::int64_t group = std::min<std::int64_t>(req.nq, kSharedConstants);
    const std::int64_t fit = std::int64_t(kScanScratchBytes / (sizeof(Key) * group));
    const std::int64_t pass_rows = std::min<std::int64_t>(req.n, std::max(kMinPassRows, fit));
    const std::int64_t passes = (req.n + pass_rows - 1) / pass_rows;
    const std::int64_t slots = group * kk, listed = slots * passes;
    // One allocation for the call's buffers (the pool's allocations and
    // frees, six a call, serialised the service's executor threads):
    // the queries, the matrix, the selection's keys and columns, the
    // passes' lists (distances, then ids where one copy brings both back).
    const std::size_t d_bytes = sizeof(double) * listed;
    BlockLayout layout;
    const std::size_t q_at = layout.add<float>(req.nq * req.dim), m_at = layout.add<Key>(group * pass_rows),
                      k_at = layout.add<Key>(slots), c_at = layout.add<std::uint32_t>(slots),
                      d_at = layout.add_span(d_bytes, sizeof(std::int64_t) * listed);
    AsyncBuffer<unsigned char> block(layout.bytes, s);
    const auto* d_queries = in_block<const float>(block, q_at);
    auto* matrix = in_block<Key>(block, m_at);
    auto* sel_keys = in_block<Key>(block, k_at);
    auto* sel_cols = in_block<std::uint32_t>(block, c_at);
    auto* d_dist = in_block<double>(block, d_at);
    auto* d_ids = in_block<std::int64_t>(block, d_at + span_offset(d_bytes));
    upload_async(block.get() + q_at, req.queries, sizeof(float) * req.nq * req.dim, 0, s);
    trace.mark("upload");
    std::vector<double> dist(listed);
    std::vector<std::int64_t> list_ids(listed);
    for (std::int64_t q0 = 0; q0 < req.nq; q0 += group) {
      KnnRequest part = req;
      part.nq = std::min(group, req.nq - q0);
      const float* part_queries = d_queries + q0 * req.dim;
      if (keys) keys->prepare(part_queries, part.nq, s);
      for (std::int64_t p = 0; p < passes; ++p) {
        const std::int64_t first = p * pass_rows, rows = std::min(pass_rows, req.n - first);
        queue_pass<M>(part, part_queries, first, rows, kk, p, passes, row_ids, matrix, sel_keys, sel_cols,
                      d_dist, d_ids, keys, trace, s);
      }
      // Both arrays whole, one copy: a shorter last part reads only its
      // first lists (the rest still hold the part before's, never garbage:
      // a first part is always full).
      download_span_and_wait(dist.data(), d_bytes, list_ids.data(), sizeof(std::int64_t) * listed, d_dist, 1,
                             s);
      trace.mark("download");
      merge_passes(dist.data(), list_ids.data(), part.nq, passes, kk, req.k, ids + q0 * req.k,
                   distances + q0 * req.k);
    }
  });
}

}  // namespace gknn
