// Batched k-selection benchmark (issue 3, 7b; the Faiss paper's Fig 3):
// nq = 10000 rows of length l = 1000 ... 128000 float32 U(0,1) keys, k = 100
// and 1000, smallest, uint32 column ids.
//
//   gknn_bench_rows [nq=10000] [results.md]
//
// Side by side in one run: the floor (one read of the nq x l keys at the read
// bandwidth measured in this run), gknn's select_rows_gpu, and CUB's
// segmented sort of (key, column) pairs then take k. A sample of rows is
// checked against the CPU reference.
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdio>
#include <vector>

#include "bench_common.cuh"
#include "gknn/runtime.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"

using gknn::DeviceBuffer;

namespace {

__global__ void column_ids(uint32_t* v, int64_t n, int64_t len) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    v[i] = uint32_t(i % len);
}

struct RowOffset {
  int64_t len;
  __host__ __device__ int64_t operator()(int64_t r) const { return r * len; }
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t nq = argc > 1 ? std::atoll(argv[1]) : 10000;
  const char* md = argc > 2 ? argv[2] : nullptr;
  auto devices = gknn::list_devices();
  if (devices.empty()) {
    std::fprintf(stderr, "needs a GPU\n");
    return 1;
  }
  const int64_t lens[] = {1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000};
  const int ks[] = {100, 1000};
  const int64_t most = nq * lens[7];
  DeviceBuffer<float> keys(most), sink(1), sk(most);
  DeviceBuffer<uint32_t> ids(most), sv(most);
  DeviceBuffer<float> out_k(nq * 1000);
  DeviceBuffer<uint32_t> out_p(nq * 1000);
  fill<<<4096, 256>>>(keys.get(), most, Input::Uniform, 99);
  column_ids<<<4096, 256>>>(ids.get(), most, 1);  // overwritten per length below
  GKNN_CUDA(cudaDeviceSynchronize());
  const float floor_all = time_ms([&] {
    read_all<<<132 * 16, 512>>>(reinterpret_cast<const float4*>(keys.get()), most / 4, sink.get());
  });
  const double read_gbs = double(most) * 4 / floor_all / 1e6;

  std::string table =
      "| l | k | gknn ms | GB/s | % of floor | sort+take ms | vs sort | sample rows equal to CPU |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---|\n";
  int mismatches = 0;
  char line[256];
  for (int64_t len : lens) {
    const int64_t n = nq * len;
    column_ids<<<4096, 256>>>(ids.get(), n, len);
    GKNN_CUDA(cudaDeviceSynchronize());
    // CUB segmented sort (one run serves both k).
    auto offsets = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), RowOffset{len});
    size_t temp_bytes = 0;
    GKNN_CUDA(cub::DeviceSegmentedSort::SortPairs(nullptr, temp_bytes, keys.get(), sk.get(), ids.get(),
                                                  sv.get(), n, nq, offsets, offsets + 1));
    DeviceBuffer<unsigned char> temp(temp_bytes);
    const float sort_ms = time_ms(
        [&] {
          GKNN_CUDA(cub::DeviceSegmentedSort::SortPairs(temp.get(), temp_bytes, keys.get(), sk.get(),
                                                        ids.get(), sv.get(), n, nq, offsets, offsets + 1));
        },
        3);
    for (int k : ks) {
      const float ms = time_ms([&] {
        gknn::select_rows_gpu<float, uint32_t>(keys.get(), nq, len, len, k, gknn::SelectOrder::Smallest,
                                               out_k.get(), out_p.get());
      });
      // Check a sample of rows against the CPU reference.
      const int64_t sample = 8;
      std::vector<float> h(sample * len), want_k(sample * k), got_k(nq * k);
      std::vector<uint32_t> want_p(sample * k), got_p(nq * k);
      bool same = true;
      GKNN_CUDA(cudaMemcpy(got_k.data(), out_k.get(), 4 * nq * k, cudaMemcpyDeviceToHost));
      GKNN_CUDA(cudaMemcpy(got_p.data(), out_p.get(), 4 * nq * k, cudaMemcpyDeviceToHost));
      for (int64_t s = 0; s < sample; ++s) {
        const int64_t r = s * (nq / sample);
        GKNN_CUDA(cudaMemcpy(h.data() + s * len, keys.get() + r * len, 4 * len, cudaMemcpyDeviceToHost));
        gknn::select_rows_cpu<float, uint32_t>(h.data() + s * len, 1, len, len, k,
                                               gknn::SelectOrder::Smallest, want_k.data() + s * k,
                                               want_p.data() + s * k);
        for (int j = 0; j < k; ++j)
          same &= got_p[r * k + j] == want_p[s * k + j] && got_k[r * k + j] == want_k[s * k + j];
      }
      mismatches += !same;
      const double gbs = double(n) * 4 / ms / 1e6;
      std::snprintf(line, sizeof line, "| %lld | %d | %.3f | %.0f | %.0f %% | %.3f | %.1fx | %s |\n",
                    (long long)len, k, ms, gbs, 100.0 * gbs / read_gbs, sort_ms, sort_ms / ms,
                    same ? "yes" : "NO");
      table += line;
      std::fputs(line, stderr);
    }
  }
  std::string report = "# Batched k-selection (Faiss Fig 3), nq = " + std::to_string(nq) +
                       " rows of float32 U(0,1), smallest k\n\n- device: " + devices[0].name +
                       "\n- date: " + today() + "\n- command: gknn_bench_rows " + std::to_string(nq);
  std::snprintf(
      line, sizeof line,
      "\n- floor: one read of the keys at %.0f GB/s measured in this run (streaming 16-byte loads)\n"
      "- sort+take: CUB DeviceSegmentedSort::SortPairs of (key, column), both k\n"
      "- rows checked against the CPU reference: 8 per shape; shapes with a mismatch: %d\n\n",
      read_gbs, mismatches);
  report += line + table;
  publish(report, md);
  return mismatches ? 2 : 0;
}
