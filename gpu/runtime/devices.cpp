// GPU discovery through the CUDA runtime (linked statically; it loads the
// driver library on first use, so a host without one just sees no GPUs).
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gknn/runtime.h"

namespace gknn {

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return out;
}

int cuda_runtime_version() { return CUDART_VERSION; }

void require_device(int ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::NoDevice, std::string("no usable GPU: ") + cudaGetErrorString(err));
  }
  if (ordinal < 0 || ordinal >= count)
    throw Error(ErrorCode::NoDevice,
                "GPU " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) + " visible)");
}

void open_device(int ordinal) {
  require_device(ordinal);
  cudaError_t err = cudaSetDevice(ordinal);
  if (err == cudaSuccess) err = cudaFree(nullptr);  // makes the primary context
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::NoDevice,
                "GPU " + std::to_string(ordinal) + " could not be opened: " + cudaGetErrorString(err));
  }
}

void register_host_memory(void* p, std::size_t bytes) {
  const cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::DeviceFault, std::string("cudaHostRegister: ") + cudaGetErrorString(err));
  }
}

}  // namespace gknn
