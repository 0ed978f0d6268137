// plan_delta: an ImageDelta checked against an image's shape and turned into
// copy runs (delta_plan.h); apply_delta on a host Image follows them.
#include "ivfpq/delta_plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "gknn/error.h"
#include "ivfpq/common.h"
#include "ivfpq/stored_rows.h"

namespace gknn::ivfpq {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "ivfpq delta: " + what);
}

// Elements of the stored row of one entry in the array of `element`.
std::size_t row_elements(const Params& p, VectorElement element) {
  return element == VectorElement::Bit ? std::size_t(bit_row_bytes(p.dim)) : std::size_t(p.dim);
}

// The element type of the delta's new vectors (Float32 when none) and how
// many elements it holds.
VectorElement delta_element(const ImageDelta& d, std::size_t* size) {
  const int arrays = !d.vectors.empty() + !d.half_vectors.empty() + !d.bit_vectors.empty();
  if (arrays > 1) invalid("new vectors of two element types");
  *size = d.vectors.size() + d.half_vectors.size() + d.bit_vectors.size();
  return !d.half_vectors.empty()  ? VectorElement::Float16
         : !d.bit_vectors.empty() ? VectorElement::Bit
                                  : VectorElement::Float32;
}

// Whether the new image carries vectors, and of which element type: the old
// one's, which the delta's new entries must share; an image of no entries
// takes the delta's.
bool vectors_after(const Params& p, std::int64_t old_entries, bool old_vectors, VectorElement old_element,
                   const ImageDelta& d, VectorElement* element) {
  const std::size_t fresh = d.ids.size();
  std::size_t size = 0;
  const VectorElement de = delta_element(d, &size);
  const bool carries = size == fresh * row_elements(p, de);
  if (size != 0 && !carries) invalid("new vectors do not match new entries x their row");
  *element = old_element;
  if (old_entries == 0) {
    if (carries && size != 0) *element = de;
    return old_vectors && carries;
  }
  if (old_vectors && !carries) invalid("new entries without vectors for an image that has them");
  if (old_vectors && size != 0 && de != old_element) invalid("new vectors of another element type");
  if (!old_vectors && size != 0) invalid("new vectors for an image that has none");
  return old_vectors;
}

void check_splices(const std::vector<std::int64_t>& offsets, const ImageDelta& d) {
  const std::int64_t lists = std::int64_t(offsets.size()) - 1, fresh = std::int64_t(d.ids.size());
  std::int32_t list = -1;
  std::int64_t end = 0;  // of the previous splice in the same list
  for (const Splice& s : d.splices) {
    if (s.list < 0 || s.list >= lists) invalid("a splice names list " + std::to_string(s.list));
    if (s.list < list) invalid("splices are not in list order");
    if (s.list != list) end = 0;
    list = s.list;
    const std::int64_t size = offsets[list + 1] - offsets[list];
    if (s.at < end || s.remove < 0 || s.remove > size - s.at)
      invalid("a splice of list " + std::to_string(list) + " overlaps another or passes its end");
    if (s.first < 0 || s.count < 0 || s.count > fresh - s.first) invalid("a splice uses missing new entries");
    end = s.at + s.remove;
  }
}

// Appends a run, merged with the one before where they continue each other.
void add_run(std::vector<CopyRun>& runs, std::int64_t dst, std::int64_t src, std::int64_t len, bool fresh) {
  if (len == 0) return;
  if (!runs.empty()) {
    CopyRun& b = runs.back();
    if (b.fresh == fresh && b.src + b.len == src && b.dst + b.len == dst) {
      b.len += len;
      return;
    }
  }
  runs.push_back(CopyRun{dst, src, len, fresh ? 1 : 0});
}

}  // namespace

DeltaPlan plan_delta(const Params& params, const std::vector<std::int64_t>& offsets, bool vectors,
                     VectorElement element, const ImageDelta& d) {
  if (offsets.size() != std::size_t(params.lists) + 1) invalid("offsets do not match the lists");
  if (d.codes.size() != d.ids.size() * std::size_t(code_size(params)))
    invalid("new codes do not match new entries x code_size");
  check_splices(offsets, d);
  DeltaPlan plan;
  plan.vectors = vectors_after(params, offsets.back(), vectors, element, d, &plan.element);
  plan.offsets.assign(offsets.size(), 0);
  std::int64_t dst = 0;
  std::size_t next = 0;  // the next splice
  for (int l = 0; l < params.lists; ++l) {
    plan.offsets[l] = dst;
    std::int64_t pos = offsets[l];  // the next old entry of list l to place
    for (; next < d.splices.size() && d.splices[next].list == l; ++next) {
      const Splice& s = d.splices[next];
      const std::int64_t at = offsets[l] + s.at;
      add_run(plan.runs, dst, pos, at - pos, false);
      dst += at - pos;
      add_run(plan.runs, dst, s.first, s.count, true);
      dst += s.count;
      for (std::int64_t e = at; e < at + s.remove; ++e) plan.removed.push_back(e);
      pos = at + s.remove;
    }
    add_run(plan.runs, dst, pos, offsets[l + 1] - pos, false);
    dst += offsets[l + 1] - pos;
  }
  plan.offsets[params.lists] = dst;
  return plan;
}

