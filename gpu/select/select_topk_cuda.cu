// select_topk_gpu: the k best of one array.
//
// Bitonic top-k sorts every element it touches, so on its own it is bound
// by shared memory, not by the one read of the input that is the floor. Past
// the paper: a sample of the packed words gives a threshold that about
// 2k + O(sqrt k) + 8 sample-ranks deep; one streaming pass keeps the words at
// or below it (a few per thousand on any distribution: the sample is of
// (key, payload) words, which are all distinct, so ties and sorted inputs
// cannot fool it), and bitonic top-k runs on those candidates. When the
// candidates are too few (fewer than k) or too many (the buffer overflows),
// the selection falls back to bitonic top-k over the whole input, so the
// result is always exact. k above 1024 sorts the candidates instead.
#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "gknn/select.h"
#include "select/bitonic_topk.cuh"

namespace gknn {
namespace select {
namespace {

constexpr int kSampleWords = 8192;  // one block sorts them (512 threads x 16)
constexpr int kSampleThreads = 512;
constexpr int64_t kMinSampled = 8 * kSampleWords;  // below this, no prefilter

template <typename T>
struct StreamBuffer {  // stream-ordered device allocation
  T* ptr = nullptr;
  cudaStream_t stream;
  StreamBuffer(std::size_t count, cudaStream_t s) : stream(s) {
    if (count) GKNN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&ptr), count * sizeof(T), s));
  }
  ~StreamBuffer() {
    if (ptr) cudaFreeAsync(ptr, stream);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
};

// Stratified sample: one word from each of kSampleWords equal strata, at a
// hashed offset inside the stratum (deterministic, so results never depend
// on luck, and spread, so sorted inputs are sampled evenly).
template <typename Word, typename Loader>
__global__ void sample_words(Loader load, int64_t n, Word* samples) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= kSampleWords) return;
  int64_t lo = n * j / kSampleWords, hi = n * (j + 1) / kSampleWords;
  uint32_t h = uint32_t(j) * 2654435761u;
  h ^= h >> 16;
  samples[j] = load(lo + int64_t(h % uint32_t(hi - lo)));
}

template <typename Word>
__global__ void __launch_bounds__(kSampleThreads) sort_samples(Word* samples, int64_t rank, Word* threshold) {
  extern __shared__ __align__(16) unsigned char smem[];
  Word* s = reinterpret_cast<Word*>(smem);
  for (int i = threadIdx.x; i < kSampleWords; i += kSampleThreads) s[i] = samples[i];
  __syncthreads();
  local_sort<Word, kSampleWords, kSampleThreads>(s, kSampleWords);  // one ascending run
  if (threadIdx.x == 0) *threshold = s[rank];
}

// Keeps the words <= threshold (sentinels never), compacted with one atomic
// per warp; counts them all, writes the first `cap`.
template <typename Word, typename Loader>
__global__ void filter_words(Loader load, int64_t n, const Word* threshold, Word* out,
                             unsigned long long* count, int64_t cap) {
  constexpr int kUnroll = 8;
  const Word t = *threshold, none = max_word<Word>();
  const int lane = threadIdx.x & 31;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; base - threadIdx.x < n;
       base += stride * kUnroll) {
    Word w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) w[u] = load(base + u * stride);  // several loads in flight
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      bool keep = w[u] <= t && !(w[u] == none);
      unsigned mask = __ballot_sync(0xffffffffu, keep);
      if (mask == 0) continue;
      int leader = __ffs(mask) - 1;
      unsigned long long at = 0;
      if (lane == leader) at = atomicAdd(count, static_cast<unsigned long long>(__popc(mask)));
      at = __shfl_sync(0xffffffffu, at, leader) + __popc(mask & ((1u << lane) - 1));
      if (keep && at < static_cast<unsigned long long>(cap)) out[at] = w[u];
    }
  }
}

template <typename Word, typename Loader>
__global__ void pack_words(Loader load, int64_t n, Word* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = load(i);
}

