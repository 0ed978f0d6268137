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
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "expr/batch_layout.h"
#include "expr/resident_store.h"
#include "expr/row_words.cuh"
#include "expr/vector_distances.cuh"
#include "gknn/error.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/bitonic_topk.cuh"

namespace gknn {
namespace expr {
namespace {

// Device memory from the stream-ordered pool (kept by keep_pool_memory): a
// query's TopK takes and frees its buffers without a real allocation or the
// wait of cudaFree for the whole device (every other session's work in the
// GPU service).
template <typename T>
struct PoolArray {
  T* p = nullptr;
  std::size_t count = 0;
  void hold(std::size_t n, cudaStream_t s) {  // room for n; the contents are not kept
    if (n <= count) return;
    release(s);
    GKNN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T), s));
    count = n;
  }
  void release(cudaStream_t s) {
    if (p) cudaFreeAsync(p, s);
    p = nullptr;
    count = 0;
  }
};

// Pinned host memory for at least `bytes` (contents not kept).
inline void hold_pinned(PinnedBlock& b, std::size_t bytes) {
  if (b.size() < bytes) b = PinnedBlock(bytes);
}

template <typename Word>
class GpuTopK final : public TopK {
  struct Slot {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    PinnedBlock host;                 // the batch the caller fills
    PoolArray<unsigned char> device;  // its device copy
    BatchView hview, dview;
    PoolArray<Word> scratch, words;  // the launch's row words and the sort's space
    PoolArray<BatchView> views;      // the launch's batches
    PinnedBlock views_host;
    PoolArray<double> dists;         // the launch's vector distances (DistanceJob order)
    std::vector<BatchView> batches;  // the launch's batches, device views
    bool kept = false;               // kept batches (no host copy)
    std::int64_t stride = 0;         // positions per batch
    PoolArray<Word> top;             // k words
    PinnedBlock top_host;
    PoolArray<unsigned long long> counters;  // [first error position, passed rows]
    PinnedBlock counters_host;
    std::int64_t take = 0;
    bool pending = false;
    std::int64_t n = 0;  // rows of the launch in flight
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
    keep_pool_memory(device);
    plan_ = row_plan(program_);
    jobs_ = distance_jobs(program_);
    const std::int64_t kk = std::max<std::int64_t>(k_, 1);
    for (Slot& s : slots_) {
      GKNN_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
      GKNN_CUDA(cudaEventCreate(&s.start));
      GKNN_CUDA(cudaEventCreate(&s.stop));
      hold_positions(s, capacity_);
      s.top.hold(kk, s.stream);
      hold_pinned(s.top_host, kk * sizeof(Word));
      s.counters.hold(2, s.stream);
      hold_pinned(s.counters_host, 2 * sizeof(unsigned long long));
    }
    upload_program();
  }

  ~GpuTopK() override {
    cudaSetDevice(device_);
    for (Slot& s : slots_) {
      if (!s.stream) continue;
      cudaStreamSynchronize(s.stream);  // before its pinned blocks go back to the pool
      for (PoolArray<Word>* a : {&s.scratch, &s.words, &s.top}) a->release(s.stream);
      s.device.release(s.stream);
      s.counters.release(s.stream);
      s.views.release(s.stream);
      s.dists.release(s.stream);
      if (s.start) cudaEventDestroy(s.start);
      if (s.stop) cudaEventDestroy(s.stop);
    }
    if (cudaStream_t st = slots_[0].stream) {
      code_.release(st);
      consts_.release(st);
      const_nulls_.release(st);
      vectors_.release(st);
    }
    for (Slot& s : slots_)
      if (s.stream) cudaStreamDestroy(s.stream);
  }

  // Each call selects the object's device first: the caller's thread may
  // have another current device (the GPU service's executors serve every
  // device).
  BatchView& next_batch() override {
    GKNN_CUDA(cudaSetDevice(device_));
    flush_kept();  // kept batches queued before rank first
    Slot& s = slots_[next_];
    complete(s);
    if (!s.device.p) {  // on first use: ranking only kept batches needs none
      const std::size_t bytes = batch_bytes(columns_, capacity_);
      hold_pinned(s.host, bytes);
      s.device.hold(bytes, s.stream);
      layout_batch(s.hview, columns_, capacity_, pinned_as<unsigned char>(s.host));
      layout_batch(s.dview, columns_, capacity_, s.device.p);
    }
    s.hview.n = 0;
    return s.hview;
  }

