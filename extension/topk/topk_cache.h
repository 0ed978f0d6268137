// The backend's side of GpuTopK's table cache (topk_cache.cpp): whether a
// scan may use it, and what the scan reads for it: the visibility map (its
// pages' LSNs and all-visible bits) and the heap pages the service asks it
// to check. The entries live in the GPU service (service_topk_cache.cpp says
// why a block may be trusted without being read); without the service there
// is no cache.
#pragma once

#include "topk.h"

extern "C" {
#include "access/xlogdefs.h"
#include "executor/tuptable.h"
#include "storage/buf.h"
#include "storage/bufmgr.h"
#include "storage/block.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
}

extern int gknn_topk_cache_mb;  // GUC gknn.topk_cache_mb: the service's cache budget, 0 = off

// Whether this scan may use the cache: the GUC on, the service preloaded, a
// permanent heap table whose relfilenode was not made in this transaction,
// an MVCC snapshot outside recovery, not SERIALIZABLE, no
// old_snapshot_threshold (whose "snapshot too old" a page read raises).
bool topk_cache_usable(Relation rel, Snapshot snapshot);

// A scan's columns widened to those of the entry that holds them all (the
// fewest such), as the service published its entries: the scan then probes
// that entry's key and deforms its other columns too (its program does not
// read them). Unchanged when there is none.
void topk_cache_widen(Relation rel, TopKEmitter* em);

// Heap blocks per visibility map page.
int64 topk_vm_span(void);

// The visibility map of the first `nblocks` blocks: one LSN per map page
// (read with its bits under its share lock; 0 where the map has no such
// page) and one all-visible bit per block. palloc'd.
struct TopKVmRead {
  int64 nblocks, nvm;
  uint64* vm_lsn;
  uint8* bits;
};
void topk_read_vm(Relation rel, BlockNumber nblocks, TopKVmRead* out);

// The page checks a hit asks for: for each block of `map` (map_blocks of
// them) marked 2, in block order, its page LSN when still all-visible, else
// 0 (read under the buffer's share lock). n of them, palloc'd.
uint64* topk_check_pages(Relation rel, const uint8* map, int64 map_blocks, int64 n);

// A fill's page: block `blk` copied into `copy` (BLCKSZ) when, under its
// share lock, PD_ALL_VISIBLE and its map bit are set (a change clears the
// bit under the exclusive lock, so bit and page go together); returns its
// LSN, or 0 when it is not kept. *vmbuf: the map page kept pinned.
uint64 topk_copy_all_visible(Relation rel, BlockNumber blk, Buffer* vmbuf, BufferAccessStrategy strategy,
                             char* copy);
// Rows per kept batch of a fill (a segment of the entry: a changed block
// sends its whole segment back to the heap): about 1/64 of the table,
// 4096 to 65536 rows (fewer segments rank faster), at most `capacity`.
int64 topk_cache_segment_rows(Relation rel, int64 capacity);
// Rows (LP_NORMAL items) of a page.
int topk_page_rows(const char* page);

// From topk_exec.cpp, shared with gknn_cache_table(): one heap row into
// batch row r (the emitter's columns), and the rows per batch of a service
// session of these columns.
void topk_deform_row(const TopKEmitter* em, TupleTableSlot* slot, gknn::expr::BatchView* b, int64 r);
int64 topk_service_capacity(const TopKEmitter* em);

inline bool topk_bit(const uint8* bits, int64 b) { return (bits[b >> 3] >> (b & 7)) & 1; }
