// search_exact_pruned_cpu and list_bounds (gknn/ivfpq.h): the exact search
// reading only the lists, and the entries of them, that may hold one of the
// k best, on L2 images with float vectors. The reference for a GPU version
// of the same pruning.
//
// Why the answer is the full scan's: for an entry x of list l with centroid
// c, d(q, x) >= |d(q, c) - d(x, c)| (the triangle inequality), and so
// d(q, x) >= d(q, c) - r_l: no entry of l is nearer than the list's bound
// b_l = d(q, c) - r_l, nor x nearer than its ring bound |d(q, c) - d(x, c)|.
// The lists are read in order of b_l; once b_l, less a relative margin that
// covers the float rounding of the operator's distance (gknn::distance sums
// float squares: relative error below (dim + 3) x 2^-24), exceeds the k-th
// best distance found so far, every entry of l and of every later list is
// strictly farther than that k-th best, which only falls as entries are
// read: none of them is among the k best, not even by a tie (ties go by id,
// and a strictly larger distance never ties). The same holds for an entry
// whose ring bound, less the margin, exceeds the k-th best. Two more
// errors are covered: the bounds are differences of doubles (centre
// distances and radii, each a rounded sum of dim squares: relative error
// below (dim + 2) x 2^-53), so near-duplicates far from their centroid could
// see a bound above their true distance (cancellation): each bound is
// lowered by (dim + 4) x 2^-52 times the sum it came from; and the
// operator's float squares underflow (differences below ~2^-75 square to
// 0), an absolute error of up to sqrt(dim) x 2^-75 on its distance: the
// k-th best is raised by twice that before any comparison (found by review,
// gpu/tests/test_ivfpq_exact_pruned.cpp's cancellation and underflow cases).
// A NaN radius or bound (NaN elements) sorts first and is always read; an
// infinite radius gives the bound -inf (read); a NaN or infinite k-th best
// prunes nothing.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"
#include "ivfpq/delta_plan.h"
#include "ivfpq/common.h"
#include "ivfpq/prune_margins.h"

namespace gknn::ivfpq {
namespace {

// The distance in double of float vectors a and b.
double precise_l2(const float* a, const float* b, int dim) {
  double s = 0;
  for (int i = 0; i < dim; ++i) {
    const double d = double(a[i]) - double(b[i]);
    s += d * d;
  }
  return std::sqrt(s);
}

void require_prunable(const Image& image) {
  require_vectors(image);
  if (!prunable(image))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: list bounds need an L2 image of float vectors");
}

// The k-th smallest of the distances pushed so far (NaN counted as +inf),
// or +inf while fewer than k.
class KthBest {
 public:
  explicit KthBest(int k) : k_(std::size_t(k)) {}
  void push(double d) {
    if (std::isnan(d)) d = HUGE_VAL;
    if (heap_.size() < k_) {
      heap_.push(d);
    } else if (d < heap_.top()) {
      heap_.pop();
      heap_.push(d);
    }
  }
  double value() const { return heap_.size() < k_ ? HUGE_VAL : heap_.top(); }

