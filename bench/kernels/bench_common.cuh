// Pieces the kernel benchmarks share: deterministic inputs generated on the
// device, and the floor (one read of the input, measured in the same run).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "runtime/cuda_check.h"

namespace {

enum class Input { Uniform, Ascending, Descending, BucketKiller };
const char* input_name(Input i) {
  const char* n[] = {"uniform U(0,1)", "sorted ascending", "sorted descending", "bucket killer"};
  return n[int(i)];
}

__device__ uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}

__global__ void fill(float* v, int64_t n, Input kind, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float u = (mix(i * 2654435761ull + seed) >> 8) * (1.0f / 16777216.0f);
    switch (kind) {
      case Input::Uniform:
        v[i] = u;
        break;
      case Input::Ascending:
        v[i] = float(double(i) / double(n));
        break;
      case Input::Descending:
        v[i] = float(double(n - i) / double(n));
        break;
      case Input::BucketKiller: {  // all 1.0f but four values, one per 8-bit digit
        uint32_t bits = 0x3f800000u;
        for (int d = 0; d < 4; ++d)
          if (i == (n / 5) * (d + 1)) bits ^= 1u << (8 * d);
        memcpy(&v[i], &bits, 4);
      }
    }
  }
}

// The floor: read every byte once (16-byte loads), nothing else.
__global__ void read_all(const float4* v, int64_t n4, float* sink) {
  float acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 x = v[i];
    acc += x.x + x.y + x.z + x.w;
  }
  if (acc == 12345.678f) *sink = acc;  // keeps the loads
}

// Median of `reps` timed runs (CUDA events), after one warm-up run.
float time_ms(const std::function<void()>& fn, int reps = 5) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  fn();  // warm-up
  GKNN_CUDA(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    GKNN_CUDA(cudaEventSynchronize(b));
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

// Today's date (UTC), for the results file.
inline std::string today() {
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  return date;
}

// Prints the report and, when a path is given, saves it there.
inline void publish(const std::string& report, const char* md) {
  std::printf("%s", report.c_str());
  if (md == nullptr) return;
  if (FILE* f = std::fopen(md, "w")) {
    std::fputs(report.c_str(), f);
    std::fclose(f);
  }
}

}  // namespace
