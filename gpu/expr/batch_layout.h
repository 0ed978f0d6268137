// Where each column of a batch lives inside one allocation, so the CPU and
// the GPU (pinned host block, device block) carve batches the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gknn/expr.h"

namespace gknn::expr {

std::size_t value_bytes(const ColumnSpec& c);

// Bytes of one batch of `capacity` rows.
std::size_t batch_bytes(const std::vector<ColumnSpec>& columns, std::int64_t capacity);

// Points `view` into base[0, batch_bytes) (16-byte aligned pieces); n = 0.
void layout_batch(BatchView& view, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                  unsigned char* base);

// Bytes of rows [0, n) of each piece, for copying a partly filled batch:
// calls fn(offset, bytes) per piece.
template <typename Fn>
void for_each_filled(const std::vector<ColumnSpec>& columns, std::int64_t capacity, std::int64_t n, Fn&& fn);

}  // namespace gknn::expr

#include "expr/batch_layout_inl.h"
