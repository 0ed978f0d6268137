// The GPU assignment kernels behind Assigner and the GPU encoder (not a
// public header). Two ways to the same answer as nearest_cpu:
//   - direct: every (row, centroid) distance in the reference arithmetic
//     (assign_cuda.cu);
//   - GEMM: cuBLAS computes |c|^2 - 2 x.c for every pair, a rigorous bound
//     on that proxy's error and on the reference arithmetic's leaves a few
//     candidates per row, and only those get the reference distance
//     (assign_gemm.cu). The reference's winner is always among them.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "ivfpq/assign.h"

namespace gknn {
class Gemm;
}

namespace gknn::ivfpq {

void nearest_direct_gpu(const Groups& s, const float* x, const float* centroids, std::int32_t* out,
                        cudaStream_t stream);

// `slot` (0 or 1) picks the GEMM's handle, one per stream in flight.
void nearest_gemm_gpu(const Gemm& gemm, int slot, const Groups& s, const float* x, const float* centroids,
                      std::int32_t* out, cudaStream_t stream);

// The assignment on the current device, by `path`: Auto takes the GEMM
// where it pays (gemm_pays) and cuBLAS loads (loading it at the first such
// call), else the direct kernel; Gemm without cuBLAS is Error(NoDevice).
class DeviceAssign {
 public:
  explicit DeviceAssign(AssignPath path);
  ~DeviceAssign();
  void nearest(const Groups& s, const float* x, const float* centroids, std::int32_t* out,
               cudaStream_t stream, int slot = 0);

 private:
  AssignPath path_;
  std::unique_ptr<Gemm> gemm_;
};

}  // namespace gknn::ivfpq