std::vector<std::int64_t> largest_lists(const std::vector<std::int64_t>& offsets) {
  const std::size_t lists = offsets.size() - 1;
  std::vector<std::int64_t> sizes(lists), largest(lists + 1, 0);
  for (std::size_t l = 0; l < lists; ++l) sizes[l] = offsets[l + 1] - offsets[l];
  std::sort(sizes.begin(), sizes.end(), std::greater<std::int64_t>());
  for (std::size_t l = 0; l < lists; ++l) largest[l + 1] = largest[l] + sizes[l];
  return largest;
}

namespace {

// Calls fn(out's array, old's array, delta's array, elements per entry) for
// the stored vectors of `element` (out and old may be one image).
template <typename Fn>
void with_rows(Image& out, const Image& old, const ImageDelta& delta, VectorElement element, Fn fn) {
  const Params& p = old.quantizer.params;
  if (element == VectorElement::Float16)
    fn(out.half_vectors, old.half_vectors, delta.half_vectors, std::size_t(p.dim));
  else if (element == VectorElement::Bit)
    fn(out.bit_vectors, old.bit_vectors, delta.bit_vectors, std::size_t(bit_row_bytes(p.dim)));
  else
    fn(out.vectors, old.vectors, delta.vectors, std::size_t(p.dim));
}

// Appends the runs of `plan` from `old` and `fresh` to `out` (in entry
// order, so appending lays the array out, with no zero fill first).
template <typename T>
void gather(std::vector<T>& out, const std::vector<T>& old, const std::vector<T>& fresh,
            const DeltaPlan& plan, std::size_t per) {
  out.reserve(std::size_t(plan.entries()) * per);
  for (const CopyRun& r : plan.runs) {
    const T* from = (r.fresh ? fresh : old).data() + r.src * per;
    out.insert(out.end(), from, from + r.len * per);
  }
}

}  // namespace

Image apply_delta(const Image& image, const ImageDelta& delta) {
  check_image(image);
  const Params& p = image.quantizer.params;
  const DeltaPlan plan = plan_delta(p, image.offsets, has_vectors(image), vector_element(image), delta);
  Image out;
  out.quantizer = image.quantizer;
  out.offsets = plan.offsets;
  gather(out.codes, image.codes, delta.codes, plan, std::size_t(code_size(p)));
  gather(out.ids, image.ids, delta.ids, plan, 1);
  if (plan.vectors)
    with_rows(out, image, delta, plan.element,
              [&](auto& rows, const auto& old, const auto& fresh, std::size_t per) {
                gather(rows, old, fresh, plan, per);
              });
  return out;
}

namespace {

// Moves the old runs of `plan` within `a` (per: elements per entry; `a`
// already as long as the longer layout) to their places: runs going right
// last to first, then runs going left first to last, so that no run lands
// on one not yet moved (runs keep their order in both layouts).
template <typename T>
void move_runs(std::vector<T>& a, const std::vector<CopyRun>& runs, std::size_t per) {
  auto move = [&](const CopyRun& r) {
    std::memmove(a.data() + r.dst * per, a.data() + r.src * per, sizeof(T) * r.len * per);
  };
  for (auto it = runs.rbegin(); it != runs.rend(); ++it)
    if (!it->fresh && it->dst > it->src) move(*it);
  for (const CopyRun& r : runs)
    if (!r.fresh && r.dst < r.src) move(r);
}

template <typename T>
void copy_fresh(std::vector<T>& a, const std::vector<T>& fresh, const std::vector<CopyRun>& runs,
                std::size_t per) {
  for (const CopyRun& r : runs)
    if (r.fresh) std::copy_n(fresh.data() + r.src * per, r.len * per, a.data() + r.dst * per);
}

template <typename T>
void edit(std::vector<T>& a, const std::vector<T>& fresh, const DeltaPlan& plan, std::size_t per) {
  const std::size_t n = std::size_t(plan.entries()) * per;
  if (n > a.size()) a.resize(n);  // capacity reserved: no allocation
  move_runs(a, plan.runs, per);
  copy_fresh(a, fresh, plan.runs, per);
  a.resize(n);
}

}  // namespace

void apply_delta_in_place(Image& image, const ImageDelta& delta) {
  check_image(image);
  const Params& p = image.quantizer.params;
  const VectorElement element = vector_element(image);
  const DeltaPlan plan = plan_delta(p, image.offsets, has_vectors(image), element, delta);
  if (plan.vectors && image.ids.empty()) {
    image = apply_delta(image, delta);  // an image of no entries that gains vectors: not an edit
    return;
  }
  const std::size_t cs = std::size_t(code_size(p)), n = std::size_t(plan.entries());
  // Every allocation first (geometric growth), so that nothing below throws.
  auto room = [](auto& v, std::size_t want) {
    if (want > v.capacity()) v.reserve(std::max(want, v.capacity() + v.capacity() / 2));
  };
  room(image.codes, n * cs);
  room(image.ids, n);
  if (plan.vectors)
    with_rows(image, image, delta, element,
              [&](auto& rows, const auto&, const auto&, std::size_t per) { room(rows, n * per); });
  std::vector<std::int64_t> offsets = plan.offsets;
  edit(image.codes, delta.codes, plan, cs);
  edit(image.ids, delta.ids, plan, 1);
  if (plan.vectors)
    with_rows(image, image, delta, element, [&](auto& rows, const auto&, const auto& fresh, std::size_t per) {
      edit(rows, fresh, plan, per);
    });
  image.offsets.swap(offsets);
}

}  // namespace gknn::ivfpq
