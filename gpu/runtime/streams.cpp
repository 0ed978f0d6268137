// Per-thread streams and the stream-ordered pool's setting (stream_tools.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn {
namespace {

constexpr int kMaxDevices = 64;

}  // namespace

cudaStream_t thread_stream(int device, int which) {
  if (device < 0 || device >= kMaxDevices || which < 0 || which > 1)
    throw Error(ErrorCode::NoDevice,
                "GPU " + std::to_string(device) + " is past the streams kept per thread");
  thread_local cudaStream_t streams[kMaxDevices][2] = {};
  cudaStream_t& s = streams[device][which];
  if (!s) GKNN_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void keep_pool_memory(int device) {
  static std::mutex mu;
  static bool done[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return;
  std::lock_guard<std::mutex> lock(mu);
  if (done[device]) return;
  cudaMemPool_t pool;
  GKNN_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  GKNN_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  done[device] = true;
}

}  // namespace gknn
