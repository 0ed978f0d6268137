// gpu_ivfpq VACUUM: remove the items whose heap TIDs are dead from every
// chain (lists, pending, NULLs). A page with dead items is rewritten under
// the metapage's exclusive lock with the generation bumped and the page
// named in the change log in the same Generic WAL record, so a cached image
// is never older than the pages without knowing it, and brings itself up to
// date by reading that page again. Emptied pages stay in their chains (reused by later
// inserts only at a chain's end).
#include "ivfpq.h"

extern "C" {
#include "access/generic_xlog.h"
#include "commands/vacuum.h"
}

namespace {

// Chain heads: every list's last page, then pending and NULLs; and the
// size of their items.
BlockNumber* chain_heads(Relation index, const IvfpqMeta& meta, int* n, Size** item_sizes) {
  int lists = meta.trained ? meta.lists : 0;
  BlockNumber* heads = static_cast<BlockNumber*>(palloc(sizeof(BlockNumber) * (lists + 2)));
  Size* sizes = static_cast<Size*>(palloc(sizeof(Size) * (lists + 2)));
  if (lists > 0) {
    BlockNumber* dir = ivfpq_read_directory(index, meta);
    memcpy(heads, dir, sizeof(BlockNumber) * lists);
    pfree(dir);
  }
  for (int l = 0; l < lists; ++l) sizes[l] = ivfpq_list_item_size(meta);
  heads[lists] = meta.pending_last;
  heads[lists + 1] = meta.null_last;
  sizes[lists] = sizes[lists + 1] = ivfpq_item_size(0);
  *n = lists + 2;
  *item_sizes = sizes;
  return heads;
}

// The change log's name of chain c of chain_heads(): a list, pending, NULLs.
int32 chain_id(int c, int nchains) {
  return c < nchains - 2 ? c : c == nchains - 2 ? kIvfpqChainPending : kIvfpqChainNulls;
}

// Calls fn(buf, chain) for every page of every chain (chain: its change log
// name), newest first, with `buf` share-locked; fn may relock it but leaves
// it locked.
template <typename Fn>
void for_each_chain_page(Relation index, BufferAccessStrategy strategy, Fn fn) {
  IvfpqMeta meta;
  ivfpq_read_meta(index, &meta);
  int nchains;
  Size* item_sizes;
  BlockNumber* heads = chain_heads(index, meta, &nchains, &item_sizes);
  for (int c = 0; c < nchains; ++c) {
    IvfpqChainWalk walk;
    ivfpq_chain_begin(&walk, index, heads[c], item_sizes[c], strategy);
    for (;;) {
      vacuum_delay_point();
      Buffer buf = ivfpq_chain_next(&walk);
      if (!BufferIsValid(buf)) break;
      fn(buf, chain_id(c, nchains));
      UnlockReleaseBuffer(buf);
    }
  }
  pfree(heads);
  pfree(item_sizes);
}

// Removes the items `dead` (ascending offsets) from a list page by
// rebuilding it with the others, in order. Not PageIndexMultiDelete: it
// sizes stack arrays by MaxIndexTuplesPerPage (408, for index tuples of 16
// bytes or more), and a list page holds up to 680 items of TID + a short
// code, which overflowed them (a crashed backend on VACUUM).
void delete_items(Page page, const OffsetNumber* dead, int ndead) {
  PGAlignedBlock copy;
  memcpy(copy.data, page, BLCKSZ);
  Page old = copy.data;
  ivfpq_init_page(page, kIvfpqPageList, ivfpq_opaque(old)->prev);
  OffsetNumber max = PageGetMaxOffsetNumber(old);
  int d = 0;
  for (OffsetNumber off = FirstOffsetNumber; off <= max; ++off) {
    if (d < ndead && dead[d] == off) {
      ++d;
      continue;
    }
    ItemId id = PageGetItemId(old, off);
    if (PageAddItem(page, PageGetItem(old, id), ItemIdGetLength(id), InvalidOffsetNumber, false, false) ==
        InvalidOffsetNumber)
      elog(ERROR, "gpu_ivfpq: could not keep an item of a list page");
  }
}

int collect_dead(Page page, IndexBulkDeleteCallback callback, void* state, OffsetNumber* dead) {
  int n = 0;
  OffsetNumber max = PageGetMaxOffsetNumber(page);
  for (OffsetNumber off = FirstOffsetNumber; off <= max; ++off)
    if (callback(ivfpq_item_tid(page, off), state)) dead[n++] = off;
  return n;
}

}  // namespace

IndexBulkDeleteResult* ivfpq_bulkdelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                        IndexBulkDeleteCallback callback, void* callback_state) {
  Relation index = info->index;
  if (stats == nullptr) stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
  OffsetNumber dead[MaxOffsetNumber];
  double remaining = 0;
  for_each_chain_page(index, info->strategy, [&](Buffer buf, int32 chain) {
    Page page = BufferGetPage(buf);
    int ndead = collect_dead(page, callback, callback_state, dead);
    OffsetNumber nitems = PageGetMaxOffsetNumber(page);
    if (ndead > 0) {
      // Lock order: metapage, then the list page.
      LockBuffer(buf, BUFFER_LOCK_UNLOCK);
      Buffer mbuf = ReadBufferExtended(index, MAIN_FORKNUM, kIvfpqMetaBlock, RBM_NORMAL, info->strategy);
      LockBuffer(mbuf, BUFFER_LOCK_EXCLUSIVE);
      LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
      page = BufferGetPage(buf);
      ndead = collect_dead(page, callback, callback_state, dead);
      nitems = PageGetMaxOffsetNumber(page);
      if (ndead > 0) {
        GenericXLogState* xs = GenericXLogStart(index);
        Page mpage = GenericXLogRegisterBuffer(xs, mbuf, 0);
        Page wpage = GenericXLogRegisterBuffer(xs, buf, 0);
        delete_items(wpage, dead, ndead);
        ivfpq_meta(mpage)->generation++;
        ivfpq_log_change(mpage, chain, BufferGetBlockNumber(buf), InvalidOffsetNumber, kIvfpqLogRewrite);
        GenericXLogFinish(xs);
      }
      UnlockReleaseBuffer(mbuf);
    }
    stats->tuples_removed += ndead;
    remaining += nitems - ndead;
  });
  stats->num_index_tuples = remaining;
  stats->num_pages = RelationGetNumberOfBlocks(index);
  stats->estimated_count = false;
  return stats;
}

IndexBulkDeleteResult* ivfpq_vacuumcleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats) {
  if (info->analyze_only) return stats;
  Relation index = info->index;
  if (stats == nullptr) {
    // No bulk delete ran: count the items.
    stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
    for_each_chain_page(index, info->strategy, [&](Buffer buf, int32) {
      stats->num_index_tuples += PageGetMaxOffsetNumber(BufferGetPage(buf));
    });
  }
  stats->num_pages = RelationGetNumberOfBlocks(index);
  stats->estimated_count = false;
  return stats;
}
