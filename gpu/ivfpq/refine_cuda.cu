// DeviceImage::search_refined: the PQ stage's refine x k best candidates of
// each query, re-ranked by the exact distance of their resident vectors,
// with search_refined_cpu's results bit for bit. Per batch of queries:
//   1. the PQ stage (Impl::PqStage, as search runs it) selects `count`
//      columns per query;
//   2. each column becomes its entry's rank (the row of the resident
//      vectors, in id order), and each query's ranks are sorted, padding
//      last: column order is now id order;
//   3. eight threads per candidate compute gknn::distance (the SQL
//      operator's lane sums, group_distance.cuh, built without FMA
//      contraction, so the CPU's bits) on the raw query;
//   4. the project's row selection takes the k best by (distance, column),
//      that is by (distance, id), and the ranks map back to ids.
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <cstdint>

#include "distance/group_distance.cuh"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
#include "ivfpq/exact_rows.h"
#include "ivfpq/scoring.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;
constexpr std::uint64_t kNoRank = ~std::uint64_t(0);  // padding: sorts last

__device__ __forceinline__ double quiet_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

// Selected PQ columns -> the ranks of their entries; a column past the row's
// candidates (or the selection's padding, ~0) -> kNoRank.
__global__ void column_ranks(const std::uint32_t* cols, std::int64_t rows, int count,
                             const std::int64_t* starts, int probes, const std::uint32_t* probe_lists,
                             const std::int64_t* offsets, const std::int64_t* rank, std::uint64_t* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t q = i / count, col = cols[i];
    const std::int64_t* st = starts + q * (probes + 1);
    if (col >= st[probes]) {
      out[i] = kNoRank;
      continue;
    }
    const int p = probe_of(st, probes, col);
    out[i] = std::uint64_t(rank[offsets[probe_lists[q * probes + p]] + col - st[p]]);
  }
}

__global__ void segment_starts(std::int64_t* starts, std::int64_t segments, std::int64_t len) {
  const std::int64_t s = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s <= segments) starts[s] = s * len;
}

// The exact distance of each candidate (NaN for padding), canonical: a
// group of eight threads per candidate (group_distance.cuh, the bits of
// gknn::distance). The grid covers whole groups, so every lane of a group
// takes the same branch and joins its shuffles.
__global__ void exact_distances(const std::uint64_t* ranks, std::int64_t rows, int count,
                                const float* vectors, const float* queries, int dim, Metric metric,
                                double* out) {
  const int lane = threadIdx.x % kGroupLanes;
  const std::int64_t groups = std::int64_t(gridDim.x) * blockDim.x / kGroupLanes;
  for (std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kGroupLanes; i < rows * count;
       i += groups) {
    const std::uint64_t r = ranks[i];
    if (r == kNoRank) {
      if (lane == 0) out[i] = quiet_nan();
      continue;
    }
    const double d =
        group_distance(metric, vectors + std::int64_t(r) * dim, queries + (i / count) * dim, dim, lane);
    if (lane == 0) out[i] = canonical_score(d);
  }
}

// Selected columns -> ids; padding (a column past the row, or a padding
// candidate) -> id -1, distance NaN.
__global__ void map_refined(const double* keys, const std::uint32_t* cols, std::int64_t rows, int k,
                            int count, const std::uint64_t* ranks, const std::int64_t* ranked_ids,
                            std::int64_t* out_ids, double* out_dist) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * k;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t q = i / k, col = cols[i];
    const std::uint64_t r = col < count ? ranks[q * count + col] : kNoRank;
    out_ids[i] = r == kNoRank ? -1 : ranked_ids[r];
    out_dist[i] = r == kNoRank ? quiet_nan() : keys[i];
  }
}

// The segmented sort's temporary bytes for `rows` rows of `count` ranks
// (a size query: no data is read; the same argument types as sort_rows'
// call, so that one instantiation of CUB's kernels serves both).
std::size_t sort_rows_bytes(std::int64_t rows, int count) {
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceSegmentedSort::SortKeys(
      nullptr, bytes, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      rows * count, rows, static_cast<std::int64_t*>(nullptr), static_cast<std::int64_t*>(nullptr)));
  return bytes;
}

// Sorts each of `rows` rows of `count` ranks ascending (kNoRank last);
// seg (rows + 1) and temp (sort_rows_bytes) are the caller's.
void sort_rows(const std::uint64_t* in, std::uint64_t* out, std::int64_t rows, int count, std::int64_t* seg,
               void* temp, std::size_t bytes, cudaStream_t s) {
  segment_starts<<<grid_for(rows + 1, kThreads), kThreads, 0, s>>>(seg, rows, count);
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cub::DeviceSegmentedSort::SortKeys(temp, bytes, in, out, rows * count, rows, seg, seg + 1, s));
}

}  // namespace