  bool push(EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    Slot& s = slots_[next_];
    next_ = 1 - next_;
    if (failed_.kind != ErrorKind::None) return fail(error);
    s.dview.n = s.hview.n;
    launch(s, {s.dview}, false);
    if (keep_ && !keep_->add(s.device.p, capacity_, s.hview.n, s.stream)) keep_.reset();
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

  // Kept batches are queued and ranked in groups of up to
  // kKeptGroupPositions positions: per group one row_words launch and one
  // top-k, instead of a launch, a top-k and a host merge per batch (a 10M-row
  // cache hit was 53 of each: bench/results/expr-topk-H200-2026-11-27.md).
  bool push_resident(const ResidentBatches& r, EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    const ResidentStore& store = checked_store(r, device_, columns_);
    const std::int64_t group = std::max(capacity_, kKeptGroupPositions);
    for (const BatchView& b : store.views()) {
      if (b.n > capacity_) throw Error(ErrorCode::InvalidArgument, "top-k: resident batch over capacity");
      const std::int64_t stride = std::max(kept_stride_, b.n);
      if (!kept_.empty() && static_cast<std::int64_t>(kept_.size() + 1) * stride > group) flush_kept();
      if (failed_.kind != ErrorKind::None) return fail(error);
      kept_.push_back(b);
      kept_stride_ = std::max(kept_stride_, b.n);
    }
    return true;
  }

  bool finish(EvalError& error) override {
    GKNN_CUDA(cudaSetDevice(device_));
    flush_kept();
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

  // The program's arrays, staged in one pinned block and copied on the
  // first slot's stream, which is waited for: both slots' kernels read them.
  void upload_program() {
    cudaStream_t st = slots_[0].stream;
    const std::size_t bytes = program_.code.size() * sizeof(Instr) + program_.consts.size() * sizeof(Value) +
                              program_.const_nulls.size() + program_.vectors.size() * sizeof(float) + 64;
    PinnedBlock staging(bytes);
    std::size_t at = 0;
    auto put = [&](auto& array, const auto& v) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      array.hold(v.size(), st);
      if (v.empty()) return;
      at = (at + 15) / 16 * 16;
      unsigned char* from = pinned_as<unsigned char>(staging) + at;
      std::memcpy(from, v.data(), v.size() * sizeof(T));
      at += v.size() * sizeof(T);
      GKNN_CUDA(cudaMemcpyAsync(array.p, from, v.size() * sizeof(T), cudaMemcpyHostToDevice, st));
    };
    put(code_, program_.code);
    put(consts_, program_.consts);
    put(const_nulls_, program_.const_nulls);
    put(vectors_, program_.vectors);
    GKNN_CUDA(cudaStreamSynchronize(st));
    view_ = ProgramView{code_.p, consts_.p, const_nulls_.p, vectors_.p, 0};
  }

  // Word and sort space for `positions` (the slot is idle).
  void hold_positions(Slot& s, std::int64_t positions) {
    s.scratch.hold(select::bitonic_scratch_words(positions, std::max<std::int64_t>(k_, 1)), s.stream);
    s.words.hold(positions, s.stream);
  }

  // The launch's batch views, each vector column pointed at its distances.
  void upload_views(Slot& s, const std::vector<BatchView>& batches, std::int64_t positions) {
    s.views.hold(batches.size(), s.stream);
    hold_pinned(s.views_host, batches.size() * sizeof(BatchView));
    s.dists.hold(positions * static_cast<std::int64_t>(jobs_.size()), s.stream);
    BatchView* views_host = pinned_as<BatchView>(s.views_host);
    for (std::size_t j = 0; j < batches.size(); ++j) {
      views_host[j] = batches[j];
      for (std::size_t i = 0; i < jobs_.size(); ++i) {
        ColumnView& c = views_host[j].column[jobs_[i].column];
        c.dist =
            s.dists.p + static_cast<std::int64_t>(i) * positions + static_cast<std::int64_t>(j) * s.stride;
        c.dist_key = jobs_[i].key;
      }
    }
    GKNN_CUDA(cudaMemcpyAsync(s.views.p, views_host, batches.size() * sizeof(BatchView),
                              cudaMemcpyHostToDevice, s.stream));
  }

  // Ranks the queued kept batches on the next slot.
  void flush_kept() {
    if (kept_.empty()) return;
    Slot& s = slots_[next_];
    complete(s);
    next_ = 1 - next_;
    if (failed_.kind == ErrorKind::None) launch(s, kept_, true);
    kept_.clear();
    kept_stride_ = 0;
  }

  // Ranks `batches` (device views) on the slot: kept batches already on the
  // device, or (kept false) the slot's own batch, copied from its pinned host
  // batch first.
  void launch(Slot& s, const std::vector<BatchView>& batches, bool kept) {
    std::int64_t n = 0, stride = 0;
    for (const BatchView& b : batches) {
      n += b.n;
      stride = std::max(stride, b.n);
    }
    const std::int64_t positions = stride * static_cast<std::int64_t>(batches.size());
    hold_positions(s, positions);
    s.n = n;
    s.batches = batches;
    s.kept = kept;
    s.stride = stride;
    GKNN_CUDA(cudaEventRecord(s.start, s.stream));
    if (!kept) {
      std::int64_t bytes = 0;
      for_each_filled(columns_, capacity_, n, [&](std::size_t at, std::size_t len) {
        if (len)
          GKNN_CUDA(cudaMemcpyAsync(s.device.p + at, pinned_as<unsigned char>(s.host) + at, len,
                                    cudaMemcpyHostToDevice, s.stream));
        bytes += static_cast<std::int64_t>(len);
      });
      stats_.bytes_to_device += bytes;
    }
    upload_views(s, batches, positions);
    const unsigned long long init[2] = {~0ull, 0};
    unsigned long long* counters_host = pinned_as<unsigned long long>(s.counters_host);
    counters_host[0] = init[0];
    counters_host[1] = init[1];
    GKNN_CUDA(cudaMemcpyAsync(s.counters.p, counters_host, sizeof(init), cudaMemcpyHostToDevice, s.stream));
    s.take = std::min(k_, n);
    if (n > 0) {
      // Every row is evaluated even for k = 0 (as on the CPU): the counts and
      // the errors a row raises must not depend on k.
      constexpr int kThreads = 256;
      const int per_batch = static_cast<int>((stride + kThreads - 1) / kThreads);
      for (std::size_t i = 0; i < jobs_.size(); ++i)
        launch_vector_distances(jobs_[i], vectors_.p, s.views.p, static_cast<std::int64_t>(batches.size()),
                                stride, s.dists.p + static_cast<std::int64_t>(i) * positions, s.stream);
      const RowsLaunch l{view_, plan_, s.views.p, stride, per_batch, s.counters.p};
      row_words<Word>
          <<<static_cast<unsigned>(per_batch * batches.size()), kThreads, 0, s.stream>>>(l, s.words.p);
      GKNN_CUDA(cudaGetLastError());
      select::bitonic_topk<Word, true>(select::WordLoader<Word>{s.words.p, positions}, positions,
                                       std::max<std::int64_t>(k_, 1), s.top.p, s.scratch.p, s.stream);
      if (s.take > 0)
        GKNN_CUDA(cudaMemcpyAsync(pinned_as<Word>(s.top_host), s.top.p, s.take * sizeof(Word),
                                  cudaMemcpyDeviceToHost, s.stream));
    }
    GKNN_CUDA(cudaMemcpyAsync(counters_host, s.counters.p, sizeof(init), cudaMemcpyDeviceToHost, s.stream));
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
    stats_.batches += static_cast<std::int64_t>(s.batches.size());
    if (failed_.kind != ErrorKind::None) return;
    const unsigned long long* counters = pinned_as<unsigned long long>(s.counters_host);
    if (counters[0] != ~0ull) return explain_error(s, static_cast<std::int64_t>(counters[0]));
    stats_.rows_passed += static_cast<std::int64_t>(counters[1]);
    merge(s);
  }

  void explain_error(Slot& s, std::int64_t position) {
    const std::size_t batch = static_cast<std::size_t>(position / s.stride);
    const std::int64_t row = position % s.stride;
    if (s.kept)
      cpu_error_of_device_row(program_, columns_, s.batches[batch], row, failed_);
    else
      cpu_error_of_row(program_, s.hview, row, failed_);
  }

  void merge(Slot& s) { merge_words(pinned_as<Word>(s.top_host), s.take, k_, running_); }

  Program program_;
  std::vector<ColumnSpec> columns_;
  std::int64_t capacity_, k_;
  RowPlan plan_;
  std::vector<DistanceJob> jobs_;
  ProgramView view_{};
  PoolArray<Instr> code_;
  PoolArray<Value> consts_;
  PoolArray<std::uint8_t> const_nulls_;
  PoolArray<float> vectors_;
  Slot slots_[2];
  int next_ = 0;
  int device_ = 0;
  std::unique_ptr<ResidentStore> keep_;
  std::vector<BatchView> kept_;  // kept batches queued (push_resident)
  std::int64_t kept_stride_ = 0;
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
