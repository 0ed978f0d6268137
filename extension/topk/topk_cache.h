// GpuTopK's table cache (topk_cache.cpp): per backend, the ranked columns of
// a table's all-visible pages, kept where GpuTopK ranks them.
#pragma once

#include "topk.h"

extern "C" {
#include "access/xlogdefs.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
}

extern int gknn_topk_cache_mb;  // GUC gknn.topk_cache_mb: the cache's size, 0 = off

struct TopKCacheEntry;

// Whether this scan may use the cache (see topk_cache.cpp for why these).
bool topk_cache_usable(Relation rel, Snapshot snapshot);
// The entry for these columns on `device`, its pages checked: null when
// there is none or it was stale (then dropped).
TopKCacheEntry* topk_cache_lookup(Relation rel, const TopKEmitter* em, int device);
const gknn::expr::ResidentBatches* topk_cache_store(const TopKCacheEntry* e);
int64 topk_cache_rows(const TopKCacheEntry* e);
// The entry's page LSNs for blocks [0, *nblocks): InvalidXLogRecPtr for a
// page whose rows are not in it (the heap scan reads those).
const XLogRecPtr* topk_cache_lsns(const TopKCacheEntry* e, BlockNumber* nblocks);
// Before a build (after a lookup found no entry of its columns): drops the
// least recently used entries; returns the bytes the new entry may take.
Size topk_cache_make_room(void);
// Registers a built entry: the pages' LSNs (InvalidXLogRecPtr: not cached)
// are copied; the entry owns the store from now on (freed if out of memory).
void topk_cache_add(Relation rel, const TopKEmitter* em, int device, BlockNumber nblocks,
                    const XLogRecPtr* lsn, gknn::expr::ResidentBatches* store);
// Drops every entry (gknn_topk_cache_reset()).
void topk_cache_reset(void);
