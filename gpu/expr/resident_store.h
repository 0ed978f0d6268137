// The ResidentBatches both TopKs keep (gknn/expr.h): one compact allocation
// per kept batch, in host memory (CPU) or device memory (GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "expr/batch_layout.h"

namespace gknn::expr {

class ResidentStore final : public ResidentBatches {
 public:
  ResidentStore(const std::vector<ColumnSpec>& columns, int device, std::size_t max_bytes)
      : columns_(columns), device_(device), max_bytes_(max_bytes) {}
  ~ResidentStore() override;
  ResidentStore(const ResidentStore&) = delete;
  ResidentStore& operator=(const ResidentStore&) = delete;

  // Copies rows [0, n) of a batch laid out for `capacity` at `base` (host
  // memory on the CPU; device memory on the GPU, copied on `stream`).
  // false, keeping nothing: the store would pass max_bytes, or the device
  // memory ran out (the cache is given up, the query goes on).
  bool add(const unsigned char* base, std::int64_t capacity, std::int64_t n, void* stream);

  const std::vector<BatchView>& views() const { return views_; }
  const std::vector<ColumnSpec>& columns() const { return columns_; }
  std::int64_t rows() const override { return rows_; }
  std::size_t bytes() const override { return bytes_; }
  int device() const override { return device_; }

 private:
  std::vector<ColumnSpec> columns_;
  int device_;
  std::size_t max_bytes_;
  std::vector<unsigned char*> buffers_;
  std::vector<BatchView> views_;
  std::int64_t rows_ = 0;
  std::size_t bytes_ = 0;
};

// r as a store kept on `device` for `columns`; throws InvalidArgument for
// another TopK's store.
const ResidentStore& checked_store(const ResidentBatches& r, int device,
                                   const std::vector<ColumnSpec>& columns);

}  // namespace gknn::expr
