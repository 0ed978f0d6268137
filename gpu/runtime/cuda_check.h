// Checked CUDA calls and an owning device buffer, for the library's .cu/.cpp
// files only (not a public header).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "gknn/error.h"

namespace gknn {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* what) {
  cudaGetLastError();  // clear a sticky-free error so later calls start clean
  ErrorCode code = err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory
                   : (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
                       ? ErrorCode::NoDevice
                       : ErrorCode::DeviceFault;
  throw Error(code, std::string(what) + ": " + cudaGetErrorString(err));
}

#define GKNN_CUDA(call)                                                 \
  do {                                                                  \
    cudaError_t gknn_err_ = (call);                                     \
    if (gknn_err_ != cudaSuccess) ::gknn::throw_cuda(gknn_err_, #call); \
  } while (0)

// cudaMalloc on the current device, and once more after handing its
// stream-ordered pool back to the driver: keep_pool_memory keeps what queries
// freed there, which a plain allocation cannot use.
inline cudaError_t device_malloc(void** p, std::size_t bytes) {
  if (cudaMalloc(p, bytes) == cudaSuccess) return cudaSuccess;
  cudaGetLastError();
  int device = 0;
  cudaMemPool_t pool;
  if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
    cudaMemPoolTrimTo(pool, 0);
  return cudaMalloc(p, bytes);
}

// Device memory freed on scope exit (also when an exception unwinds).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count) GKNN_CUDA(device_malloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_;
};

}  // namespace gknn
