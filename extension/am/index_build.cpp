// The ambuild frame both index access methods share (index_build.h).
#include "am/index_build.h"

#include <cstring>

#include "service/service.h"

extern "C" {
#include "access/xloginsert.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
}

void index_build_begin(Relation index) {
  if (RelationGetNumberOfBlocks(index) != 0)
    elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));
  // The service's images of this index are stale once this transaction
  // commits.
  gknn_service_forget_index(RelationGetRelid(index));
}

BlockNumber index_build_append_page(Relation index, Page page) {
  Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  memcpy(BufferGetPage(buf), page, BLCKSZ);
  MarkBufferDirty(buf);
  BlockNumber blk = BufferGetBlockNumber(buf);
  UnlockReleaseBuffer(buf);
  return blk;
}

void index_build_overwrite_page(Relation index, BlockNumber blk, Page page) {
  Buffer buf = ReadBuffer(index, blk);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  memcpy(BufferGetPage(buf), page, BLCKSZ);
  MarkBufferDirty(buf);
  UnlockReleaseBuffer(buf);
}

IndexBuildResult* index_build_finish(Relation index, int64 wal_phase, double heap_tuples,
                                     double index_tuples) {
  if (RelationNeedsWAL(index)) {
    pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, wal_phase);
    log_newpage_range(index, MAIN_FORKNUM, 0, RelationGetNumberOfBlocks(index), true);
  }
  IndexBuildResult* result = static_cast<IndexBuildResult*>(palloc(sizeof(IndexBuildResult)));
  result->heap_tuples = heap_tuples;
  result->index_tuples = index_tuples;
  return result;
}
