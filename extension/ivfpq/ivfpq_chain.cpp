// gpu_ivfpq: walking a chain of list pages from its last page back to its
// first, every page checked before its back link is followed
// (ivfpq_pages.h: IvfpqChainWalk).
#include "ivfpq.h"

void ivfpq_chain_begin(IvfpqChainWalk* w, Relation index, BlockNumber last, Size item_size,
                       BufferAccessStrategy strategy) {
  w->index = index;
  w->strategy = strategy;
  w->item_size = item_size;
  w->next = last;
  w->nblocks = 0;  // read on the first link that needs it
  w->pages = 0;
}

Buffer ivfpq_chain_next(IvfpqChainWalk* w) {
  if (!BlockNumberIsValid(w->next)) return InvalidBuffer;
  BlockNumber blk = w->next;
  // The caller's block numbers (a directory entry, the metapage's chain
  // heads) were checked against the index's length; each back link is
  // checked below before it is followed.
  Buffer buf = ReadBufferExtended(w->index, MAIN_FORKNUM, blk, RBM_NORMAL, w->strategy);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  ivfpq_check_list_page(w->index, blk, page, w->item_size, &w->nblocks);
  if (++w->pages > w->nblocks) {
    w->nblocks = RelationGetNumberOfBlocks(w->index);
    if (w->pages > w->nblocks) ivfpq_corrupted(w->index, blk, "a list chain loops");
  }
  w->next = ivfpq_opaque(page)->prev;
  return buf;
}
