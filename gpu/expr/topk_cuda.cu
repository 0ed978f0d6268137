// GpuTopK on the GPU. Two slots, each a pinned host batch, a device batch,
// a stream and a result buffer, so the backend fills one batch while the
// other is copied and ranked. Per batch: the columns are copied to the
// device (a kept batch of the table cache is there already); row_words runs
// the shared interpreter (interp.cuh) once per row, one row per thread: the
// row's packed word, or the sentinel when the qual is not true; bitonic
// top-k selects the batch's k smallest words; they come back and merge on
// the host into the running top-k. A row that raises records its position
// (atomicMin: the first in scan order); the host reruns that row on the CPU
// interpreter for the error and its details. (The words used to be made
// inside the sort's first pass, SIGMOD'18 §5's fused Loader, with no word
// array; there the interpreter ran at a third of the occupancy and cost 3x
// the time per row: bench/results/topk-H200-2026-11-27-cache.md.)
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "expr/batch_layout.h"
#include "expr/resident_store.h"
#include "expr/row_key.cuh"
#include "expr/selected_order.h"
#include "gknn/error.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
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
namespace {

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

// Row i's qual and ranking expression: its word, or the sentinel (which
// never ranks ahead of a real row) when the qual is not true; records the
// first row that raised. RowLoader calls it once per position, so it also
// counts the rows that passed (one atomic per warp).
template <typename Word>
__device__ __noinline__ Word row_word(const ProgramView& p, const RowPlan& plan, const BatchView& b,
                                      std::int64_t i, unsigned long long* first_error) {
  Word w = select::max_word<Word>();
  bool passed = false;
  std::uint64_t limbs[kMaxKeyLimbs + 1];
  std::int32_t detail[2];
  const ErrorKind e = eval_row(p, plan, b, i, passed, limbs, detail);
  if (e != ErrorKind::None)
    atomicMin(first_error, static_cast<unsigned long long>(i));
  else if (passed)
    to_word(limbs, w);
  return w;
}

template <typename Word>
struct RowLoader {
  ProgramView p;
  RowPlan plan;
  BatchView b;
  unsigned long long* counters;  // [first error position, rows passed]
  __device__ Word operator()(std::int64_t i) const {
    const Word w = i < b.n ? row_word<Word>(p, plan, b, i, counters) : select::max_word<Word>();
    const bool passed = !(w == select::max_word<Word>());
    const unsigned active = __activemask();
    const unsigned mask = __ballot_sync(active, passed);
    if (mask != 0 && (threadIdx.x & 31) == unsigned(__ffs(active) - 1)) atomicAdd(counters + 1, __popc(mask));
    return w;
  }
};

// Every row's word (or the sentinel), one row per thread: the interpreter
// runs at full occupancy here (the sort's first pass holds a 64 KB tile per
// block, three blocks per SM, and its per-row interpreter was stalled on
// memory two thirds of the time: ncu on the H200, 2026-11-27). The loader
// (1.4 KB: the batch's 32 column views) stays in the parameter space
// (__grid_constant__): passed by value to the non-inlined row_word, every
// thread copied it to local memory first, 6x the kernel's time
// (bench/results/expr-topk-H200-2026-11-27.md).
template <typename Word>
__global__ void row_words(const __grid_constant__ RowLoader<Word> load, std::int64_t n, Word* out) {
  const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = load(i);
}

template <typename T>
T* device_alloc(std::size_t count) {
  void* p = nullptr;
  if (count) GKNN_CUDA(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

template <typename Word>
class GpuTopK final : public TopK {
  struct Slot {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    unsigned char* host = nullptr;    // pinned batch
    unsigned char* device = nullptr;  // device batch
    BatchView hview, dview;
    Word* scratch = nullptr;
    Word* words = nullptr;  // the batch's row words
    Word* top = nullptr;                          // k words (device)
    Word* top_host = nullptr;                     // pinned
    unsigned long long* counters = nullptr;       // [first error position, passed rows] (device)
    unsigned long long* counters_host = nullptr;  // pinned
    std::int64_t take = 0;
    bool pending = false;
    std::int64_t n = 0;                   // rows of the batch in flight
    const BatchView* resident = nullptr;  // its device view when kept, not copied
  };

 public:
  GpuTopK(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
          std::int64_t k)
      : program_(program), columns_(columns), capacity_(capacity), k_(k) {}

  // Allocates everything; on a throw the destructor frees what was taken.
  void init(int device) {
    device_ = device;
    validate(program_, columns_);
    GKNN_CUDA(cudaSetDevice(device));
    plan_ = row_plan(program_);
    upload_program();
    const std::int64_t kk = std::max<std::int64_t>(k_, 1);
    for (Slot& s : slots_) {
      GKNN_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
      GKNN_CUDA(cudaEventCreate(&s.start));
      GKNN_CUDA(cudaEventCreate(&s.stop));
      s.scratch = device_alloc<Word>(select::bitonic_scratch_words(capacity_, kk));
      s.words = device_alloc<Word>(capacity_);
      s.top = device_alloc<Word>(kk);
      GKNN_CUDA(
          cudaHostAlloc(reinterpret_cast<void**>(&s.top_host), kk * sizeof(Word), cudaHostAllocDefault));
      s.counters = device_alloc<unsigned long long>(2);
      GKNN_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&s.counters_host), 2 * sizeof(unsigned long long),
                              cudaHostAllocDefault));
    }
  }

