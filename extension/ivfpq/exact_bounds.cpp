// ExactBoundsCache (exact_bounds.h). No PostgreSQL here.
#include "ivfpq/exact_bounds.h"

namespace gknn_service {

bool exact_prunable(const gknn::ivfpq::Image& image) {
  return !image.vectors.empty() && gknn::ivfpq::prunable(image);
}

std::shared_ptr<const gknn::ivfpq::ListBounds> ExactBoundsCache::get(const gknn::ivfpq::Image& image,
                                                                     std::uint64_t generation) {
  if (!exact_prunable(image)) return nullptr;
  // Made under the lock: the threads that find them missing all search this
  // image at this generation, and would each make the same bounds (a pass
  // over every vector, ~2.5 full scans) where they now wait for one.
  std::lock_guard<std::mutex> lock(mu_);
  // The offsets check as well: a generation that stayed while the entries
  // changed would be a bug elsewhere, and the search would refuse them.
  if (!bounds_ || generation_ != generation || bounds_->offsets != image.offsets) {
    bounds_ = std::make_shared<const gknn::ivfpq::ListBounds>(gknn::ivfpq::list_bounds(image));
    generation_ = generation;
  }
  return bounds_;
}

void ExactBoundsCache::advance(ExactBoundsCache& from, std::uint64_t before,
                               const gknn::ivfpq::ImageDelta& delta, const gknn::ivfpq::Image& after,
                               std::uint64_t generation) noexcept {
  try {
    std::shared_ptr<const gknn::ivfpq::ListBounds> old;
    {
      std::lock_guard<std::mutex> lock(from.mu_);
      if (from.generation_ == before) old = from.bounds_;
    }
    std::shared_ptr<const gknn::ivfpq::ListBounds> next;
    if (old && exact_prunable(after))
      next =
          std::make_shared<const gknn::ivfpq::ListBounds>(gknn::ivfpq::list_bounds_after(*old, delta, after));
    std::lock_guard<std::mutex> lock(mu_);
    bounds_ = std::move(next);
    generation_ = generation;
  } catch (...) {
    // Out of memory, or bounds that were not the image's: made again on use.
    std::lock_guard<std::mutex> lock(mu_);
    bounds_.reset();
  }
}

}  // namespace gknn_service
