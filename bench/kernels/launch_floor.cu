// The floor under a small gpu_graph call (gknn_bench_graph "quick"): an
// empty kernel launched as the search launches a few queries (thread block
// clusters of 8 CTAs of 512 threads a query, or one such CTA a query as a
// large call's, all the shared memory a CTA may take, each query's answer
// word written into mapped pinned memory), then the wait: what a call costs
// before its search does anything.
#include "launch_floor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace {

constexpr int kThreads = 512;

__global__ void empty_kernel(std::uint32_t* answers, int per_query) {
  extern __shared__ unsigned char smem[];
  if (threadIdx.x == 0) {
    smem[0] = 1;
    if (blockIdx.x % per_query == 0) answers[blockIdx.x / per_query] = 1;  // a query's answer, over PCIe
  }
}

bool ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

}  // namespace

double launch_floor_ms(int queries, bool cluster) {
  int optin = 0;
  if (!ok(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0)) ||
      !ok(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin)))
    return -1;
  std::uint32_t* host = nullptr;
  void* mapped = nullptr;
  if (!ok(cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(std::uint32_t) * queries,
                        cudaHostAllocMapped)))
    return -1;
  cudaStream_t s = nullptr;
  double p50 = -1;
  if (ok(cudaHostGetDevicePointer(&mapped, host, 0)) &&
      ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) {
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    const int per_query = cluster ? 8 : 1;
    attr.val.clusterDim.x = unsigned(per_query);
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(queries * per_query));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = std::size_t(optin);
    config.stream = s;
    config.attrs = &attr;
    config.numAttrs = 1;
    std::vector<double> ms;
    bool good = true;
    for (int i = 0; i < 330 && good; ++i) {
      const auto t = std::chrono::steady_clock::now();
      good = ok(cudaLaunchKernelEx(&config, empty_kernel, static_cast<std::uint32_t*>(mapped), per_query)) &&
             ok(cudaStreamSynchronize(s));
      if (i >= 30)
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    if (good) {
      std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
      p50 = ms[ms.size() / 2];
    }
    cudaStreamDestroy(s);
  }
  cudaFreeHost(host);
  return p50;
}
