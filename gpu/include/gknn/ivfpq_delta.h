// Changing an IVF-PQ image where it is, instead of building it again: an
// ImageDelta says which entries of which lists are removed and which new
// entries go where. The extension keeps an index's image fresh this way when
// rows are inserted or vacuumed (it reads only the pages that changed); the
// core makes the changed image from a host Image (apply_delta) or from a
// GPU-resident DeviceImage (DeviceImage::updated, gknn/ivfpq.h: the new
// arrays are gathered on the GPU from the old ones plus the new entries, so
// only the new entries cross the bus). The old image is left as it was, so
// searches may go on using it meanwhile.
//
// The result is the image whose lists were edited so, entry for entry and in
// the same order: searching it gives the results a freshly built image of
// the same entries gives.
#pragma once

#include <cstdint>
#include <vector>

#include "gknn/ivfpq.h"

namespace gknn::ivfpq {

// In list `list`, the entries [at, at + remove) (positions in the list
// before the change) are replaced by the delta's new entries [first, first +
// count). A splice that removes nothing inserts at `at`; one that inserts
// nothing removes.
struct Splice {
  std::int32_t list = 0;
  std::int64_t at = 0;
  std::int64_t remove = 0;
  std::int64_t first = 0;
  std::int64_t count = 0;
};

// Splices go by list, then position: within a list each one starts at or
// after the end of the one before (at >= at' + remove'); two insertions at
// the same place land in the order given. New entries are held like an
// image's (codes, ids, and vectors of the image's element type where it has
// them); a splice may use any of them, in any order.
struct ImageDelta {
  std::vector<Splice> splices;
  std::vector<std::uint8_t> codes;          // new entries x code_size
  std::vector<std::int64_t> ids;            // new entries
  std::vector<float> vectors;               // new entries x dim, or empty
  std::vector<std::uint16_t> half_vectors;  // new entries x dim binary16 values, or empty
  std::vector<std::uint8_t> bit_vectors;    // new entries x ceil(dim / 8) bytes, or empty
};

// `image` after `delta`. Throws Error(InvalidArgument) when the delta does
// not fit the image (a splice past a list or out of order, new entries
// missing, vectors where the image has none, none where it has them, or of
// another element type).
Image apply_delta(const Image& image, const ImageDelta& delta);
// The same result in `image` itself: its arrays are edited where they are
// (entries moved by memmove, new ones copied in), which touches no new
// memory where the image does not grow past its capacity. For an image no
// other thread reads meanwhile. A delta that does not fit throws before
// anything changes.
void apply_delta_in_place(Image& image, const ImageDelta& delta);

}  // namespace gknn::ivfpq
