// The list bounds (gknn::ivfpq::ListBounds) of a CPU image for its pruned
// exact search, made on the first exact search of each generation and kept
// while the image stays at it: the GPU service's CPU images and a backend's
// own image each keep one. PostgreSQL-free; thread-safe (the service's
// executors search one image at once).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "gknn/ivfpq.h"

namespace gknn_service {

class ExactBoundsCache {
 public:
  // The bounds of `image` as it is at `generation` (every change to an
  // image makes a new generation); null where the image's exact search
  // cannot be pruned (not L2, or not float vectors). May throw what
  // list_bounds throws (std::bad_alloc).
  std::shared_ptr<const gknn::ivfpq::ListBounds> get(const gknn::ivfpq::Image& image,
                                                     std::uint64_t generation);

 private:
  std::mutex mu_;
  std::uint64_t generation_ = 0;
  std::shared_ptr<const gknn::ivfpq::ListBounds> bounds_;
};

// Whether an image's exact search can use list bounds: gknn::ivfpq's
// prunable, with its vectors stored.
bool exact_prunable(const gknn::ivfpq::Image& image);

}  // namespace gknn_service