template <typename Key, typename Payload>
__global__ void unpack_words(const typename Packing<Key, Payload>::Word* words, int64_t count, bool largest,
                             Key* keys, Payload* payloads) {
  using P = Packing<Key, Payload>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    keys[i] = P::key(words[i], largest);
    payloads[i] = P::payload(words[i]);
  }
}

int grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// Sorts `count` words ascending in place (radix sort is stable, so the
// 128-bit words sort by their low half first, then by the high half).
void sort_words(std::uint64_t* words, int64_t count, cudaStream_t stream) {
  StreamBuffer<std::uint64_t> tmp(count, stream);
  cub::DoubleBuffer<std::uint64_t> keys(words, tmp.ptr);
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, count, 0, 64, stream));
  StreamBuffer<unsigned char> temp(bytes, stream);
  GKNN_CUDA(cub::DeviceRadixSort::SortKeys(temp.ptr, bytes, keys, count, 0, 64, stream));
  if (keys.Current() != words)
    GKNN_CUDA(cudaMemcpyAsync(words, keys.Current(), count * 8, cudaMemcpyDeviceToDevice, stream));
}

__global__ void split_u128(const U128* w, int64_t n, std::uint64_t* hi, std::uint64_t* lo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    hi[i] = w[i].hi;
    lo[i] = w[i].lo;
  }
}
__global__ void join_u128(U128* w, int64_t n, const std::uint64_t* hi, const std::uint64_t* lo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    w[i] = U128{hi[i], lo[i]};
}

void sort_words(U128* words, int64_t count, cudaStream_t stream) {
  StreamBuffer<std::uint64_t> hi(count, stream), lo(count, stream), hi2(count, stream), lo2(count, stream);
  split_u128<<<grid_for(count, 256), 256, 0, stream>>>(words, count, hi.ptr, lo.ptr);
  GKNN_CUDA(cudaGetLastError());
  cub::DoubleBuffer<std::uint64_t> k(lo.ptr, lo2.ptr), v(hi.ptr, hi2.ptr);
  std::size_t bytes = 0;
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, count, 0, 64, stream));
  StreamBuffer<unsigned char> temp(bytes, stream);
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(temp.ptr, bytes, k, v, count, 0, 64, stream));
  cub::DoubleBuffer<std::uint64_t> k2(v.Current(), v.Alternate()), v2(k.Current(), k.Alternate());
  GKNN_CUDA(cub::DeviceRadixSort::SortPairs(temp.ptr, bytes, k2, v2, count, 0, 64, stream));
  join_u128<<<grid_for(count, 256), 256, 0, stream>>>(words, count, k2.Current(), v2.Current());
  GKNN_CUDA(cudaGetLastError());
}

// Sample rank of the threshold: about 2x the expected number of top-k words
// among the samples, plus a few standard deviations and a floor, so that
// fewer than k words fall at or below it only with negligible probability.
int64_t threshold_rank(int64_t n, int64_t k) {
  double expected = double(k) * kSampleWords / double(n);
  return static_cast<int64_t>(std::ceil(2.0 * expected + 4.0 * std::sqrt(expected) + 8.0));
}

