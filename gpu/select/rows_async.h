// select_rows_gpu without its final wait, for the library's own GPU code
// that keeps working on the same stream (the IVF-PQ search stages): the
// results are ready in stream order, and the caller synchronises once at the
// end of its pipeline. Not a public header; same contract otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gknn/select.h"

namespace gknn {

template <typename Key, typename Payload>
void select_rows_async(const Key* d_keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                       SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, cudaStream_t stream);

}  // namespace gknn
