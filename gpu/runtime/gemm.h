// A cuBLAS GEMM on two streams, for the library's GEMM-based kernels (exact
// kNN, k-means assignment): a handle per stream (the calling thread's, for
// the current device, kept between calls), the precision's cuBLAS
// types, and the relative rounding of its inputs that the callers' error
// bounds need. Not a public header.
#pragma once

#include <cuda_runtime.h>

#include "gknn/knn.h"
#include "runtime/cublas_loader.h"

namespace gknn {

class Gemm {
 public:
  Gemm(const Cublas* blas, GemmPrecision precision);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // C = A^T B on handle `s` (0 or 1) and `stream`, column-major: A holds
  // `rows_a` vectors of `inner` elements at stride `lda`, B `rows_b` at
  // `ldb`, and C(i, j) = A_i . B_j lands at c[i + j * ldc]. Inputs are float,
  // or bf16 in the Bf16 precision; C is float.
  void run(int s, cudaStream_t stream, const void* a, int rows_a, int lda, const void* b, int rows_b, int ldb,
           int inner, float* c, int ldc) const;

  // Relative rounding of the GEMM's inputs (float accumulation is separate).
  double input_rounding() const;

 private:
  const Cublas* blas_;
  cublasHandle_t handle_[2] = {nullptr, nullptr};
  GemmPrecision precision_;
};

}  // namespace gknn
