// DeviceImage::updated: a new GPU-resident image from an old one plus an
// ImageDelta (gknn/ivfpq_delta.h), equal to a DeviceImage made from
// apply_delta's Image, with only the delta's new entries sent to the GPU.
// The host works out the plan (delta_plan.h: copy runs in list order); the
// GPU gathers the new arrays from the old ones:
//   - codes and ids, in list order, by the plan's runs;
//   - the vectors (of any element type, gathered as rows of bytes), kept in
//     id order (device_image.h): the old rows that stay
//     keep their order, and each new entry goes before the first old row of
//     a larger or equal id (a binary search in the old ranked ids); the
//     host merges the two into runs of rows;
//   - ranks (entry -> row): an old entry's row moves down by the old rows
//     removed before it and up by the new rows placed before it (two binary
//     searches); a new entry's row comes from the merge.
// Ties between equal ids (one heap TID listed twice, never expected) may
// take another order than a fresh image's; rows of equal id and equal
// distance give the same results in either order.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"
#include "ivfpq/common.h"
#include "ivfpq/delta_plan.h"
#include "ivfpq/device_image.h"
#include "ivfpq/stored_rows.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;

// The run holding entry e (runs sorted by dst, covering every entry).
__device__ __forceinline__ const CopyRun& run_of(const CopyRun* runs, std::int64_t nruns, std::int64_t e) {
  std::int64_t lo = 0, hi = nruns - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (runs[mid].dst <= e)
      lo = mid;
    else
      hi = mid - 1;
  }
  return runs[lo];
}

// dst[e * per + j] from the old or the fresh array, entry by entry as the
// runs say (`per` elements per entry).
template <typename T>
__global__ void gather_runs(T* dst, const T* old_src, const T* fresh_src, const CopyRun* runs,
                            std::int64_t nruns, std::int64_t entries, std::int64_t per) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < entries * per;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e = i / per, j = i % per;
    const CopyRun& r = run_of(runs, nruns, e);
    dst[i] = (r.fresh ? fresh_src : old_src)[(r.src + e - r.dst) * per + j];
  }
}

// How many of the sorted `a[0..n)` are below x (or at most x, with `or_equal`).
__device__ __forceinline__ std::int64_t count_below(const std::int64_t* a, std::int64_t n, std::int64_t x,
                                                    bool or_equal) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi) / 2;
    if (a[mid] < x || (or_equal && a[mid] == x))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The new entry -> row map (list order): an old entry's row shifted by the
// removed rows before it and the new rows placed at or before it; a new
// entry's row as the host merged it (fresh_rows, by its place among the
// runs' fresh entries).
__global__ void new_ranks(std::int64_t* out, const std::int64_t* old_rank, const std::int64_t* fresh_rows,
                          const CopyRun* runs, std::int64_t nruns, std::int64_t entries,
                          const std::int64_t* removed_rows, std::int64_t nremoved,
                          const std::int64_t* insert_at, std::int64_t ninserted) {
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < entries;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const CopyRun& r = run_of(runs, nruns, e);
    const std::int64_t src = r.src + e - r.dst;
    if (r.fresh) {
      out[e] = fresh_rows[src];
      continue;
    }
    const std::int64_t row = old_rank[src];
    out[e] =
        row - count_below(removed_rows, nremoved, row, false) + count_below(insert_at, ninserted, row, true);
  }
}

// For each new id, the old rows of smaller id (a lower bound in ranked_ids).
__global__ void lower_bounds(const std::int64_t* ranked_ids, std::int64_t n, const std::int64_t* ids,
                             std::int64_t count, std::int64_t* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = count_below(ranked_ids, n, ids[i], false);
}

__global__ void gather(const std::int64_t* src, const std::int64_t* at, std::int64_t n, std::int64_t* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = src[at[i]];
}

template <typename T>
void to_device(T* dst, const T* src, std::size_t n, cudaStream_t s) {
  if (n) GKNN_CUDA(cudaMemcpyAsync(dst, src, sizeof(T) * n, cudaMemcpyHostToDevice, s));
}
template <typename T>
void to_host(T* dst, const T* src, std::size_t n, cudaStream_t s) {
  if (n) GKNN_CUDA(cudaMemcpyAsync(dst, src, sizeof(T) * n, cudaMemcpyDeviceToHost, s));
}

