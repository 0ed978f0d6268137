#include "runtime/gemm.h"

#include "gknn/error.h"

namespace gknn {

Gemm::Gemm(const Cublas* blas, GemmPrecision precision) : blas_(blas), precision_(precision) {
  for (int i = 0; i < 2; ++i)
    if (blas_->create(&handle_[i]) != CUBLAS_STATUS_SUCCESS) {
      for (int j = 0; j < i; ++j) blas_->destroy(handle_[j]);
      throw Error(ErrorCode::DeviceFault, "cublasCreate failed");
    }
}

Gemm::~Gemm() {
  for (auto h : handle_) blas_->destroy(h);
}

void Gemm::run(int s, cudaStream_t stream, const void* a, int rows_a, int lda, const void* b, int rows_b,
               int ldb, int inner, float* c, int ldc) const {
  blas_->set_stream(handle_[s], stream);
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType in = precision_ == GemmPrecision::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = precision_ == GemmPrecision::Tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : precision_ == GemmPrecision::Fp32 ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                                          : CUBLAS_COMPUTE_32F;
  const cublasStatus_t st =
      blas_->gemm_ex(handle_[s], CUBLAS_OP_T, CUBLAS_OP_N, rows_a, rows_b, inner, &one, a, in, lda, b, in,
                     ldb, &zero, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(ErrorCode::DeviceFault, "cublasGemmEx failed");
}

double Gemm::input_rounding() const {
  // TF32 operands may be truncated rather than rounded: 2^-10 each.
  return precision_ == GemmPrecision::Fp32   ? 0.0
         : precision_ == GemmPrecision::Tf32 ? 2.0 * 0x1p-10
                                             : 2.0 * 0x1p-8;
}

}  // namespace gknn
