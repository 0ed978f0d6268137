// How an ImageDelta (gknn/ivfpq_delta.h) rebuilds an image's arrays, worked
// out once on the host and followed by the CPU (delta_cpu.cpp) and the GPU
// (delta_cuda.cu) alike. Not a public header.
#pragma once

#include <cstdint>
#include <vector>

#include "gknn/ivfpq_delta.h"

namespace gknn::ivfpq {

// Entries [dst, dst + len) of the new arrays (list order) come from entries
// [src, src + len) of the old arrays, or of the delta's new entries when
// `fresh` is set.
struct CopyRun {
  std::int64_t dst = 0, src = 0, len = 0;
  std::int32_t fresh = 0;
};

struct DeltaPlan {
  std::vector<std::int64_t> offsets;               // the new image's, lists + 1
  std::vector<CopyRun> runs;                       // by dst, covering every new entry once
  std::vector<std::int64_t> removed;               // old entries gone, ascending
  bool vectors = false;                            // the new image carries vectors...
  VectorElement element = VectorElement::Float32;  // ... of this element type
  std::int64_t entries() const { return offsets.back(); }
};

// The plan of `delta` over an image of `params` whose lists start at
// `offsets` and which holds vectors of `element` (`vectors`: for an image of
// no entries, whether its index keeps vectors at all). Throws
// Error(InvalidArgument) when the delta does not fit (gknn/ivfpq_delta.h
// says how it must).
DeltaPlan plan_delta(const Params& params, const std::vector<std::int64_t>& offsets, bool vectors,
                     VectorElement element, const ImageDelta& delta);

// Largest[p]: entries in the p largest lists of `offsets` (p = 0..lists).
std::vector<std::int64_t> largest_lists(const std::vector<std::int64_t>& offsets);

}  // namespace gknn::ivfpq
