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

// Sorts each of `rows` rows of `count` ranks ascending (kNoRank last).
void sort_rows(const std::uint64_t* in, std::uint64_t* out, std::int64_t rows, int count, cudaStream_t s) {
  AsyncBuffer<std::int64_t> seg(rows + 1, s);
  segment_starts<<<grid_for(rows + 1, kThreads), kThreads, 0, s>>>(seg.get(), rows, count);
  GKNN_CUDA(cudaGetLastError());
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceSegmentedSort::SortKeys(nullptr, bytes, in, out, rows * count, rows, seg.get(),
                                               seg.get() + 1, s));
  AsyncBuffer<unsigned char> temp(bytes, s);
  GKNN_CUDA(cub::DeviceSegmentedSort::SortKeys(temp.get(), bytes, in, out, rows * count, rows, seg.get(),
                                               seg.get() + 1, s));
}

}  // namespace

void DeviceImage::Impl::refine_batch(const float* queries, std::int64_t rows, int probes, int count, int k,
                                     cudaStream_t s, std::int64_t* out_ids, double* out_dist) const {
  const int dim = params.dim;
  const PqStage st(*this, queries, rows, probes, count, s);
  const std::int64_t n = rows * count;
  AsyncBuffer<std::uint64_t> cand(n, s), ranks(n, s);
  column_ranks<<<grid_for(n, kThreads), kThreads, 0, s>>>(st.cols.get(), rows, count, st.starts.get(), probes,
                                                          st.probe_lists.get(), d_offsets.get(), rank.get(),
                                                          cand.get());
  GKNN_CUDA(cudaGetLastError());
  sort_rows(cand.get(), ranks.get(), rows, count, s);

  // The exact distance takes the raw query: the PQ stage's are normalised
  // under cosine (and plain copies otherwise).
  AsyncBuffer<float> raw(params.metric == Metric::Cosine ? rows * dim : 0, s);
  const float* q = st.queries.get();
  if (params.metric == Metric::Cosine) {
    upload_async(raw.get(), queries, sizeof(float) * rows * dim, 2, s);  // slot 0: the PQ stage's
    q = raw.get();
  }
  AsyncBuffer<double> dist(n, s);
  if (element == VectorElement::Float32) {
    exact_distances<<<grid_for(n * kGroupLanes, kThreads), kThreads, 0, s>>>(
        ranks.get(), rows, count, vectors.get(), q, dim, params.metric, dist.get());
    GKNN_CUDA(cudaGetLastError());
  } else {  // binary16 or bit rows (exact_rows.h)
    packed_rank_distances(element, packed.get(), ranks.get(), rows, count, q, dim, params.metric, dist.get(),
                          s);
  }

  AsyncBuffer<double> okeys(rows * k, s), odist(rows * k, s);
  AsyncBuffer<std::uint32_t> ocols(rows * k, s);
  AsyncBuffer<std::int64_t> oids(rows * k, s);
  select_best(dist.get(), rows, count, k, okeys.get(), ocols.get(), s);
  map_refined<<<grid_for(rows * k, kThreads), kThreads, 0, s>>>(
      okeys.get(), ocols.get(), rows, k, count, ranks.get(), ranked_ids.get(), oids.get(), odist.get());
  GKNN_CUDA(cudaGetLastError());
  download_and_wait(out_ids, oids.get(), sizeof(std::int64_t) * rows * k, out_dist, odist.get(),
                    sizeof(double) * rows * k, 1, s);
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