template <typename T>
void launch_gather(T* dst, const T* old_src, const T* fresh_src, const AsyncBuffer<CopyRun>& runs,
                   std::size_t nruns, std::int64_t entries, std::int64_t per, cudaStream_t s) {
  if (entries == 0 || per == 0) return;
  gather_runs<T><<<grid_for(entries * per, kThreads), kThreads, 0, s>>>(dst, old_src, fresh_src, runs.get(),
                                                                        std::int64_t(nruns), entries, per);
  GKNN_CUDA(cudaGetLastError());
}

// Bytes of one stored row (stored_rows.h's layouts).
std::size_t row_bytes(const Params& p, VectorElement element) {
  return element == VectorElement::Bit       ? std::size_t(bit_row_bytes(p.dim))
         : element == VectorElement::Float16 ? sizeof(std::uint16_t) * p.dim
                                             : sizeof(float) * p.dim;
}

// A new entry of the result, by the row it takes: its place among the old
// rows (insert_at), its id, and which delta entry it is (and which of the
// runs' fresh entries).
struct FreshRow {
  std::int64_t insert_at, id, delta_entry, fresh_index;
};

// The id-ordered rows of the new image as runs over the old rows (fresh = 0)
// and the delta's entries (fresh = 1); *fresh_rows: each fresh entry's row.
std::vector<CopyRun> merge_rows(std::int64_t old_rows, const std::vector<std::int64_t>& removed_rows,
                                const std::vector<FreshRow>& fresh, std::vector<std::int64_t>* fresh_rows) {
  std::vector<CopyRun> runs;
  fresh_rows->assign(fresh.size(), 0);
  std::int64_t row = 0, dst = 0;
  std::size_t f = 0, d = 0;
  for (;;) {
    for (; f < fresh.size() && fresh[f].insert_at <= row; ++f) {
      (*fresh_rows)[fresh[f].fresh_index] = dst;
      runs.push_back(CopyRun{dst++, fresh[f].delta_entry, 1, 1});
    }
    if (row == old_rows) break;
    if (d < removed_rows.size() && removed_rows[d] == row) {
      ++row, ++d;
      continue;
    }
    std::int64_t end = old_rows;
    if (f < fresh.size()) end = std::min(end, fresh[f].insert_at);
    if (d < removed_rows.size()) end = std::min(end, removed_rows[d]);
    runs.push_back(CopyRun{dst, row, end - row, 0});
    dst += end - row;
    row = end;
  }
  return runs;
}

}  // namespace