 private:
  std::size_t k_;
  std::priority_queue<double> heap_;
};

// Each list's radius from its entries' centre distances (list_bounds' rule).
void set_radii(ListBounds& r, int lists) {
  r.radius.assign(std::size_t(lists), 0.0);
  for (int l = 0; l < lists; ++l) {
    double most = 0;
    for (std::int64_t e = r.offsets[l]; e < r.offsets[l + 1]; ++e) {
      const double d = r.centre_distance[e];
      most = std::isnan(most) || std::isnan(d) ? NAN : std::max(most, d);
    }
    r.radius[l] = most;
  }
}

}  // namespace

bool prunable(const Image& image) {
  return image.quantizer.params.metric == Metric::L2 && vector_element(image) == VectorElement::Float32;
}

ListBounds list_bounds(const Image& image) {
  check_image(image);
  require_prunable(image);
  const Params& p = image.quantizer.params;
  ListBounds r;
  r.offsets = image.offsets;
  r.centre_distance.resize(image.ids.size());
  for (int l = 0; l < p.lists; ++l) {
    const float* c = image.quantizer.centroids.data() + std::size_t(l) * p.dim;
    for (std::int64_t e = image.offsets[l]; e < image.offsets[l + 1]; ++e)
      r.centre_distance[e] = precise_l2(image.vectors.data() + e * p.dim, c, p.dim);
  }
  set_radii(r, p.lists);
  return r;
}

ListBounds list_bounds_after(const ListBounds& before, const ImageDelta& delta, const Image& after) {
  check_image(after);
  require_prunable(after);
  const Params& p = after.quantizer.params;
  if (before.radius.size() != std::size_t(p.lists) || before.offsets.size() != std::size_t(p.lists) + 1 ||
      before.centre_distance.size() != std::size_t(before.offsets.back()))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: list bounds made for another image");
  const DeltaPlan plan = plan_delta(p, before.offsets, true, VectorElement::Float32, delta);
  if (plan.offsets != after.offsets)
    throw Error(ErrorCode::InvalidArgument, "ivfpq: list bounds made for another image");
  ListBounds r;
  r.offsets = after.offsets;
  r.centre_distance.resize(after.ids.size());
  int l = 0;  // the list of entry dst (runs go by dst)
  for (const CopyRun& run : plan.runs) {
    for (std::int64_t i = 0; i < run.len; ++i) {
      const std::int64_t e = run.dst + i;
      if (!run.fresh) {  // the same entry, vector and list: the same distance
        r.centre_distance[e] = before.centre_distance[run.src + i];
        continue;
      }
      while (after.offsets[l + 1] <= e) ++l;
      r.centre_distance[e] = precise_l2(after.vectors.data() + e * p.dim,
                                        after.quantizer.centroids.data() + std::size_t(l) * p.dim, p.dim);
    }
  }
  set_radii(r, p.lists);
  return r;
}

std::int64_t search_exact_pruned_cpu(const Image& image, const ListBounds& bounds, const float* queries,
                                     std::int64_t nq, int k, std::int64_t* ids, double* distances) {
  check_image(image);
  check_exact(queries, nq, k, ids, distances);
  require_prunable(image);
  const Params& p = image.quantizer.params;
  if (bounds.offsets != image.offsets || bounds.radius.size() != std::size_t(p.lists) ||
      bounds.centre_distance.size() != image.ids.size())
    throw Error(ErrorCode::InvalidArgument, "ivfpq: list bounds made for another image");
  if (k == 0 || nq == 0) return 0;
  std::int64_t read = 0;
  const double keep = 1.0 - relative_margin(p.dim), dd = double_error(p.dim), slack = underflow_floor(p.dim);
  std::vector<double> centre(p.lists), bound(p.lists), keys;
  std::vector<std::uint64_t> payloads;
  std::vector<int> order(p.lists);
  for (std::int64_t q = 0; q < nq; ++q) {
    const float* query = queries + q * p.dim;
    for (int l = 0; l < p.lists; ++l) {
      centre[l] = precise_l2(query, image.quantizer.centroids.data() + std::size_t(l) * p.dim, p.dim);
      bound[l] = list_bound(centre[l], bounds.radius[l], dd);
    }
    order_lists(bound.data(), order);
    KthBest kth(k);
    keys.clear();
    payloads.clear();
    for (int l : order) {
      if (bound[l] * keep > kth.value() + slack) break;  // false for NaN bounds and an infinite k-th
      for (std::int64_t e = image.offsets[l]; e < image.offsets[l + 1]; ++e) {
        if (separation(centre[l], bounds.centre_distance[e], dd) * keep > kth.value() + slack)
          continue;  // its ring bound
        ++read;
        const double d =
            canonical_score(row_distance(p.metric, FloatRows{image.vectors.data()}, e, query, p.dim));
        kth.push(d);
        keys.push_back(d);
        payloads.push_back(id_payload(image.ids[e]));
      }
    }
    write_best(keys.data(), payloads.data(), std::int64_t(keys.size()), k, ids + q * k, distances + q * k);
  }
  return read;
}

}  // namespace gknn::ivfpq
