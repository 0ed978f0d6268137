// GpuTopK on the CPU: the shared interpreter per row and a bounded max-heap
// of packed row words. It is the reference the GPU path is tested against
// and the fallback where no GPU is usable.
#include <algorithm>
#include <memory>
#include <vector>

#include "expr/batch_layout.h"
#include "expr/resident_store.h"
#include "expr/row_key.cuh"
#include "expr/selected_order.h"
#include "gknn/error.h"

namespace gknn::expr {

namespace {

class CpuTopK final : public TopK {
 public:
  CpuTopK(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
          std::int64_t k)
      : program_(program), columns_(columns), k_(k) {
    if (k < 0 || capacity <= 0) throw Error(ErrorCode::InvalidArgument, "top-k: bad k or batch capacity");
    validate(program_, columns_);
    plan_ = row_plan(program_);
    view_ = program_view(program_);
    storage_.resize(batch_bytes(columns_, capacity));
    layout_batch(batch_, columns_, capacity, storage_.data());
  }

  BatchView& next_batch() override {
    batch_.n = 0;
    return batch_;
  }

  bool push(EvalError& error) override {
    if (failed_.kind != ErrorKind::None) return fail(error);
    if (keep_ && !keep_->add(storage_.data(), batch_.capacity, batch_.n, nullptr)) keep_.reset();
    return rank(batch_, error);
  }

  void keep_start(std::size_t max_bytes) override { keep_.reset(new ResidentStore(columns_, -1, max_bytes)); }
  ResidentBatches* keep_stop() override { return keep_.release(); }

  bool push_resident(const ResidentBatches& r, EvalError& error) override {
    const ResidentStore& store = checked_store(r, -1, columns_);
    for (const BatchView& b : store.views())
      if (failed_.kind != ErrorKind::None || !rank(b, error)) return fail(error);
    return true;
  }

  bool finish(EvalError& error) override { return failed_.kind == ErrorKind::None || fail(error); }

  std::vector<Selected> result() override {
    std::vector<Selected> out = heap_;
    std::sort(out.begin(), out.end(), selected_less);
    return out;
  }

  const TopKStats& stats() const override { return stats_; }
  bool on_gpu() const override { return false; }

 private:
  bool fail(EvalError& error) {
    error = failed_;
    return false;
  }

  bool rank(const BatchView& b, EvalError& error) {
    Selected w;
    w.nlimbs = plan_.key_limbs + 1;
    for (std::int64_t r = 0; r < b.n; ++r) {
      bool passed = false;
      std::int32_t detail[2] = {0, 0};
      ErrorKind e = eval_row(view_, plan_, b, r, passed, w.limbs, detail);
      if (e != ErrorKind::None) {
        failed_.kind = e;
        failed_.row_id = b.row_ids[r];
        failed_.detail[0] = detail[0];
        failed_.detail[1] = detail[1];
        return fail(error);
      }
      if (passed) {
        ++stats_.rows_passed;
        offer(w);
      }
    }
    stats_.rows_scanned += b.n;
    ++stats_.batches;
    return true;
  }

  // heap_ is a max-heap: its front is the worst row kept.
  void offer(const Selected& w) {
    if (k_ == 0) return;
    if (static_cast<std::int64_t>(heap_.size()) < k_) {
      heap_.push_back(w);
      std::push_heap(heap_.begin(), heap_.end(), selected_less);
    } else if (selected_less(w, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), selected_less);
      heap_.back() = w;
      std::push_heap(heap_.begin(), heap_.end(), selected_less);
    }
  }

  Program program_;
  std::vector<ColumnSpec> columns_;
  std::int64_t k_;
  RowPlan plan_;
  ProgramView view_{};
  std::vector<unsigned char> storage_;
  BatchView batch_;
  std::vector<Selected> heap_;
  TopKStats stats_;
  EvalError failed_;
  std::unique_ptr<ResidentStore> keep_;
};

}  // namespace

TopK* make_topk_cpu(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                    std::int64_t k) {
  return new CpuTopK(program, columns, capacity, k);
}

}  // namespace gknn::expr
