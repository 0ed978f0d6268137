// The PQ stage of the CPU searches (not a public header): search_cpu maps
// its entries to ids, search_refined_cpu re-ranks them by exact distance.
#pragma once

#include <cstdint>

#include "gknn/ivfpq.h"

namespace gknn::ivfpq {

// The k best entries of each of nq queries (raw, host) by PQ distance, in
// search_cpu's order, as positions in the image's arrays: nq x k, -1 past a
// row's candidates (key NaN there). `probes` is already clamped to lists.
// The image and arguments are checked by the caller.
void pq_candidates_cpu(const Image& image, const float* queries, std::int64_t nq, int k, int probes,
                       std::int64_t* entries, float* keys);

}  // namespace gknn::ivfpq