// The smallest min(k, n) words of `load`, ascending, into out.
template <typename Word, typename Loader>
void smallest_words(Loader load, int64_t n, int64_t k, Word* out, cudaStream_t stream) {
  const int64_t take = k < n ? k : n;
  auto finish = [&](const Word* words, int64_t count) {
    if (k <= kMaxBitonicK) {
      StreamBuffer<Word> scratch(bitonic_scratch_words(count, k), stream);
      bitonic_topk<Word, true>(WordLoader<Word>{words, count}, count, k, out, scratch.ptr, stream);
    } else {
      StreamBuffer<Word> sorted(count, stream);
      GKNN_CUDA(cudaMemcpyAsync(sorted.ptr, words, count * sizeof(Word), cudaMemcpyDeviceToDevice, stream));
      sort_words(sorted.ptr, count, stream);
      GKNN_CUDA(cudaMemcpyAsync(out, sorted.ptr, take * sizeof(Word), cudaMemcpyDeviceToDevice, stream));
    }
  };
  auto everything = [&] {
    StreamBuffer<Word> all(n, stream);
    pack_words<<<grid_for(n, 256), 256, 0, stream>>>(load, n, all.ptr);
    GKNN_CUDA(cudaGetLastError());
    finish(all.ptr, n);
  };

  const int64_t rank = threshold_rank(n, k);
  if (n < kMinSampled || rank >= kSampleWords) return everything();

  StreamBuffer<Word> samples(kSampleWords, stream), threshold(1, stream);
  StreamBuffer<unsigned long long> count(1, stream);
  const int64_t cap = std::min<int64_t>(n, 2 * (n / kSampleWords + 1) * (rank + 1) + 65536);
  StreamBuffer<Word> candidates(cap, stream);
  sample_words<<<kSampleWords / 256, 256, 0, stream>>>(load, n, samples.ptr);
  GKNN_CUDA(cudaGetLastError());
  const int smem = kSampleWords * int(sizeof(Word));
  GKNN_CUDA(cudaFuncSetAttribute(sort_samples<Word>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  sort_samples<Word><<<1, kSampleThreads, smem, stream>>>(samples.ptr, rank, threshold.ptr);
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaMemsetAsync(count.ptr, 0, sizeof(unsigned long long), stream));
  int sms = 0, device = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int grid = std::max(1, std::min<int>(sms * 8, static_cast<int>((n + 2047) / 2048)));
  filter_words<<<grid, 256, 0, stream>>>(load, n, threshold.ptr, candidates.ptr, count.ptr, cap);
  GKNN_CUDA(cudaGetLastError());
  unsigned long long found = 0;
  GKNN_CUDA(cudaMemcpyAsync(&found, count.ptr, sizeof(found), cudaMemcpyDeviceToHost, stream));
  GKNN_CUDA(cudaStreamSynchronize(stream));
  if (found >= static_cast<unsigned long long>(take) && found <= static_cast<unsigned long long>(cap))
    finish(candidates.ptr, static_cast<int64_t>(found));
  else
    everything();  // the sample misled (or a filter rejected most rows): exact anyway
}

}  // namespace
}  // namespace select

template <typename Key, typename Payload>
std::int64_t select_topk_gpu(const Key* d_keys, const Payload* d_payloads, std::int64_t n, std::int64_t k,
                             SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, void* stream_ptr) {
  using namespace select;
  using P = Packing<Key, Payload>;
  using Word = typename P::Word;
  if (n < 0 || k < 0) throw Error(ErrorCode::InvalidArgument, "select_topk_gpu: negative size");
  const int64_t take = k < n ? k : n;
  if (take == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const bool largest = order == SelectOrder::Largest;
  StreamBuffer<Word> top(take, stream);
  smallest_words<Word>(ArrayLoader<Key, Payload>{d_keys, d_payloads, n, largest}, n, k, top.ptr, stream);
  unpack_words<Key, Payload><<<grid_for(take, 256), 256, 0, stream>>>(top.ptr, take, largest, d_out_keys,
                                                                       d_out_payloads);
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaStreamSynchronize(stream));
  return take;
}

#define GKNN_INSTANTIATE(K, P)                                                                              \
  template std::int64_t select_topk_gpu<K, P>(const K*, const P*, std::int64_t, std::int64_t, SelectOrder, \
                                              K*, P*, void*);
GKNN_INSTANTIATE(float, std::uint32_t)
GKNN_INSTANTIATE(float, std::uint64_t)
GKNN_INSTANTIATE(double, std::uint32_t)
GKNN_INSTANTIATE(double, std::uint64_t)
GKNN_INSTANTIATE(std::int32_t, std::uint32_t)
GKNN_INSTANTIATE(std::int32_t, std::uint64_t)
GKNN_INSTANTIATE(std::int64_t, std::uint32_t)
GKNN_INSTANTIATE(std::int64_t, std::uint64_t)
#undef GKNN_INSTANTIATE

}  // namespace gknn
