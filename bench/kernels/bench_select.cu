// Single-array top-k benchmark (issue 3, 7a and 7c): n float32 keys with
// uint32 payloads (row ids), smallest k.
//
//   gknn_bench_select [log2_n=29] [results.md]
//
// Side by side in one run: the one-read floor (a streaming read kernel,
// measured here), gknn's select_topk_gpu (sampled prefilter + bitonic top-k),
// bitonic top-k alone as in the paper (fused loader, no prefilter), CUB radix
// sort of everything then take k, and a radix select built on CUB (8-bit MSD
// digits: histogram, then DeviceSelect of the matching bucket and of the
// lower buckets). Every method's result is checked against gknn's.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "gknn/runtime.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "select/bitonic_topk.cuh"
#include "bench_common.cuh"

using gknn::DeviceBuffer;

namespace {

__device__ __forceinline__ uint32_t ordered(float f) { return gknn::select::KeyBits<float>::ordered(f); }

__global__ void digit_histogram(const float* keys, const uint32_t* ids, int64_t m, int shift,
                                unsigned int* hist) {
  __shared__ unsigned int h[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t id = ids ? ids[i] : uint32_t(i);
    atomicAdd(&h[(ordered(keys[id]) >> shift) & 255], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&hist[i], h[i]);
}

__global__ void gather_keys(const float* keys, const uint32_t* ids, int m, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) out[i] = keys[ids[i]];
}

// Radix select on CUB (the paper's Radix Select: 8-bit MSD digits, only the
// matching bucket carried to the next pass, lower buckets written straight
// to the result): keeps candidate ids; per digit a histogram of the
// candidates, then DeviceSelect. The result is unordered.
struct RadixSelect {
  const float* keys;
  int64_t n;
  DeviceBuffer<uint32_t> a, b, result;
  DeviceBuffer<unsigned int> hist;
  DeviceBuffer<int> count;
  DeviceBuffer<unsigned char> temp;
  size_t temp_bytes = 0;
  RadixSelect(const float* k, int64_t n_)
      : keys(k), n(n_), a(n_), b(n_), result(1 << 20), hist(256), count(1), temp(size_t(1) << 28) {
    temp_bytes = size_t(1) << 28;
  }

  template <typename Pred>
  int select(const uint32_t* in, int64_t m, uint32_t* out, Pred pred) {
    if (!in) {
      thrust::counting_iterator<uint32_t> it(0);
      GKNN_CUDA(cub::DeviceSelect::If(temp.get(), temp_bytes, it, out, count.get(), m, pred));
    } else {
      GKNN_CUDA(cub::DeviceSelect::If(temp.get(), temp_bytes, in, out, count.get(), m, pred));
    }
    int c;
    GKNN_CUDA(cudaMemcpy(&c, count.get(), 4, cudaMemcpyDeviceToHost));
    return c;
  }

  // The ids of the k smallest keys in result[0, k).
  void select_ids(int k) {
    int64_t m = n, got = 0, need = k;
    const uint32_t* cand = nullptr;  // null: all of 0..n-1
    const float* kv = keys;
    for (int shift = 24; shift >= 0 && need > 0; shift -= 8) {
      GKNN_CUDA(cudaMemset(hist.get(), 0, 256 * 4));
      digit_histogram<<<1024, 256>>>(kv, cand, m, shift, hist.get());
      GKNN_CUDA(cudaGetLastError());
      unsigned int h[256];
      GKNN_CUDA(cudaMemcpy(h, hist.get(), sizeof(h), cudaMemcpyDeviceToHost));
      int d = 0;
      int64_t below = 0;
      while (below + h[d] < need) below += h[d++];
      auto lower = [kv, shift, d] __device__(uint32_t id) {
        return int((ordered(kv[id]) >> shift) & 255) < d;
      };
      auto equal = [kv, shift, d] __device__(uint32_t id) {
        return int((ordered(kv[id]) >> shift) & 255) == d;
      };
      if (below > 0) got += select(cand, m, result.get() + got, lower);
      need -= below;
      uint32_t* next = (cand == a.get()) ? b.get() : a.get();
      m = select(cand, m, next, equal);
      cand = next;
      if (m <= need || shift == 0) {  // all of the bucket, or any `need` of its equal keys
        int64_t take = std::min(m, need);
        GKNN_CUDA(cudaMemcpy(result.get() + got, cand, take * 4, cudaMemcpyDeviceToDevice));
        got += take;
        need -= take;
      }
    }
  }

