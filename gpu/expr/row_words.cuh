// The row words of GpuTopK's launches (topk_cuda.cu, kept_shared_cuda.cu):
// each row's qual and ORDER BY keys run by the shared interpreter, one row
// per thread, packed into a word the bitonic top-k ranks (the sentinel for
// a row the qual drops). Words of one or two key limbs plus the row id.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "expr/batch_layout.h"
#include "expr/row_key.cuh"
#include "expr/selected_order.h"
#include "gknn/error.h"
#include "runtime/cuda_check.h"
#include "select/bitonic_topk.cuh"

namespace gknn {
namespace select {

// Three 64-bit limbs compared lexicographically (two key limbs + row id use U128).
struct Limbs3 {
  std::uint64_t w[3];
  GKNN_HDI bool operator<(const Limbs3& o) const {
    return w[0] != o.w[0] ? w[0] < o.w[0] : (w[1] != o.w[1] ? w[1] < o.w[1] : w[2] < o.w[2]);
  }
  GKNN_HDI bool operator==(const Limbs3& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2];
  }
  GKNN_HDI bool operator<=(const Limbs3& o) const { return !(o < *this); }
};
template <>
GKNN_HDI Limbs3 max_word<Limbs3>() {
  return Limbs3{{~0ull, ~0ull, ~0ull}};
}

}  // namespace select

