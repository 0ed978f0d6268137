// Helpers for stream-ordered GPU code in the library's .cu files (not a
// public header): temporary device memory, grid sizes, and stage timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gknn/runtime.h"
#include "runtime/cuda_check.h"

namespace gknn {

// Device memory from the stream-ordered pool (cudaMallocAsync), freed on
// `stream` at scope exit: cheap enough to take per call.
template <typename T>
class AsyncBuffer {
 public:
  AsyncBuffer(std::size_t count, cudaStream_t s) : stream_(s) {
    if (count) GKNN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), count * sizeof(T), s));
  }
  ~AsyncBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  AsyncBuffer(const AsyncBuffer&) = delete;
  AsyncBuffer& operator=(const AsyncBuffer&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  cudaStream_t stream_;
};

// The arrays of one call laid out in one stream-ordered allocation: the
// pool's allocations and frees serialise threads that call at once (a graph
// search's five a call: calls of two queries from four threads 0.14 ->
// 0.11 ms as one, bench/results/graph-threads-H200-2026-11-28.md). add()
// reserves an array (256-byte aligned) and returns its offset; add_span()
// two arrays that download_span_and_wait brings back by one copy.
struct BlockLayout {
  std::size_t bytes = 0;
  template <typename T>
  std::size_t add(std::size_t count) {
    const std::size_t at = bytes;
    bytes += (count * sizeof(T) + 255) / 256 * 256;
    return at;
  }
  std::size_t add_span(std::size_t a_bytes, std::size_t b_bytes);
};
template <typename T>
T* in_block(const AsyncBuffer<unsigned char>& block, std::size_t at) {
  return reinterpret_cast<T*>(block.get() + at);
}

// Checks that `device` is usable (Error(NoDevice) if not) and makes it current.
inline void use_device(int device) {
  require_device(device);
  GKNN_CUDA(cudaSetDevice(device));
}