// The id-ordered half of the new image (vectors, ranked_ids, rank), from
// `base`'s and the delta's new entries; `list_runs` is the plan's.
void DeviceImage::Impl::update_rows(const Impl& base, const DeltaPlan& plan, const ImageDelta& delta,
                                    const AsyncBuffer<CopyRun>& list_runs, cudaStream_t s) {
  const std::int64_t old_rows = base.with_vectors ? base.entries : 0;
  // Old rows removed (sorted).
  std::vector<std::int64_t> removed_rows(plan.removed.size());
  {
    AsyncBuffer<std::int64_t> at(plan.removed.size(), s), rows(plan.removed.size(), s);
    to_device(at.get(), plan.removed.data(), plan.removed.size(), s);
    if (!plan.removed.empty()) {
      gather<<<grid_for(std::int64_t(plan.removed.size()), kThreads), kThreads, 0, s>>>(
          base.rank.get(), at.get(), std::int64_t(plan.removed.size()), rows.get());
      GKNN_CUDA(cudaGetLastError());
    }
    to_host(removed_rows.data(), rows.get(), removed_rows.size(), s);
    GKNN_CUDA(cudaStreamSynchronize(s));
  }
  std::sort(removed_rows.begin(), removed_rows.end());

  // The result's new entries, in the order of the runs, and where each goes.
  std::vector<FreshRow> fresh;
  for (const CopyRun& r : plan.runs)
    for (std::int64_t i = 0; r.fresh && i < r.len; ++i)
      fresh.push_back(FreshRow{0, delta.ids[r.src + i], r.src + i, std::int64_t(fresh.size())});
  {
    std::vector<std::int64_t> ids(fresh.size()), at(fresh.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) ids[i] = fresh[i].id;
    AsyncBuffer<std::int64_t> d_ids(ids.size(), s), d_at(ids.size(), s);
    to_device(d_ids.get(), ids.data(), ids.size(), s);
    if (!ids.empty()) {
      lower_bounds<<<grid_for(std::int64_t(ids.size()), kThreads), kThreads, 0, s>>>(
          base.ranked_ids.get(), old_rows, d_ids.get(), std::int64_t(ids.size()), d_at.get());
      GKNN_CUDA(cudaGetLastError());
    }
    to_host(at.data(), d_at.get(), at.size(), s);
    GKNN_CUDA(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < fresh.size(); ++i) fresh[i].insert_at = at[i];
  }
  std::sort(fresh.begin(), fresh.end(), [](const FreshRow& a, const FreshRow& b) {
    return a.insert_at != b.insert_at ? a.insert_at < b.insert_at
           : a.id != b.id             ? a.id < b.id
                                      : a.fresh_index < b.fresh_index;
  });
  std::vector<std::int64_t> fresh_rows;
  const std::vector<CopyRun> row_runs = merge_rows(old_rows, removed_rows, fresh, &fresh_rows);
  std::vector<std::int64_t> insert_at(fresh.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) insert_at[i] = fresh[i].insert_at;

  // The fresh runs of the list order renumbered by fresh entry (their rows
  // are looked up by it), for the rank kernel.
  std::vector<CopyRun> rank_runs = plan.runs;
  std::int64_t next = 0;
  for (CopyRun& r : rank_runs)
    if (r.fresh) r.src = next, next += r.len;

  AsyncBuffer<CopyRun> d_row_runs(row_runs.size(), s), d_rank_runs(rank_runs.size(), s);
  AsyncBuffer<std::int64_t> d_fresh_rows(fresh_rows.size(), s), d_removed(removed_rows.size(), s),
      d_insert(insert_at.size(), s), d_fresh_ids(delta.ids.size(), s);
  // The new rows as bytes: floats, binary16 values or bit strings.
  const std::size_t row = row_bytes(params, element);
  const unsigned char* fresh_rows_host =
      element == VectorElement::Float16 ? reinterpret_cast<const unsigned char*>(delta.half_vectors.data())
      : element == VectorElement::Bit   ? delta.bit_vectors.data()
                                        : reinterpret_cast<const unsigned char*>(delta.vectors.data());
  AsyncBuffer<unsigned char> d_fresh_vectors(delta.ids.size() * row, s);
  to_device(d_row_runs.get(), row_runs.data(), row_runs.size(), s);
  to_device(d_rank_runs.get(), rank_runs.data(), rank_runs.size(), s);
  to_device(d_fresh_rows.get(), fresh_rows.data(), fresh_rows.size(), s);
  to_device(d_removed.get(), removed_rows.data(), removed_rows.size(), s);
  to_device(d_insert.get(), insert_at.data(), insert_at.size(), s);
  to_device(d_fresh_ids.get(), delta.ids.data(), delta.ids.size(), s);
  to_device(d_fresh_vectors.get(), fresh_rows_host, delta.ids.size() * row, s);
  // Stored rows as bytes (floats in `vectors`, the other types `packed`).
  auto rows_of = [](const Impl& im) {
    return im.element == VectorElement::Float32 ? reinterpret_cast<unsigned char*>(im.vectors.get())
                                                : im.packed.get();
  };
  launch_gather(rows_of(*this), static_cast<const unsigned char*>(rows_of(base)),
                static_cast<const unsigned char*>(d_fresh_vectors.get()), d_row_runs, row_runs.size(),
                entries, std::int64_t(row), s);
  launch_gather(ranked_ids.get(), base.ranked_ids.get(), d_fresh_ids.get(), d_row_runs, row_runs.size(),
                entries, 1, s);
  if (entries > 0) {
    new_ranks<<<grid_for(entries, kThreads), kThreads, 0, s>>>(
        rank.get(), base.rank.get(), d_fresh_rows.get(), d_rank_runs.get(), std::int64_t(rank_runs.size()),
        entries, d_removed.get(), std::int64_t(removed_rows.size()), d_insert.get(),
        std::int64_t(insert_at.size()));
    GKNN_CUDA(cudaGetLastError());
  }
  GKNN_CUDA(cudaStreamSynchronize(s));
}