namespace expr {

using select::Limbs3;
using select::U128;

__device__ __forceinline__ void to_word(const std::uint64_t* l, U128& w) { w = U128{l[0], l[1]}; }
__device__ __forceinline__ void to_word(const std::uint64_t* l, Limbs3& w) { w = Limbs3{{l[0], l[1], l[2]}}; }
inline void from_word(const U128& w, Selected& s) {
  s.nlimbs = 2;
  s.limbs[0] = w.hi;
  s.limbs[1] = w.lo;
}
inline void from_word(const Limbs3& w, Selected& s) {
  s.nlimbs = 3;
  for (int j = 0; j < 3; ++j) s.limbs[j] = w.w[j];
}

// One row's qual and ranking expression: its word, or the sentinel (which
// never ranks ahead of a real row) when the qual is not true; a row that
// raises records `position` (the first in scan order wins).
template <typename Word>
__device__ __noinline__ Word row_word(const ProgramView& p, const RowPlan& plan, const BatchView& b,
                                      std::int64_t row, std::int64_t position,
                                      unsigned long long* first_error) {
  Word w = select::max_word<Word>();
  bool passed = false;
  std::uint64_t limbs[kMaxKeyLimbs + 1];
  std::int32_t detail[2];
  const ErrorKind e = eval_row(p, plan, b, row, passed, limbs, detail);
  if (e != ErrorKind::None)
    atomicMin(first_error, static_cast<unsigned long long>(position));
  else if (passed)
    to_word(limbs, w);
  return w;
}

// A launch's batches (device views) and what every row needs.
struct RowsLaunch {
  ProgramView p;
  RowPlan plan;
  const BatchView* views;
  std::int64_t stride;  // positions per batch: the largest batch's rows
  int blocks_per_batch;
  unsigned long long* counters;  // [first error position, rows passed]
};

// Every row's word (or the sentinel), one row per thread, for all the
// launch's batches at once: block b takes rows of views[b / blocks_per_batch]
// and row r of batch j is position j * stride + r (sentinels pad a shorter
// batch), so a whole group of kept batches is one launch and one top-k. The
// interpreter runs at full occupancy here (the sort's first pass holds a 64 KB
// tile per block, three blocks per SM, and its per-row interpreter was stalled
// on memory two thirds of the time: ncu on the H200, 2026-11-27). The
// launch's description stays in the parameter space (__grid_constant__):
// passed by value to the non-inlined row_word, every thread copied its batch
// view (1.4 KB) to local memory first, 6x the kernel's time
// (bench/results/expr-topk-H200-2026-11-27.md).
template <typename Word>
__device__ __forceinline__ void row_words_of(const RowsLaunch& l, Word* out) {
  const std::int64_t batch = blockIdx.x / l.blocks_per_batch;
  const std::int64_t row = (blockIdx.x % l.blocks_per_batch) * std::int64_t(blockDim.x) + threadIdx.x;
  if (row >= l.stride) return;
  const BatchView& b = l.views[batch];
  const std::int64_t position = batch * l.stride + row;
  const Word w =
      row < b.n ? row_word<Word>(l.p, l.plan, b, row, position, l.counters) : select::max_word<Word>();
  // The rows that passed, one atomic per warp.
  const unsigned active = __activemask();
  const unsigned mask = __ballot_sync(active, !(w == select::max_word<Word>()));
  if (mask != 0 && (threadIdx.x & 31) == unsigned(__ffs(active) - 1)) atomicAdd(l.counters + 1, __popc(mask));
  out[position] = w;
}

template <typename Word>
__global__ void row_words(const __grid_constant__ RowsLaunch l, Word* out) {
  row_words_of(l, out);
}

// Several programs over the same batches (rank_kept_shared): program y =
// blockIdx.y, its launch at launches[y] (device memory, read in place), its
// words at out + y * positions.
template <typename Word>
__global__ void row_words_each(const RowsLaunch* launches, Word* out, std::int64_t positions) {
  row_words_of(launches[blockIdx.y], out + blockIdx.y * positions);
}

// Row `row` of a device batch into the one-row host batch h (columns'
// layout): for the CPU's rerun of a row that raised on the GPU.
inline void copy_row_to_host(const BatchView& d, std::int64_t row, const std::vector<ColumnSpec>& columns,
                             BatchView& h) {
  auto get = [&](void* to, const void* from, std::size_t bytes) {
    GKNN_CUDA(
        cudaMemcpy(to, static_cast<const unsigned char*>(from) + row * bytes, bytes, cudaMemcpyDeviceToHost));
  };
  get(h.row_ids, d.row_ids, sizeof(std::uint64_t));
  for (int c = 0; c < d.columns; ++c) {
    get(h.column[c].data, d.column[c].data, value_bytes(columns[c]));
    get(h.column[c].nulls, d.column[c].nulls, 1);
    if (columns[c].type == Type::Vector) get(h.column[c].dims, d.column[c].dims, sizeof(std::int32_t));
  }
}

// A launch's words back on the host (ascending, at most `take`; a sentinel
// ends them early) merged into the k best rows so far.
template <typename Word>
void merge_words(const Word* top, std::int64_t take, std::int64_t k, std::vector<Selected>& running) {
  const std::size_t before = running.size();
  for (std::int64_t j = 0; j < take; ++j) {
    if (top[j] == select::max_word<Word>()) break;  // fewer rows passed than k
    Selected w;
    from_word(top[j], w);
    running.push_back(w);
  }
  std::inplace_merge(running.begin(), running.begin() + before, running.end(), selected_less);
  if (static_cast<std::int64_t>(running.size()) > k) running.resize(k);
}

// A row raised on the GPU: the CPU interpreter reruns it (row `row` of a
// host batch) and names the error.
inline void cpu_error_of_row(const Program& program, const BatchView& host, std::int64_t row,
                             EvalError& err) {
  bool passed = false;
  Selected w;
  std::int32_t detail[2] = {0, 0};
  const ErrorKind e = eval_row_cpu(program, host, row, passed, w, detail);
  if (e == ErrorKind::None)
    throw Error(ErrorCode::DeviceFault, "GpuTopK: a row raised on the GPU but not on the CPU");
  err.kind = e;
  err.row_id = host.row_ids[row];
  err.detail[0] = detail[0];
  err.detail[1] = detail[1];
}

// The same for row `row` of a device batch (a kept one: no host copy),
// copied back first.
inline void cpu_error_of_device_row(const Program& program, const std::vector<ColumnSpec>& columns,
                                    const BatchView& device_batch, std::int64_t row, EvalError& err) {
  std::vector<unsigned char> one(batch_bytes(columns, 1));
  BatchView host;
  layout_batch(host, columns, 1, one.data());
  host.n = 1;
  copy_row_to_host(device_batch, row, columns, host);
  cpu_error_of_row(program, host, 0, err);
}

}  // namespace expr
}  // namespace gknn
