// What a GpuTopK session ships to the GPU service (service_topk_client.cpp
// writes it, service_topk.cpp reads it), free of PostgreSQL:
//
//   kTopKBegin's payload: a TopKWireProgram, then the program's arrays
//     (instructions, constants, their null flags, vector constants), each
//     at an 8-byte aligned offset;
//     With `cache` set, the table cache's probe follows at
//     topk_wire_cache_offsets: the visibility map pages' LSNs (nvm), then
//     one bit per heap block (nblocks): its all-visible bit as read;
//   kTopKBatch's payload: one batch of `capacity` rows, carved as
//     topk_wire_layout says (row ids, then per column its values, its null
//     flags and, for vectors, each row's dimension), of which the request's
//     first `count` rows are filled.
//
// Both sides carve a batch with the same function, so the backend fills the
// shared memory the service reads, with no copy in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gknn/expr.h"

namespace gknn_service {

// Which table cache entry a session means (service_topk_cache.h): the
// table, its relfilenode, and the columns (the program's, in attno order).
struct TopKCacheKey {
  std::uint32_t database = 0, relation = 0, spc = 0, db = 0, rel = 0;
  std::int32_t ncolumns = 0;
  std::int16_t attnos[gknn::expr::kMaxColumns] = {};
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
};

// What a cache probe found (TopKOutcome::cache_state after kTopKBegin).
enum TopKCacheState : std::int32_t {
  kCacheNone = 0,  // no cache for this session (off, another device, being filled elsewhere)
  kCacheFill = 1,  // no entry: this session fills it (kept batches, meta, commit)
  kCacheHit = 2,   // an entry: the per-block map is in the payload, check what it asks
};

// Per-block map bytes (the reply to a probe and to the last kTopKCacheCheck).
enum TopKCacheBlock : std::uint8_t { kBlockHeap = 0, kBlockCached = 1, kBlockCheck = 2 };

struct TopKWireProgram {
  std::int64_t k;
  std::int64_t capacity;  // rows per batch
  std::int32_t ncode, nconst, nvectors, nkeys, ncolumns;
  gknn::expr::Segment qual, check;
  gknn::expr::SortKey keys[gknn::expr::kMaxKeyLimbs];
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  // The table cache's probe (cache != 0): the entry's key, the table's
  // blocks and visibility map pages as read for this query.
  std::int32_t cache;
  TopKCacheKey key;
  std::int64_t nblocks, nvm;
  std::int64_t vm_span;  // heap blocks per visibility map page
};

inline std::int64_t topk_wire_align(std::int64_t n) { return (n + 15) & ~std::int64_t(15); }

// Offsets of the program's arrays after the header; returns the bytes in all.
struct TopKWireOffsets {
  std::int64_t code, consts, const_nulls, vectors, end;
};
inline TopKWireOffsets topk_wire_offsets(const TopKWireProgram& p) {
  TopKWireOffsets o;
  o.code = topk_wire_align(sizeof(TopKWireProgram));
  o.consts = topk_wire_align(o.code + std::int64_t(p.ncode) * std::int64_t(sizeof(gknn::expr::Instr)));
  o.const_nulls =
      topk_wire_align(o.consts + std::int64_t(p.nconst) * std::int64_t(sizeof(gknn::expr::Value)));
  o.vectors = topk_wire_align(o.const_nulls + p.nconst);
  o.end = o.vectors + std::int64_t(p.nvectors) * std::int64_t(sizeof(float));
  return o;
}

// Where a probe's arrays sit after the program's (o.end): LSNs, then bits.
struct TopKWireCacheOffsets {
  std::int64_t vm_lsn, bits, end;
};
inline TopKWireCacheOffsets topk_wire_cache_offsets(const TopKWireProgram& p, const TopKWireOffsets& o) {
  TopKWireCacheOffsets c;
  c.vm_lsn = topk_wire_align(o.end);
  c.bits = topk_wire_align(c.vm_lsn + 8 * p.nvm);
  c.end = c.bits + (p.nblocks + 7) / 8;
  return c;
}

// Bytes of one row's value of a column (the core's batch_layout sizes).
inline std::int64_t topk_wire_value_bytes(const gknn::expr::ColumnSpec& c) {
  using gknn::expr::Type;
  switch (c.type) {
    case Type::Bool:
      return 1;
    case Type::I16:
      return 2;
    case Type::I32:
    case Type::Date:
    case Type::F32:
      return 4;
    case Type::Vector:
      return 4 * std::int64_t(c.dim > 0 ? c.dim : 0);
    default:
      return 8;
  }
}

// Carves a batch of `capacity` rows of `columns` at `base` into `view`
// (view.n = 0) and returns its bytes; with base null, only the bytes.
inline std::int64_t topk_wire_layout(const gknn::expr::ColumnSpec* columns, int ncolumns,
                                     std::int64_t capacity, char* base, gknn::expr::BatchView* view) {
  std::int64_t at = 0;
  auto piece = [&](std::int64_t bytes) {
    char* p = base ? base + at : nullptr;
    at = topk_wire_align(at + bytes);
    return p;
  };
  char* ids = piece(8 * capacity);
  if (view) {
    view->n = 0;
    view->capacity = capacity;
    view->row_ids = reinterpret_cast<std::uint64_t*>(ids);
    view->columns = ncolumns;
  }
  for (int c = 0; c < ncolumns; ++c) {
    char* data = piece(topk_wire_value_bytes(columns[c]) * capacity);
    char* nulls = piece(capacity);
    char* dims = columns[c].type == gknn::expr::Type::Vector ? piece(4 * capacity) : nullptr;
    if (!view) continue;
    gknn::expr::ColumnView& v = view->column[c];
    v.type = columns[c].type;
    v.dim = columns[c].dim;
    v.data = data;
    v.nulls = reinterpret_cast<std::uint8_t*>(nulls);
    v.dims = reinterpret_cast<std::int32_t*>(dims);
  }
  return at;
}

// Copies the first n rows of `from` into `to` (a batch of the same columns
// with room for them).
inline void topk_wire_copy(const gknn::expr::BatchView& from, const gknn::expr::ColumnSpec* columns,
                           std::int64_t n, gknn::expr::BatchView& to) {
  std::memcpy(to.row_ids, from.row_ids, 8 * n);
  for (int c = 0; c < from.columns; ++c) {
    const gknn::expr::ColumnView& f = from.column[c];
    gknn::expr::ColumnView& t = to.column[c];
    std::memcpy(t.data, f.data, topk_wire_value_bytes(columns[c]) * n);
    std::memcpy(t.nulls, f.nulls, n);
    if (f.dims) std::memcpy(t.dims, f.dims, 4 * n);
  }
  to.n = n;
}

}  // namespace gknn_service