DeviceImage::Impl::Impl(const Impl& base, const DeltaPlan& plan, const ImageDelta& delta)
    : device(base.device),
      params(base.params),
      entries(plan.entries()),
      offsets(plan.offsets),
      largest(largest_lists(plan.offsets)),
      fp16(base.fp16),
      centroids(base.centroids.size()),
      codebooks(base.codebooks.size()),
      codes(std::size_t(plan.entries()) * code_size(base.params)),
      ids(std::size_t(plan.entries())),
      d_offsets(plan.offsets.size()),
      with_vectors(plan.vectors),
      element(plan.element),
      vectors(plan.vectors && plan.element == VectorElement::Float32
                  ? std::size_t(plan.entries()) * base.params.dim
                  : 0),
      packed(plan.vectors && plan.element != VectorElement::Float32
                 ? std::size_t(plan.entries()) * row_bytes(base.params, plan.element)
                 : 0),
      rank(plan.vectors ? std::size_t(plan.entries()) : 0),
      ranked_ids(plan.vectors ? std::size_t(plan.entries()) : 0) {
  OwnedStream stream;
  const cudaStream_t s = stream.s;
  GKNN_CUDA(cudaMemcpyAsync(centroids.get(), base.centroids.get(), sizeof(float) * centroids.size(),
                            cudaMemcpyDeviceToDevice, s));
  GKNN_CUDA(cudaMemcpyAsync(codebooks.get(), base.codebooks.get(), sizeof(float) * codebooks.size(),
                            cudaMemcpyDeviceToDevice, s));
  to_device(d_offsets.get(), offsets.data(), offsets.size(), s);
  AsyncBuffer<CopyRun> runs(plan.runs.size(), s);
  AsyncBuffer<std::uint8_t> fresh_codes(delta.codes.size(), s);
  AsyncBuffer<std::int64_t> fresh_ids(delta.ids.size(), s);
  to_device(runs.get(), plan.runs.data(), plan.runs.size(), s);
  to_device(fresh_codes.get(), delta.codes.data(), delta.codes.size(), s);
  to_device(fresh_ids.get(), delta.ids.data(), delta.ids.size(), s);
  launch_gather(codes.get(), base.codes.get(), fresh_codes.get(), runs, plan.runs.size(), entries,
                code_size(params), s);
  launch_gather(ids.get(), base.ids.get(), fresh_ids.get(), runs, plan.runs.size(), entries, 1, s);
  if (with_vectors) update_rows(base, plan, delta, runs, s);
  GKNN_CUDA(cudaStreamSynchronize(s));
}

DeviceImage DeviceImage::updated(const ImageDelta& delta) const {
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: update of a moved-from DeviceImage");
  const DeltaPlan plan =
      plan_delta(impl_->params, impl_->offsets, impl_->with_vectors, impl_->element, delta);
  GKNN_CUDA(cudaSetDevice(impl_->device));
  return DeviceImage(new Impl(*impl_, plan, delta));
}

void DeviceImage::copy_ids(std::int64_t first, std::int64_t count, std::int64_t* out) const {
  if (!impl_ || first < 0 || count < 0 || count > impl_->entries - first)
    throw Error(ErrorCode::InvalidArgument, "ivfpq: ids past the image's entries");
  if (count == 0) return;
  GKNN_CUDA(cudaSetDevice(impl_->device));
  GKNN_CUDA(cudaMemcpy(out, impl_->ids.get() + first, sizeof(std::int64_t) * count, cudaMemcpyDeviceToHost));
}

}  // namespace gknn::ivfpq
