// ResidentStore (resident_store.h). Host code; a .cu file only for the CUDA
// runtime calls of device stores.
#include "expr/resident_store.h"

#include <cuda_runtime.h>

#include <cstring>
#include <new>

#include "runtime/cuda_check.h"

namespace gknn::expr {

namespace {

// Piece offsets of a batch laid out for `capacity` rows.
std::vector<std::size_t> piece_offsets(const std::vector<ColumnSpec>& columns, std::int64_t capacity) {
  std::vector<std::size_t> at;
  layout::walk(columns, capacity, [&](std::size_t offset, std::size_t, int, int) { at.push_back(offset); });
  return at;
}

}  // namespace

ResidentStore::~ResidentStore() {
  for (unsigned char* b : buffers_) {
    if (device_ >= 0)
      cudaFree(b);
    else
      delete[] b;
  }
}

bool ResidentStore::add(const unsigned char* base, std::int64_t capacity, std::int64_t n, void* stream) {
  if (n <= 0) return true;
  const std::size_t bytes = batch_bytes(columns_, n);
  if (bytes_ + bytes > max_bytes_) return false;
  unsigned char* buffer = nullptr;
  if (device_ >= 0) {
    if (device_malloc(reinterpret_cast<void**>(&buffer), bytes) != cudaSuccess) {
      cudaGetLastError();  // out of device memory: no cache, no error
      return false;
    }
  } else {
    buffer = new (std::nothrow) unsigned char[bytes];
    if (!buffer) return false;
  }
  buffers_.push_back(buffer);
  const std::vector<std::size_t> from = piece_offsets(columns_, capacity), to = piece_offsets(columns_, n);
  std::size_t piece = 0;
  for_each_filled(columns_, capacity, n, [&](std::size_t, std::size_t len) {
    if (len == 0) {
      ++piece;
      return;
    }
    if (device_ >= 0)
      GKNN_CUDA(cudaMemcpyAsync(buffer + to[piece], base + from[piece], len, cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(stream)));
    else
      std::memcpy(buffer + to[piece], base + from[piece], len);
    ++piece;
  });
  BatchView v;
  layout_batch(v, columns_, n, buffer);
  v.n = n;
  views_.push_back(v);
  rows_ += n;
  bytes_ += bytes;
  return true;
}

const ResidentStore& checked_store(const ResidentBatches& r, int device,
                                   const std::vector<ColumnSpec>& columns) {
  const ResidentStore* s = dynamic_cast<const ResidentStore*>(&r);
  bool same = s && s->device() == device && s->columns().size() == columns.size();
  for (std::size_t c = 0; same && c < columns.size(); ++c)
    same = s->columns()[c].type == columns[c].type && s->columns()[c].dim == columns[c].dim;
  if (!same) throw Error(ErrorCode::InvalidArgument, "top-k: resident batches of other columns or device");
  return *s;
}

}  // namespace gknn::expr
