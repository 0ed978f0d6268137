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

#include "am/heap_id.h"
#include "ivfpq_format.h"
#include "pg.h"

extern "C" {
#include "storage/block.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
}

// Page kinds, the metapage and special space structs, the sizes derived
// from them and the checks every reader runs: ivfpq_format.h (no PostgreSQL).

inline IvfpqPageOpaque* ivfpq_opaque(Page page) {
  return reinterpret_cast<IvfpqPageOpaque*>(PageGetSpecialPointer(page));
}
inline IvfpqMeta* ivfpq_meta(Page page) { return reinterpret_cast<IvfpqMeta*>(PageGetContents(page)); }

// A list item: the heap TID, then the code (absent in the TID-only chains),
// then, where the index stores vectors (format 2), the vector's dim elements
// (float or binary16) from a 4-byte boundary.
inline Size ivfpq_vector_offset(int code_size) { return TYPEALIGN(4, sizeof(ItemPointerData) + code_size); }
inline Size ivfpq_item_size(int code_size, int vector_dim = 0, IvfpqElement element = kIvfpqFloat32) {
  return vector_dim > 0 ? ivfpq_vector_offset(code_size) + ivfpq_element_bytes(element, vector_dim)
                        : sizeof(ItemPointerData) + code_size;
}
// The item size of a list chain of an index with this metapage.
inline Size ivfpq_list_item_size(const IvfpqMeta& meta) {
  return ivfpq_item_size(meta.code_size, meta.stores_vectors ? meta.dim : 0, ivfpq_meta_element(meta));
}

// Heap TIDs as the core's int64 ids: am/heap_id.h.

// Page construction.
void ivfpq_init_page(Page page, IvfpqPageKind kind, BlockNumber prev);
void ivfpq_init_meta_page(Page page, const IvfpqMeta& meta);
// pd_lower after `bytes` of contents (lets full-page images skip the hole).
void ivfpq_set_contents_size(Page page, Size bytes);

// The metapage's change log (ivfpq_format.h; ivfpq_log.cpp). A new log
// whose records start after generation `from` (pd_lower extended over it).
void ivfpq_log_init(Page metapage, uint64 from);
// Records the change that made the metapage's (already bumped) generation;
// on a metapage without a log, starts one first. Call on the page
// registered in the change's Generic WAL record.
void ivfpq_log_change(Page metapage, int32 chain, BlockNumber block, OffsetNumber offset, IvfpqLogKind kind);

// A new block at the end of the index, exclusively locked, not initialised
// (under the relation extension lock).
Buffer ivfpq_new_buffer(Relation index);

// Every reader checks a page (ivfpq_format.h) before it trusts anything in
// it; a page that fails is an ERROR with SQLSTATE XX002 (index corrupted),
// never a wild read or a block number followed past the end of the index.

// The metapage, checked (magic, version: ERROR when it is not a gpu_ivfpq
// index or is of another version; then every parameter and block range),
// copied out under a share lock.
void ivfpq_read_meta(Relation index, IvfpqMeta* out);
// Checks a metapage's contents (the same ERRORs), e.g. one locked in place.
void ivfpq_check_meta(Relation index, const IvfpqMeta* meta);

// The checks of ivfpq_format.h on a locked page of block `blk`. *nblocks is
// the index's length as last read (0: not yet): a block number past it is
// checked again against the current length (inserts extend the index)
// before it counts as corruption.
void ivfpq_check_list_page(Relation index, BlockNumber blk, Page page, Size item_size, BlockNumber* nblocks);
void ivfpq_check_directory_page(Relation index, const IvfpqMeta& meta, BlockNumber blk, Page page,
                                BlockNumber* nblocks);
// ERROR XX002 naming the index, the block and the problem.
[[noreturn]] void ivfpq_corrupted(Relation index, BlockNumber blk, const char* problem);

// Reads `count` floats stored from block `start` on.
void ivfpq_read_floats(Relation index, BlockNumber start, float* dst, int64 count);
// The directory's entry for `list`: the list's last page or InvalidBlockNumber.
BlockNumber ivfpq_dir_block_of(const IvfpqMeta& meta, int list);
BlockNumber ivfpq_read_dir_entry(Relation index, const IvfpqMeta& meta, int list);
// All directory entries (lists of them), palloc'd.
BlockNumber* ivfpq_read_directory(Relation index, const IvfpqMeta& meta);

// A walk down one chain (a list, pending or NULLs), from its last page to
// its first (ivfpq_chain.cpp): each ivfpq_chain_next returns the next page's
// buffer share-locked and checked as a list page of `item_size` items (the
// caller unlocks and releases it), or InvalidBuffer past the first page. A
// chain longer than the index (a loop) is an ERROR XX002 too.
struct IvfpqChainWalk {
  Relation index;
  BufferAccessStrategy strategy;
  Size item_size;
  BlockNumber next;
  BlockNumber nblocks;
  int64 pages;
};
void ivfpq_chain_begin(IvfpqChainWalk* w, Relation index, BlockNumber last, Size item_size,
                       BufferAccessStrategy strategy = nullptr);
Buffer ivfpq_chain_next(IvfpqChainWalk* w);

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
