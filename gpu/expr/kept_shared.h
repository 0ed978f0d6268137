// rank_kept_shared (gknn/expr.h) on the GPU (kept_shared_cuda.cu); the CPU
// side and the checks are in kept_shared.cpp.
#pragma once

#include <vector>

#include "gknn/expr.h"

namespace gknn::expr {

// The stores' batches (device views, checked), in push order.
void rank_kept_shared_gpu(const std::vector<BatchView>& batches, const std::vector<ColumnSpec>& columns,
                          std::vector<KeptQuery*>& queries, int device);

}  // namespace gknn::expr