  std::vector<float> sorted_keys(int k, float* scratch) {
    gather_keys<<<(k + 255) / 256, 256>>>(keys, result.get(), k, scratch);
    std::vector<float> out(k);
    GKNN_CUDA(cudaMemcpy(out.data(), scratch, 4 * k, cudaMemcpyDeviceToHost));
    std::sort(out.begin(), out.end());
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int log2n = argc > 1 ? std::atoi(argv[1]) : 29;
  const char* md = argc > 2 ? argv[2] : nullptr;
  const int64_t n = int64_t(1) << log2n;
  auto devices = gknn::list_devices();
  if (devices.empty()) {
    std::fprintf(stderr, "no GPU\n");
    return 1;
  }
  const std::string date = today();

  DeviceBuffer<float> keys(n), sink(1);
  DeviceBuffer<float> out_k(1 << 20);
  DeviceBuffer<uint32_t> out_p(1 << 20);
  fill<<<4096, 256>>>(keys.get(), n, Input::Uniform, 42);
  GKNN_CUDA(cudaDeviceSynchronize());

  const double bytes = double(n) * 4;
  if (argc > 3 && std::strcmp(argv[3], "profile") == 0) {  // for nsys/ncu: gknn alone, k = 32 and 1024
    for (int k : {32, 1024})
      for (int r = 0; r < 10; ++r)
        gknn::select_topk_gpu<float, uint32_t>(keys.get(), nullptr, n, k, gknn::SelectOrder::Smallest,
                                               out_k.get(), out_p.get());
    return 0;
  }
  float floor_ms = time_ms(
      [&] { read_all<<<132 * 16, 512>>>(reinterpret_cast<const float4*>(keys.get()), n / 4, sink.get()); });
  const double read_gbs = bytes / floor_ms / 1e6;

  // CUB radix sort of (key, id) pairs, then take k: one run serves every k.
  DeviceBuffer<float> sk(n), sk2(n);
  DeviceBuffer<uint32_t> sv(n), sv2(n);
  size_t sort_bytes = 0;
  cub::DoubleBuffer<float> dk(sk.get(), sk2.get());
  cub::DoubleBuffer<uint32_t> dv(sv.get(), sv2.get());
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, dk, dv, n));
  DeviceBuffer<unsigned char> sort_temp(sort_bytes);
  float sort_ms = time_ms(
      [&] {
        GKNN_CUDA(cudaMemcpyAsync(sk.get(), keys.get(), bytes, cudaMemcpyDeviceToDevice));
        cub::DoubleBuffer<float> k2(sk.get(), sk2.get());
        cub::DoubleBuffer<uint32_t> v2(sv.get(), sv2.get());
        GKNN_CUDA(cub::DeviceRadixSort::SortPairs(sort_temp.get(), sort_bytes, k2, v2, n));
      },
      3);
  // The copy into the sort buffer is not part of sorting:
  float copy_ms =
      time_ms([&] { GKNN_CUDA(cudaMemcpyAsync(sk.get(), keys.get(), bytes, cudaMemcpyDeviceToDevice)); }, 3);
  sort_ms -= copy_ms;

  RadixSelect radix(keys.get(), n);
  DeviceBuffer<float> sink2(1024);
  using Word = uint64_t;
  DeviceBuffer<Word> bit_out(1024);
  DeviceBuffer<Word> bit_scratch(gknn::select::bitonic_scratch_words(n, 1024) + 1);

