// Per-thread streams and the stream-ordered pool's setting (stream_tools.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

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

void* pinned_scratch_bytes(int slot, std::size_t bytes) {
  constexpr int kSlots = 4;
  constexpr std::size_t kLeast = std::size_t(1) << 20;
  if (slot < 0 || slot >= kSlots) throw Error(ErrorCode::InvalidArgument, "pinned_scratch: no such slot");
  if (bytes > kMaxPinnedScratch) return nullptr;
  struct Block {
    void* p = nullptr;
    std::size_t size = 0;
  };
  // Never freed at thread exit, as thread_stream's streams are not.
  thread_local Block blocks[kSlots];
  Block& b = blocks[slot];
  if (b.size < bytes) {
    const std::size_t size = std::min(kMaxPinnedScratch, std::max(kLeast, std::max(bytes, 2 * b.size)));
    void* p = nullptr;
    GKNN_CUDA(cudaHostAlloc(&p, size, cudaHostAllocPortable));
    if (b.p) cudaFreeHost(b.p);
    b.p = p;
    b.size = size;
  }
  return b.p;
}

void upload_async(void* to, const void* from, std::size_t bytes, int slot, cudaStream_t s) {
  if (bytes == 0) return;
  void* pinned = pinned_scratch_bytes(slot, bytes);
  if (pinned) std::memcpy(pinned, from, bytes);
  GKNN_CUDA(cudaMemcpyAsync(to, pinned ? pinned : from, bytes, cudaMemcpyHostToDevice, s));
}

std::size_t BlockLayout::add_span(std::size_t a_bytes, std::size_t b_bytes) {
  const std::size_t at = bytes;
  bytes += (span_offset(a_bytes) + b_bytes + 255) / 256 * 256;
  return at;
}

namespace {

// download_and_wait's body; `span`: b starts at a + span_offset(a_bytes) in
// the same allocation, so that one copy brings both into the pinned scratch.
void download_pair(void* to_a, const void* a, std::size_t a_bytes, void* to_b, const void* b,
                   std::size_t b_bytes, bool span, int slot, cudaStream_t s) {
  const std::size_t b_at = span_offset(a_bytes);
  auto* pinned = static_cast<unsigned char*>(pinned_scratch_bytes(slot, b_at + b_bytes));
  if (!pinned) {
    if (a_bytes) GKNN_CUDA(cudaMemcpyAsync(to_a, a, a_bytes, cudaMemcpyDeviceToHost, s));
    if (b_bytes) GKNN_CUDA(cudaMemcpyAsync(to_b, b, b_bytes, cudaMemcpyDeviceToHost, s));
    GKNN_CUDA(cudaStreamSynchronize(s));
    return;
  }
  if (span) {
    GKNN_CUDA(cudaMemcpyAsync(pinned, a, b_at + b_bytes, cudaMemcpyDeviceToHost, s));
  } else {
    if (a_bytes) GKNN_CUDA(cudaMemcpyAsync(pinned, a, a_bytes, cudaMemcpyDeviceToHost, s));
    if (b_bytes) GKNN_CUDA(cudaMemcpyAsync(pinned + b_at, b, b_bytes, cudaMemcpyDeviceToHost, s));
  }
  GKNN_CUDA(cudaStreamSynchronize(s));
  if (a_bytes) std::memcpy(to_a, pinned, a_bytes);
  if (b_bytes) std::memcpy(to_b, pinned + b_at, b_bytes);
}

}  // namespace

void download_span_and_wait(void* to_a, std::size_t a_bytes, void* to_b, std::size_t b_bytes,
                            const void* span, int slot, cudaStream_t s) {
  download_pair(to_a, span, a_bytes, to_b, static_cast<const unsigned char*>(span) + span_offset(a_bytes),
                b_bytes, true, slot, s);
}

void download_and_wait(void* to_a, const void* a, std::size_t a_bytes, void* to_b, const void* b,
                       std::size_t b_bytes, int slot, cudaStream_t s) {
  download_pair(to_a, a, a_bytes, to_b, b, b_bytes, false, slot, s);
}

namespace {

// Free pooled blocks by size class (2^c bytes); never returned to the driver.
struct PinnedFreeLists {
  std::mutex mu;
  std::vector<void*> lists[64];
};
PinnedFreeLists& pinned_free_lists() {
  static PinnedFreeLists* f = new PinnedFreeLists;  // outlives every static destructor
  return *f;
}
int size_class(std::size_t bytes) {
  int c = 12;  // 4 KB at least
  while ((std::size_t(1) << c) < bytes) ++c;
  return c;
}

}  // namespace

PinnedBlock::PinnedBlock(std::size_t bytes) {
  if (bytes > kMaxPooledPinned) {
    GKNN_CUDA(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable));
    size_ = bytes;
    return;
  }
  const int c = size_class(bytes);
  size_ = std::size_t(1) << c;
  PinnedFreeLists& f = pinned_free_lists();
  {
    std::lock_guard<std::mutex> lock(f.mu);
    if (!f.lists[c].empty()) {
      p_ = f.lists[c].back();
      f.lists[c].pop_back();
      return;
    }
  }
  GKNN_CUDA(cudaHostAlloc(&p_, size_, cudaHostAllocPortable));
}

PinnedBlock::~PinnedBlock() {
  if (!p_) return;
  if (size_ > kMaxPooledPinned) {
    cudaFreeHost(p_);
    return;
  }
  PinnedFreeLists& f = pinned_free_lists();
  std::lock_guard<std::mutex> lock(f.mu);
  f.lists[size_class(size_)].push_back(p_);
}

PinnedBlock& PinnedBlock::operator=(PinnedBlock&& o) noexcept {
  if (this != &o) {
    PinnedBlock gone(std::move(*this));
    p_ = o.p_;
    size_ = o.size_;
    o.p_ = nullptr;
    o.size_ = 0;
  }
  return *this;
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