void DeviceImage::Impl::refine_batch(const float* queries, std::int64_t rows, int probes, int count, int k,
                                     cudaStream_t s, std::int64_t* out_ids, double* out_dist) const {
  const int dim = params.dim;
  const PqStage st(*this, queries, rows, probes, count, s);
  const std::int64_t n = rows * count;
  // The refine's arrays in one allocation (BlockLayout); the answers, ids
  // then distances, brought back by one copy.
  const bool cosine = params.metric == Metric::Cosine;
  const std::size_t sort_bytes = sort_rows_bytes(rows, count);
  const std::size_t id_bytes = sizeof(std::int64_t) * rows * k, dist_bytes = sizeof(double) * rows * k;
  BlockLayout layout;
  const std::size_t at_cand = layout.add<std::uint64_t>(n), at_ranks = layout.add<std::uint64_t>(n),
                    at_seg = layout.add<std::int64_t>(rows + 1),
                    at_temp = layout.add<unsigned char>(sort_bytes),
                    at_raw = layout.add<float>(cosine ? rows * dim : 0), at_dist = layout.add<double>(n),
                    at_okeys = layout.add<double>(rows * k), at_ocols = layout.add<std::uint32_t>(rows * k),
                    at_out = layout.add_span(id_bytes, dist_bytes);
  AsyncBuffer<unsigned char> block(layout.bytes, s);
  auto* cand = in_block<std::uint64_t>(block, at_cand);
  auto* ranks = in_block<std::uint64_t>(block, at_ranks);
  auto* dist = in_block<double>(block, at_dist);
  auto* okeys = in_block<double>(block, at_okeys);
  auto* ocols = in_block<std::uint32_t>(block, at_ocols);
  auto* oids = in_block<std::int64_t>(block, at_out);
  auto* odist = in_block<double>(block, at_out + span_offset(id_bytes));
  column_ranks<<<grid_for(n, kThreads), kThreads, 0, s>>>(st.cols, rows, count, st.starts, probes,
                                                          st.probe_lists, d_offsets.get(), rank.get(), cand);
  GKNN_CUDA(cudaGetLastError());
  sort_rows(cand, ranks, rows, count, in_block<std::int64_t>(block, at_seg),
            in_block<unsigned char>(block, at_temp), sort_bytes, s);

  // The exact distance takes the raw query: the PQ stage's are normalised
  // under cosine (and plain copies otherwise).
  const float* q = st.queries;
  if (cosine) {
    float* raw = in_block<float>(block, at_raw);
    upload_async(raw, queries, sizeof(float) * rows * dim, 2, s);  // slot 0: the PQ stage's
    q = raw;
  }
  if (element == VectorElement::Float32) {
    exact_distances<<<grid_for(n * kGroupLanes, kThreads), kThreads, 0, s>>>(
        ranks, rows, count, vectors.get(), q, dim, params.metric, dist);
    GKNN_CUDA(cudaGetLastError());
  } else {  // binary16 or bit rows (exact_rows.h)
    packed_rank_distances(element, packed.get(), ranks, rows, count, q, dim, params.metric, dist, s);
  }

  select_best(dist, rows, count, k, okeys, ocols, s);
  map_refined<<<grid_for(rows * k, kThreads), kThreads, 0, s>>>(okeys, ocols, rows, k, count, ranks,
                                                                ranked_ids.get(), oids, odist);
  GKNN_CUDA(cudaGetLastError());
  download_span_and_wait(out_ids, id_bytes, out_dist, dist_bytes, block.get() + at_out, 1, s);
}

void DeviceImage::search_refined(const float* queries, std::int64_t nq, const SearchParams& sp,
                                 std::int64_t* ids, double* distances) const {
  check_refined(queries, nq, sp, ids, distances);
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: search on a moved-from DeviceImage");
  if (!impl_->with_vectors)
    throw Error(ErrorCode::InvalidArgument, "ivfpq: the image holds no vectors (exact distances need them)");
  if (nq == 0 || sp.k == 0) return;
  const int count = refine_candidates(sp, impl_->entries);
  if (count == 0) return pad_results(ids, distances, nq * sp.k);
  GKNN_CUDA(cudaSetDevice(impl_->device));
  const int probes = std::min(sp.probes, impl_->params.lists);
  // Five buffers of count words per query (the stage's keys and columns,
  // ranks twice, distances): a row counts four times.
  const std::int64_t batch = impl_->batch_rows(probes, 4 * std::int64_t(count));
  const cudaStream_t stream = thread_stream(impl_->device);
  for (std::int64_t q0 = 0; q0 < nq; q0 += batch) {
    const std::int64_t rows = std::min(batch, nq - q0);
    impl_->refine_batch(queries + q0 * impl_->params.dim, rows, probes, count, sp.k, stream, ids + q0 * sp.k,
                        distances + q0 * sp.k);
  }
}

}  // namespace gknn::ivfpq
