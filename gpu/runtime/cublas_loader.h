// cuBLAS, loaded at run time. gknn.so must load on hosts with only the NVIDIA
// driver (and on hosts with none), and the toolkit ships cuBLAS only as a
// shared library, so it is dlopen()ed the first time a GEMM is wanted:
// $GKNN_CUBLAS if set, else libcublas.so.13 / libcublas.so from the loader's
// search path. Without it, callers take a path that needs no GEMM.
#pragma once

#include <cublas_api.h>

namespace gknn {

struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                            void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
};

// The loaded library, or null when it cannot be loaded (then `why` says why).
const Cublas* load_cublas(const char** why = nullptr);

}  // namespace gknn
