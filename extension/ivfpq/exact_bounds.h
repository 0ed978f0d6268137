// The list bounds (gknn::ivfpq::ListBounds) of a CPU image for its pruned
// exact search, made on the first exact search of a generation (or carried
// from the last one across the delta that made it) and kept while the image
// stays at it: the GPU service's CPU images and a backend's
// own image each keep one. PostgreSQL-free; thread-safe (the service's
// executors search one image at once).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"

namespace gknn_service {

class ExactBoundsCache {
 public:
  // The bounds of `image` as it is at `generation` (every change to an
  // image makes a new generation); null where the image's exact search
  // cannot be pruned (not L2, or not float vectors). May throw what
  // list_bounds throws (std::bad_alloc).
  std::shared_ptr<const gknn::ivfpq::ListBounds> get(const gknn::ivfpq::Image& image,
                                                     std::uint64_t generation);
  // After `delta` took an image from generation `before` to `after` (at
  // `generation`): where `from` (this cache, or the one of the image it was
  // made from) holds the bounds of `before`, this cache gets those of
  // `after` from them (gknn::ivfpq::list_bounds_after: the new entries'
  // distances only), so the next exact search need not make them whole.
  // Never throws: where that fails, the next search makes them.
  void advance(ExactBoundsCache& from, std::uint64_t before, const gknn::ivfpq::ImageDelta& delta,
               const gknn::ivfpq::Image& after, std::uint64_t generation) noexcept;

 private:
  std::mutex mu_;
  std::uint64_t generation_ = 0;
  std::shared_ptr<const gknn::ivfpq::ListBounds> bounds_;
};

// Whether an image's exact search can use list bounds: gknn::ivfpq's
// prunable, with its vectors stored.
bool exact_prunable(const gknn::ivfpq::Image& image);

}  // namespace gknn_service