  ~GpuTopK() override {
    cudaSetDevice(device_);
    for (Slot& s : slots_) {
      if (s.stream) cudaStreamSynchronize(s.stream);
      cudaFree(s.device);
      cudaFree(s.scratch);
      cudaFree(s.words);
      cudaFree(s.top);
      cudaFree(s.counters);
      cudaFreeHost(s.host);
      cudaFreeHost(s.top_host);
      cudaFreeHost(s.counters_host);
      if (s.start) cudaEventDestroy(s.start);
      if (s.stop) cudaEventDestroy(s.stop);
      if (s.stream) cudaStreamDestroy(s.stream);
    }
    cudaFree(d_code_);
    cudaFree(d_consts_);
    cudaFree(d_const_nulls_);
    cudaFree(d_vectors_);
  }

  // Each call selects the object's device first: the caller's thread may
  // have another current device (the GPU service's executors serve every
  // device).
  BatchView& next_batch() override {
    GKNN_CUDA(cudaSetDevice(device_));
    Slot& s = slots_[next_];
    complete(s);
    if (!s.host) {  // on first use: ranking only kept batches needs none
      const std::size_t bytes = batch_bytes(columns_, capacity_);
      GKNN_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&s.host), bytes, cudaHostAllocDefault));
      s.device = device_alloc<unsigned char>(bytes);
      layout_batch(s.hview, columns_, capacity_, s.host);
      layout_batch(s.dview, columns_, capacity_, s.device);
    }
    s.hview.n = 0;
    return s.hview;
  }

  bool push(EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    Slot& s = slots_[next_];
    next_ = 1 - next_;
    if (failed_.kind != ErrorKind::None) return fail(error);
    launch(s, nullptr);
    if (keep_ && !keep_->add(s.device, capacity_, s.hview.n, s.stream)) keep_.reset();
    return true;
  }

  void keep_start(std::size_t max_bytes) override {
    keep_.reset(new ResidentStore(columns_, device_, max_bytes));
  }
  ResidentBatches* keep_stop() override {
    GKNN_CUDA(cudaSetDevice(device_));
    // Its copies were queued on the slots' streams.
    for (Slot& s : slots_) GKNN_CUDA(cudaStreamSynchronize(s.stream));
    return keep_.release();
  }

  bool push_resident(const ResidentBatches& r, EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    const ResidentStore& store = checked_store(r, device_, columns_);
    for (const BatchView& b : store.views()) {
      if (b.n > capacity_) throw Error(ErrorCode::InvalidArgument, "top-k: resident batch over capacity");
      Slot& s = slots_[next_];
      complete(s);
      next_ = 1 - next_;
      if (failed_.kind != ErrorKind::None) return fail(error);
      launch(s, &b);
    }
    return true;
  }

  bool finish(EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    // In push order: the older slot first.
    complete(slots_[next_]);
    complete(slots_[1 - next_]);
    return failed_.kind == ErrorKind::None || fail(error);
  }

  std::vector<Selected> result() override { return running_; }
  const TopKStats& stats() const override { return stats_; }
  bool on_gpu() const override { return true; }

 private:
  bool fail(EvalError& error) {
    error = failed_;
    return false;
  }

  template <typename T>
  T* upload(const std::vector<T>& v) {
    T* d = device_alloc<T>(v.size());
    if (!v.empty()) GKNN_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }

  void upload_program() {
    d_code_ = upload(program_.code);
    d_consts_ = upload(program_.consts);
    d_const_nulls_ = upload(program_.const_nulls);
    d_vectors_ = upload(program_.vectors);
    view_ = ProgramView{d_code_, d_consts_, d_const_nulls_, d_vectors_};
  }

  // Ranks the slot's batch (copied from its pinned host batch) or, given
  // `resident`, a kept batch already on the device.
  void launch(Slot& s, const BatchView* resident) {
    const std::int64_t n = resident ? resident->n : s.hview.n;
    s.n = n;
    s.resident = resident;
    s.dview.n = n;
    GKNN_CUDA(cudaEventRecord(s.start, s.stream));
    if (!resident) {
      std::int64_t bytes = 0;
      for_each_filled(columns_, capacity_, n, [&](std::size_t at, std::size_t len) {
        if (len)
          GKNN_CUDA(cudaMemcpyAsync(s.device + at, s.host + at, len, cudaMemcpyHostToDevice, s.stream));
        bytes += static_cast<std::int64_t>(len);
      });
      stats_.bytes_to_device += bytes;
    }
    const unsigned long long init[2] = {~0ull, 0};
    s.counters_host[0] = init[0];
    s.counters_host[1] = init[1];
    GKNN_CUDA(cudaMemcpyAsync(s.counters, s.counters_host, sizeof(init), cudaMemcpyHostToDevice, s.stream));
    s.take = std::min(k_, n);
    if (n > 0) {
      // Every row is evaluated even for k = 0 (as on the CPU): the counts and
      // the errors a row raises must not depend on k.
      constexpr int kThreads = 256;
      row_words<Word><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, s.stream>>>(
          RowLoader<Word>{view_, plan_, resident ? *resident : s.dview, s.counters}, n, s.words);
      GKNN_CUDA(cudaGetLastError());
      select::bitonic_topk<Word, true>(select::WordLoader<Word>{s.words, n}, n, std::max<std::int64_t>(k_, 1),
                                       s.top, s.scratch, s.stream);
      if (s.take > 0)
        GKNN_CUDA(
            cudaMemcpyAsync(s.top_host, s.top, s.take * sizeof(Word), cudaMemcpyDeviceToHost, s.stream));
    }
    GKNN_CUDA(cudaMemcpyAsync(s.counters_host, s.counters, sizeof(init), cudaMemcpyDeviceToHost, s.stream));
    GKNN_CUDA(cudaEventRecord(s.stop, s.stream));
    s.pending = true;
  }

  // Waits for a slot's batch and folds it into the running top-k.
  void complete(Slot& s) {
    if (!s.pending) return;
    s.pending = false;
    GKNN_CUDA(cudaStreamSynchronize(s.stream));
    float ms = 0;
    GKNN_CUDA(cudaEventElapsedTime(&ms, s.start, s.stop));
    stats_.device_ms += ms;
    stats_.rows_scanned += s.n;
    ++stats_.batches;
    if (failed_.kind != ErrorKind::None) return;
    if (s.counters_host[0] != ~0ull) return explain_error(s, static_cast<std::int64_t>(s.counters_host[0]));
    stats_.rows_passed += static_cast<std::int64_t>(s.counters_host[1]);
    merge(s);
  }

  void explain_error(Slot& s, std::int64_t row) {
    bool passed = false;
    Selected w;
    std::int32_t detail[2] = {0, 0};
    // A kept batch has no host copy: its one row comes back.
    std::vector<unsigned char> one;
    BatchView host = s.hview;
    if (s.resident) {
      one.resize(batch_bytes(columns_, 1));
      layout_batch(host, columns_, 1, one.data());
      host.n = 1;
      copy_row_to_host(*s.resident, row, host);
      row = 0;
    }
    ErrorKind e = eval_row_cpu(program_, host, row, passed, w, detail);
    if (e == ErrorKind::None)
      throw Error(ErrorCode::DeviceFault, "GpuTopK: a row raised on the GPU but not on the CPU");
    failed_.kind = e;
    failed_.row_id = host.row_ids[row];
    failed_.detail[0] = detail[0];
    failed_.detail[1] = detail[1];
  }

  void copy_row_to_host(const BatchView& d, std::int64_t row, BatchView& h) {
    auto get = [&](void* to, const void* from, std::size_t bytes) {
      GKNN_CUDA(cudaMemcpy(to, static_cast<const unsigned char*>(from) + row * bytes, bytes,
                           cudaMemcpyDeviceToHost));
    };
    get(h.row_ids, d.row_ids, sizeof(std::uint64_t));
    for (int c = 0; c < d.columns; ++c) {
      get(h.column[c].data, d.column[c].data, value_bytes(columns_[c]));
      get(h.column[c].nulls, d.column[c].nulls, 1);
      if (columns_[c].type == Type::Vector) get(h.column[c].dims, d.column[c].dims, sizeof(std::int32_t));
    }
  }

  void merge(Slot& s) {
    const std::size_t before = running_.size();
    for (std::int64_t j = 0; j < s.take; ++j) {
      if (s.top_host[j] == select::max_word<Word>()) break;  // fewer rows passed than k
      Selected w;
      from_word(s.top_host[j], w);
      running_.push_back(w);
    }
    std::inplace_merge(running_.begin(), running_.begin() + before, running_.end(), selected_less);
    if (static_cast<std::int64_t>(running_.size()) > k_) running_.resize(k_);
  }

  Program program_;
  std::vector<ColumnSpec> columns_;
  std::int64_t capacity_, k_;
  RowPlan plan_;
  ProgramView view_{};
  Instr* d_code_ = nullptr;
  Value* d_consts_ = nullptr;
  std::uint8_t* d_const_nulls_ = nullptr;
  float* d_vectors_ = nullptr;
  Slot slots_[2];
  int next_ = 0;
  int device_ = 0;
  std::unique_ptr<ResidentStore> keep_;
  std::vector<Selected> running_;
  TopKStats stats_;
  EvalError failed_;
};

}  // namespace

bool gpu_supports(const Program& program, std::int64_t k) {
  return program.key_limbs() <= 2 && k <= kMaxBitonicK;
}

TopK* make_topk_gpu(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                    std::int64_t k, int device) {
  if (!gpu_supports(program, k))
    throw Error(ErrorCode::InvalidArgument, "GpuTopK: k or ORDER BY keys too wide for the GPU kernels");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count)
    throw Error(ErrorCode::NoDevice, "GpuTopK: no such GPU");
  auto build = [&](auto* tag) -> TopK* {
    using T = std::remove_pointer_t<decltype(tag)>;
    std::unique_ptr<T> t(new T(program, columns, capacity, k));
    t->init(device);
    return t.release();
  };
  if (program.key_limbs() == 1) return build(static_cast<GpuTopK<select::U128>*>(nullptr));
  return build(static_cast<GpuTopK<select::Limbs3>*>(nullptr));
}

}  // namespace expr
}  // namespace gknn