  std::string table;
  char line[512];
  std::snprintf(line, sizeof line,
                "| k | gknn ms | GB/s | %% of floor | bitonic only ms | radix select ms | sort+take ms | vs "
                "sort | vs radix select |\n"
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  table += line;
  int failures = 0;
  for (int k = 1; k <= 1024; k *= 2) {
    float ours = time_ms([&] {
      gknn::select_topk_gpu<float, uint32_t>(keys.get(), nullptr, n, k, gknn::SelectOrder::Smallest,
                                             out_k.get(), out_p.get());
    });
    std::vector<float> mine(k), theirs;
    GKNN_CUDA(cudaMemcpy(mine.data(), out_k.get(), 4 * k, cudaMemcpyDeviceToHost));
    gknn::select::ArrayLoader<float, uint32_t> load{keys.get(), nullptr, n, false};
    float bitonic = time_ms(
        [&] {
          gknn::select::bitonic_topk<Word, true>(load, n, k, bit_out.get(), bit_scratch.get(), nullptr);
        },
        3);
    std::vector<Word> bw(k);
    GKNN_CUDA(cudaMemcpy(bw.data(), bit_out.get(), 8 * k, cudaMemcpyDeviceToHost));
    for (int i = 0; i < k; ++i)
      if (gknn::select::Packing<float, uint32_t>::key(bw[i], false) != mine[i]) ++failures;
    float rs = time_ms([&] { radix.select_ids(k); }, 3);
    theirs = radix.sorted_keys(k, sink2.get());
    if (theirs != mine) ++failures;
    std::snprintf(line, sizeof line, "| %d | %.3f | %.0f | %.0f %% | %.3f | %.3f | %.3f | %.1fx | %.1fx |\n",
                  k, ours, bytes / ours / 1e6, 100.0 * floor_ms / ours, bitonic, rs, sort_ms, sort_ms / ours,
                  rs / ours);
    table += line;
  }

  std::string robust = "| input | k | gknn ms | vs uniform |\n|---|---:|---:|---:|\n";
  for (int k : {32, 256, 1024}) {
    float base = 0;
    for (Input in : {Input::Uniform, Input::Ascending, Input::Descending, Input::BucketKiller}) {
      fill<<<4096, 256>>>(keys.get(), n, in, 7);
      GKNN_CUDA(cudaDeviceSynchronize());
      float t = time_ms([&] {
        gknn::select_topk_gpu<float, uint32_t>(keys.get(), nullptr, n, k, gknn::SelectOrder::Smallest,
                                               out_k.get(), out_p.get());
      });
      if (in == Input::Uniform) base = t;
      std::snprintf(line, sizeof line, "| %s | %d | %.3f | %.2fx |\n", input_name(in), k, t, t / base);
      robust += line;
    }
  }

  std::string report;
  std::snprintf(line, sizeof line,
                "# Single-array top-k, n = 2^%d float32 (+uint32 ids), smallest k\n\n"
                "- device: %s (cc %d.%d)\n- date: %s\n- command: gknn_bench_select %d\n"
                "- floor: one read of %.2f GB at %.0f GB/s measured in this run = %.3f ms\n"
                "- sort+take: CUB DeviceRadixSort::SortPairs of (key, id), %.3f ms for every k\n"
                "- result check against gknn (bitonic-only and radix select): %d mismatches\n\n",
                log2n, devices[0].name.c_str(), devices[0].cc_major, devices[0].cc_minor, date.c_str(), log2n,
                bytes / 1e9, read_gbs, floor_ms, sort_ms, failures);
  report += line;
  report += "## 7a: k sweep, uniform input\n\n" + table + "\n## 7c: input distributions (gknn)\n\n" + robust;
  publish(report, md);
  return failures ? 2 : 0;
}
