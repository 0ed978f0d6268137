// The bitonic reducers' shared-memory tile layout, measured (issue 3): built
// three times, once per layout (GKNN_TILE_LAYOUT = Padded, Swizzled,
// Unpadded; see select/bitonic_topk.cuh), so ncu can count the bank
// conflicts of each and the timings compare them side by side.
//
//   gknn_bench_layout_<layout> [log2_n=28] [k=all]
//
// Prints one line per k: the bitonic top-k alone (SortReducer path) and the
// FusedSortReducer path with a filter keeping half of the rows, both checked
// against the host's answer, and the reducer's resident blocks per SM.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "select/bitonic_topk.cuh"
#include "bench_common.cuh"

#define GKNN_STR2(x) #x
#define GKNN_STR(x) GKNN_STR2(x)

namespace {

using Word = uint64_t;
using P = gknn::select::Packing<float, uint32_t>;

// A loader of this translation unit only, so every kernel instantiated here
// is this build's layout (no instance shared with the core library).
struct KeysLoader {
  const float* keys;
  int64_t n;
  bool odd_only;  // the "filter": keep odd row ids
  __device__ __forceinline__ Word operator()(int64_t i) const {
    if (i >= n || (odd_only && (i & 1) == 0)) return gknn::select::max_word<Word>();
    return P::pack(keys[i], static_cast<uint32_t>(i), false);
  }
};

// The k smallest (key, id) of the host copy, ascending; odd ids only when asked.
std::vector<std::pair<float, uint32_t>> host_topk(const std::vector<float>& h, int k, bool odd_only) {
  std::vector<std::pair<float, uint32_t>> v;
  v.reserve(h.size());
  for (size_t i = odd_only ? 1 : 0; i < h.size(); i += odd_only ? 2 : 1) v.emplace_back(h[i], uint32_t(i));
  std::partial_sort(v.begin(), v.begin() + k, v.end());
  v.resize(k);
  return v;
}

int check(const gknn::DeviceBuffer<Word>& out, const std::vector<std::pair<float, uint32_t>>& want, int k) {
  std::vector<Word> got(k);
  GKNN_CUDA(cudaMemcpy(got.data(), out.get(), 8 * k, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < k; ++i)
    if (P::key(got[i], false) != want[i].first || P::payload(got[i]) != want[i].second) ++bad;
  return bad;
}

template <int K>
int blocks_per_sm() {
  auto kernel = gknn::select::bitonic_reducer<Word, K, true, false, KeysLoader>;
  const int smem = gknn::select::tile_smem_bytes<Word, K>();
  GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                          gknn::select::BitonicShape<K>::kThreads, smem));
  return per_sm;
}

}  // namespace

int main(int argc, char** argv) {
  const int log2n = argc > 1 ? std::atoi(argv[1]) : 28;
  const int only_k = argc > 2 ? std::atoi(argv[2]) : 0;
  const int64_t n = int64_t(1) << log2n;
  gknn::DeviceBuffer<float> keys(n);
  fill<<<4096, 256>>>(keys.get(), n, Input::Uniform, 42);
  GKNN_CUDA(cudaDeviceSynchronize());
  std::vector<float> h(n);
  GKNN_CUDA(cudaMemcpy(h.data(), keys.get(), 4 * n, cudaMemcpyDeviceToHost));
  gknn::DeviceBuffer<Word> out(1024), scratch(gknn::select::bitonic_scratch_words(n, 1024) + 1);

  std::printf("layout %s, n = 2^%d\n| k | bitonic ms | fused (1/2 kept) ms | blocks/SM | wrong |\n"
              "|---:|---:|---:|---:|---:|\n",
              GKNN_STR(GKNN_TILE_LAYOUT), log2n);
  int failures = 0;
  for (int k = 1; k <= 1024; k *= 2) {
    if (only_k && k != only_k) continue;
    KeysLoader all{keys.get(), n, false}, odd{keys.get(), n, true};
    const int reps = only_k ? 1 : 5;  // one timed run under ncu
    float plain_ms = time_ms(
        [&] { gknn::select::bitonic_topk<Word, true>(all, n, k, out.get(), scratch.get(), nullptr); }, reps);
    int bad = check(out, host_topk(h, k, false), k);
    float fused_ms = time_ms([&] { gknn::select::bitonic_topk_fused<Word>(odd, n, k, out.get(), nullptr); }, reps);
    bad += check(out, host_topk(h, k, true), k);
    int per_sm = 0;
    gknn::select::with_run_length(k, [&](auto kc) { per_sm = blocks_per_sm<decltype(kc)::value>(); });
    std::printf("| %d | %.3f | %.3f | %d | %d |\n", k, plain_ms, fused_ms, per_sm, bad);
    failures += bad;
  }
  return failures ? 1 : 0;
}