// A non-blocking stream owned by a scope.
struct OwnedStream {
  cudaStream_t s = nullptr;
  OwnedStream() { GKNN_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~OwnedStream() { cudaStreamDestroy(s); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
};

// The calling thread's stream on `device` (the current device): made on
// first use and kept for the thread's life, so that a caller that searches
// many small batches (the GPU service's executor threads) pays for no stream
// creation per call, and threads calling at once run on separate streams.
// Never destroyed: a thread that ends leaks one stream, and no CUDA call runs
// from a destructor after the runtime's own teardown at exit.
// `which` (0 or 1) picks one of the thread's two streams there.
cudaStream_t thread_stream(int device, int which = 0);

// Pinned host memory of at least `bytes`, the calling thread's own (slot 0
// to 3), kept for the thread's life and grown when a call needs more:
// device-to-host copies into it run without the driver's staging buffers,
// which threads copying at once would share. Null above kMaxPinnedScratch
// (a rare large result is not worth pinned memory kept for the thread's
// life: the caller uses pageable memory then). The memory stays valid until
// the same thread asks for the same slot again, so a function must not hand
// it to a callee that may take the same slot.
constexpr std::size_t kMaxPinnedScratch = std::size_t(16) << 20;
void* pinned_scratch_bytes(int slot, std::size_t bytes);
template <typename T>
T* pinned_scratch(int slot, std::size_t count) {
  return static_cast<T*>(pinned_scratch_bytes(slot, count * sizeof(T)));
}

// Uploads `bytes` of host data to `to` on `s` through pinned scratch `slot`
// (a pageable cudaMemcpyAsync is a synchronous staged copy: tens of
// microseconds of a small search's time), or directly when too large for
// it. The slot must not be taken again before `s` has run the copy.
void upload_async(void* to, const void* from, std::size_t bytes, int slot, cudaStream_t s);

// Copies device buffers a (a_bytes) and b (b_bytes) back to host arrays
// on `s` through pinned scratch `slot`, and waits for `s`.
void download_and_wait(void* to_a, const void* a, std::size_t a_bytes, void* to_b, const void* b,
                       std::size_t b_bytes, int slot, cudaStream_t s);
// The same for two arrays of one allocation, b at span_offset(a_bytes) past
// a: one copy (a copy may not cross from one allocation into another).
constexpr std::size_t span_offset(std::size_t a_bytes) { return (a_bytes + 15) / 16 * 16; }
void download_span_and_wait(void* to_a, std::size_t a_bytes, void* to_b, std::size_t b_bytes,
                            const void* span, int slot, cudaStream_t s);

// Pinned host memory owned by an object rather than a thread (a GPU service
// session's TopK runs on any executor thread): blocks up to kMaxPooledPinned
// come from and go back to one process-wide free list, because cudaHostAlloc
// and cudaFreeHost cost tens of microseconds each and cudaFreeHost waits for
// the whole device, other sessions' work included. Larger blocks are
// allocated and freed as asked. Throws gknn::Error when the driver has none.
constexpr std::size_t kMaxPooledPinned = std::size_t(1) << 20;
class PinnedBlock {
 public:
  PinnedBlock() = default;
  explicit PinnedBlock(std::size_t bytes);
  ~PinnedBlock();
  PinnedBlock(PinnedBlock&& o) noexcept : p_(o.p_), size_(o.size_) {
    o.p_ = nullptr;
    o.size_ = 0;
  }
  PinnedBlock& operator=(PinnedBlock&& o) noexcept;
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  void* data() const { return p_; }
  std::size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
T* pinned_as(const PinnedBlock& b) {
  return static_cast<T*>(b.data());
}

// pinned_scratch, or `fallback` (resized) where that gives none.
template <typename T>
T* pinned_or(int slot, std::size_t count, std::vector<T>& fallback) {
  if (T* p = pinned_scratch<T>(slot, count)) return p;
  fallback.resize(count);
  return fallback.data();
}

// Work queued on `waiter` from now on waits for what is queued on `on`.
inline void stream_wait(cudaStream_t waiter, cudaStream_t on) {
  cudaEvent_t e;
  GKNN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(e, on);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, e, 0);
  cudaEventDestroy(e);  // released once the wait is done
  GKNN_CUDA(err);
}

// Keeps memory freed to `device`'s stream-ordered pool there (the default
// release threshold hands it back to the driver at every synchronisation,
// which makes the next cudaMallocAsync a real allocation). Once per device
// per process; the first DeviceImage on a device calls it.
void keep_pool_memory(int device);

// Blocks for a grid-stride loop over n items: at least 1, at most 65536.
inline int grid_for(std::int64_t n, int threads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(blocks, 1), 65536));
}

// When the environment variable `env` is set, records an event at each
// mark() and prints the GPU time between marks (and any note()s) to stderr
// on destruction, each line starting with `prefix`. Benchmarks use it to say
// where the time goes; unset, it costs a getenv per call.
class StageTrace {
 public:
  StageTrace(cudaStream_t s, const char* env, const char* prefix)
      : stream_(s), on_(std::getenv(env) != nullptr), prefix_(prefix) {
    mark("start");
  }
  void mark(const char* stage) {
    if (!on_ || count_ == kMax) return;
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    cudaEventRecord(e, stream_);
    events_[count_] = e;
    names_[count_++] = stage;
  }
  void note(const std::string& line) {
    if (on_) notes_ += std::string(prefix_) + ": " + line + "\n";
  }
  ~StageTrace() {
    if (!on_) return;
    std::fputs(notes_.c_str(), stderr);
    if (count_ > 0 && cudaEventSynchronize(events_[count_ - 1]) == cudaSuccess)
      for (int i = 1; i < count_; ++i) {
        float ms = 0;
        cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
        std::fprintf(stderr, "%s: %-12s %9.3f ms\n", prefix_, names_[i], ms);
      }
    for (int i = 0; i < count_; ++i) cudaEventDestroy(events_[i]);
  }
  StageTrace(const StageTrace&) = delete;
  StageTrace& operator=(const StageTrace&) = delete;

 private:
  static constexpr int kMax = 64;
  cudaStream_t stream_;
  bool on_;
  const char* prefix_;
  int count_ = 0;
  cudaEvent_t events_[kMax];
  const char* names_[kMax];
  std::string notes_;
};

}  // namespace gknn
