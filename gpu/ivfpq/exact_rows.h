// Exact distances over resident vectors of binary16 or bit elements
// (exact_rows_cuda.cu), for DeviceImage's re-rank and exact search: the
// float paths (group lane sums, the exact kNN code) take float rows, these
// take the packed rows as stored_rows.h reads them, one thread per distance,
// with the CPU reference's code (built without FMA contraction: its bits).
// Not a public header; CUDA code only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gknn/distance.h"
#include "gknn/ivfpq.h"

namespace gknn::ivfpq {

// out[i] = the canonical exact distance of the resident row ranks[i] to
// query i / count (device: ranks, queries rows x dim, out), NaN where
// ranks[i] is ~0 (padding). `packed`: the rows, in rank order, of `element`
// (Float16 or Bit).
void packed_rank_distances(VectorElement element, const void* packed, const std::uint64_t* ranks,
                           std::int64_t rows, int count, const float* queries, int dim, Metric metric,
                           double* out, cudaStream_t s);

// search_exact over `n` packed rows (device, in id order; ranked_ids: row
// -> id, on the device) for nq queries (host, raw): nq x k ids and canonical
// distances (host), best first, ties by id, padded with -1 and NaN; the
// results of search_exact_cpu.
void packed_exact_search(VectorElement element, const void* packed, std::int64_t n, int dim, Metric metric,
                         const std::int64_t* ranked_ids, const float* queries, std::int64_t nq, int k,
                         std::int64_t* ids, double* distances, cudaStream_t s);

}  // namespace gknn::ivfpq
