#include "runtime/gemm.h"

#include <string>

#include "gknn/error.h"
#include "runtime/cuda_check.h"

namespace gknn {
namespace {

constexpr int kMaxDevices = 64;

}  // namespace

// The handles are the calling thread's, per device, made on first use and
// kept (cublasCreate costs far more than a small GEMM; a thread that ends
// leaks its two, and none is destroyed after the runtime's teardown).
Gemm::Gemm(const Cublas* blas, GemmPrecision precision) : blas_(blas), precision_(precision) {
  int device = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    throw Error(ErrorCode::NoDevice, "GPU " + std::to_string(device) + " is past the cuBLAS handles kept");
  thread_local cublasHandle_t kept[kMaxDevices][2] = {};
  for (int i = 0; i < 2; ++i) {
    if (!kept[device][i] && blas_->create(&kept[device][i]) != CUBLAS_STATUS_SUCCESS) {
      kept[device][i] = nullptr;
      throw Error(ErrorCode::DeviceFault, "cublasCreate failed");
    }
    handle_[i] = kept[device][i];
  }
}

Gemm::~Gemm() = default;

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
