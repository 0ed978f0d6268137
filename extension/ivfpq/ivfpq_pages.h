// gpu_ivfpq: the on-disk layout. One format whichever device built the index.
//
//   block 0            metapage: magic, version, parameters, generation,
//                      where everything else lives
//   centroid pages     lists x dim floats, contiguous blocks, packed in order
//   codebook pages     m x 2^nbits x (dim/m) floats, contiguous blocks
//   directory pages    one BlockNumber per list: the list's LAST page
//   list pages         items (heap TID + PQ code [+ the full vector]), chained
//                      backwards: each page's special space names the page
//                      before it
//
// Chains run backwards so that appending never rewrites an older page: an
// insert adds to the last page or starts a new one pointing back at it and
// updates the directory (or the metapage for the two TID-only chains).
// Two more chains hold TIDs without codes: `pending` (rows inserted while the
// index has no quantizer, i.e. it was built on an empty table; searched
// exactly) and `nulls` (rows whose vector is NULL; returned last, as a sort
// places NULL distances last).
//
// Every change after the build goes through Generic WAL and bumps the
// metapage's generation, which tells a cached image it is stale.
#pragma once

#include "pg.h"

extern "C" {
#include "storage/block.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
}

constexpr uint32 kIvfpqMagic = 0x47495650;  // "GIVP"
// Version 2 stores each entry's full vector in its list item (when an item
// with it fits a page), so that the exact re-rank needs no heap access.
constexpr uint32 kIvfpqVersion = 2;
constexpr BlockNumber kIvfpqMetaBlock = 0;
constexpr uint16 kIvfpqPageId = 0xFF8A;  // in every page's special space

enum IvfpqPageKind : uint16 {
  kIvfpqPageMeta = 1,
  kIvfpqPageFloats = 2,
  kIvfpqPageDirectory = 3,
  kIvfpqPageList = 4,
};

struct IvfpqPageOpaque {
  BlockNumber prev;  // list pages: the page before this one in its chain
  uint16 kind;       // IvfpqPageKind
  uint16 page_id;    // kIvfpqPageId
};

struct IvfpqMeta {
  uint32 magic;
  uint32 version;
  int32 trained;  // 0: no quantizer yet (built on no rows): inserts go to `pending`
  int32 dim;      // 0 while unknown (untrained, column without typmod)
  int32 lists;    // after clamping to the rows
  int32 m;
  int32 nbits;
  int32 metric;  // gknn::Metric
  int32 kmeans_iters;
  int32 code_size;  // bytes of one PQ code
  uint64 seed;
  uint64 generation;  // bumped by every change after the build
  BlockNumber centroid_start;
  uint32 centroid_pages;
  BlockNumber codebook_start;
  uint32 codebook_pages;
  BlockNumber directory_start;
  uint32 directory_pages;
  BlockNumber pending_last;  // TID-only chain: rows inserted while untrained
  BlockNumber null_last;     // TID-only chain: rows whose vector is NULL
  int64 build_rows;          // non-NULL vectors seen by the build
  int64 sample_rows;         // rows the quantizer was trained on
  int32 stores_vectors;      // list items carry the full vector (dim floats)
};

inline IvfpqPageOpaque* ivfpq_opaque(Page page) {
  return reinterpret_cast<IvfpqPageOpaque*>(PageGetSpecialPointer(page));
}
inline IvfpqMeta* ivfpq_meta(Page page) { return reinterpret_cast<IvfpqMeta*>(PageGetContents(page)); }

// Bytes of page contents between the header and the special space.
constexpr Size kIvfpqContentBytes =
    BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(IvfpqPageOpaque));
constexpr Size kIvfpqFloatsPerPage = kIvfpqContentBytes / sizeof(float);
constexpr Size kIvfpqDirPerPage = kIvfpqContentBytes / sizeof(BlockNumber);

// A list item: the heap TID, then the code (absent in the TID-only chains),
// then, where the index stores vectors, the vector's dim floats from a 4-byte
// boundary.
inline Size ivfpq_vector_offset(int code_size) { return TYPEALIGN(4, sizeof(ItemPointerData) + code_size); }
inline Size ivfpq_item_size(int code_size, int vector_dim) {
  return vector_dim > 0 ? ivfpq_vector_offset(code_size) + sizeof(float) * vector_dim
                        : sizeof(ItemPointerData) + code_size;
}
// Whether items with `dim`-float vectors fit a list page (an index stores
// vectors where they do: up to about 2,000 dimensions).
inline bool ivfpq_vectors_fit(int code_size, int dim) {
  return MAXALIGN(ivfpq_item_size(code_size, dim)) + sizeof(ItemIdData) <= kIvfpqContentBytes;
}
// The largest code that fits on a page with room for a few items.
constexpr int kIvfpqMaxCodeSize = static_cast<int>(kIvfpqContentBytes / 4) - 16;

// Heap TIDs as the core's int64 ids (block << 16 | offset), as GpuTopK does.
inline int64 ivfpq_tid_to_id(const ItemPointerData* tid) {
  return (static_cast<int64>(ItemPointerGetBlockNumber(tid)) << 16) | ItemPointerGetOffsetNumber(tid);
}
inline void ivfpq_id_to_tid(int64 id, ItemPointerData* tid) {
  ItemPointerSet(tid, static_cast<BlockNumber>(id >> 16), static_cast<OffsetNumber>(id & 0xffff));
}

// Page construction.
void ivfpq_init_page(Page page, IvfpqPageKind kind, BlockNumber prev);
void ivfpq_init_meta_page(Page page, const IvfpqMeta& meta);
// pd_lower after `bytes` of contents (lets full-page images skip the hole).
void ivfpq_set_contents_size(Page page, Size bytes);

// A new block at the end of the index, exclusively locked, not initialised
// (under the relation extension lock).
Buffer ivfpq_new_buffer(Relation index);

// The metapage, checked (magic, version; ERROR when it is not a gpu_ivfpq
// index or is of another version), copied out under a share lock.
void ivfpq_read_meta(Relation index, IvfpqMeta* out);
// Checks a metapage's magic and version (ERROR with a clear message).
void ivfpq_check_meta(Relation index, const IvfpqMeta* meta);

// Reads `count` floats stored from block `start` on.
void ivfpq_read_floats(Relation index, BlockNumber start, float* dst, int64 count);
// The directory's entry for `list`: the list's last page or InvalidBlockNumber.
BlockNumber ivfpq_dir_block_of(const IvfpqMeta& meta, int list);
BlockNumber ivfpq_read_dir_entry(Relation index, const IvfpqMeta& meta, int list);
// All directory entries (lists of them), palloc'd.
BlockNumber* ivfpq_read_directory(Relation index, const IvfpqMeta& meta);

// The heap TID of item `off` of a list page.
inline ItemPointer ivfpq_item_tid(Page page, OffsetNumber off) {
  return reinterpret_cast<ItemPointer>(PageGetItem(page, PageGetItemId(page, off)));
}
inline const uint8* ivfpq_item_code(Page page, OffsetNumber off) {
  return reinterpret_cast<const uint8*>(PageGetItem(page, PageGetItemId(page, off))) +
         sizeof(ItemPointerData);
}
// The stored vector of item `off` (an index with stores_vectors).
inline const char* ivfpq_item_vector(Page page, OffsetNumber off, int code_size) {
  return static_cast<const char*>(PageGetItem(page, PageGetItemId(page, off))) +
         ivfpq_vector_offset(code_size);
}
