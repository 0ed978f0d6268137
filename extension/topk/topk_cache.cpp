// The backend's side of GpuTopK's table cache (topk_cache.h). The service
// keeps the entries and decides from what this file reads which blocks a
// query ranks from an entry: see service_topk_cache.cpp for the argument.
// The visibility map's format (two bits per heap block after the page
// header, the all-visible bit first) is PostgreSQL's on-disk format
// (access/visibilitymapdefs.h names the bits).
#include "topk_cache.h"

#include "service/service.h"

extern "C" {
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/visibilitymapdefs.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

int gknn_topk_cache_mb = 0;

namespace {

constexpr int64 kMapBytes = BLCKSZ - MAXALIGN(SizeOfPageHeaderData);  // bitmap bytes of a map page
constexpr int64 kBlocksPerByte = 4;                                   // two bits per heap block

BlockNumber vm_pages(Relation rel) {
  SMgrRelation smgr = RelationGetSmgr(rel);
  return smgrexists(smgr, VISIBILITYMAP_FORKNUM) ? smgrnblocks(smgr, VISIBILITYMAP_FORKNUM) : 0;
}

uint64 read_vm_page(Relation rel, int64 v, BlockNumber vm_nblocks, BlockNumber nblocks, uint8* bits) {
  const int64 first = v * topk_vm_span(), end = Min(int64(nblocks), first + topk_vm_span());
  for (int64 b = first; b < end; ++b) bits[b >> 3] &= ~(1 << (b & 7));
  if (v >= int64(vm_nblocks)) return 0;
  Buffer buf =
      ReadBufferExtended(rel, VISIBILITYMAP_FORKNUM, static_cast<BlockNumber>(v), RBM_ZERO_ON_ERROR, nullptr);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  uint64 lsn = 0;
  if (!PageIsNew(page)) {
    lsn = PageGetLSN(page);
    const uint8* map = reinterpret_cast<const uint8*>(PageGetContents(page));
    for (int64 b = first; b < end; ++b) {
      const int64 i = b - first;
      if ((map[i / kBlocksPerByte] >> (2 * (i % kBlocksPerByte))) & VISIBILITYMAP_ALL_VISIBLE)
        bits[b >> 3] |= 1 << (b & 7);
    }
  }
  UnlockReleaseBuffer(buf);
  return lsn;
}

}  // namespace

void topk_cache_widen(Relation rel, TopKEmitter* em) {
  int n = 0;
  int16 attnos[gknn::expr::kMaxColumns];
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  if (!gknn_service_topk_cache_columns(RelationGetRelid(rel), rel->rd_node, em->ncolumns, em->attnos,
                                       em->columns, &n, attnos, columns) ||
      n <= em->ncolumns)
    return;
  for (int c = 0; c < n; ++c) {
    bool have = false;
    for (int j = 0; j < em->ncolumns && !have; ++j) have = em->attnos[j] == attnos[c];
    if (have) continue;
    em->attnos[em->ncolumns] = attnos[c];
    em->columns[em->ncolumns++] = columns[c];
  }
  topk_emitter_sort_columns(em);
}

int64 topk_vm_span(void) { return kMapBytes * kBlocksPerByte; }

bool topk_cache_usable(Relation rel, Snapshot snapshot) {
  return gknn_topk_cache_mb > 0 && gknn_service_preloaded() && rel->rd_rel->relkind == RELKIND_RELATION &&
         rel->rd_tableam == GetHeapamTableAmRoutine() && RelationNeedsWAL(rel) &&
         rel->rd_createSubid == InvalidSubTransactionId &&
         rel->rd_firstRelfilenodeSubid == InvalidSubTransactionId && IsMVCCSnapshot(snapshot) &&
         !snapshot->takenDuringRecovery && !RecoveryInProgress() && !IsolationIsSerializable() &&
         old_snapshot_threshold < 0;  // else pages an old snapshot must not read would not raise its error
}

void topk_read_vm(Relation rel, BlockNumber nblocks, TopKVmRead* out) {
  out->nblocks = nblocks;
  out->nvm = (int64(nblocks) + topk_vm_span() - 1) / topk_vm_span();
  out->vm_lsn = static_cast<uint64*>(palloc0(sizeof(uint64) * Max(out->nvm, int64{1})));
  out->bits = static_cast<uint8*>(palloc_extended(Max((int64(nblocks) + 7) / 8, int64{1}), MCXT_ALLOC_HUGE));
  const BlockNumber vm_nblocks = vm_pages(rel);
  for (int64 v = 0; v < out->nvm; ++v) out->vm_lsn[v] = read_vm_page(rel, v, vm_nblocks, nblocks, out->bits);
}

uint64* topk_check_pages(Relation rel, const uint8* map, int64 map_blocks, int64 n) {
  uint64* lsn = static_cast<uint64*>(palloc_extended(sizeof(uint64) * Max(n, int64{1}), MCXT_ALLOC_HUGE));
  BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
  int64 i = 0;
  for (int64 b = 0; b < map_blocks && i < n; ++b) {
    if (map[b] != 2) continue;
    if ((i & 255) == 0) CHECK_FOR_INTERRUPTS();
    Buffer buf = ReadBufferExtended(rel, MAIN_FORKNUM, static_cast<BlockNumber>(b), RBM_NORMAL, strategy);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    lsn[i++] = PageIsAllVisible(page) ? PageGetLSN(page) : 0;
    UnlockReleaseBuffer(buf);
  }
  FreeAccessStrategy(strategy);
  if (i != n)
    elog(ERROR, "GpuTopK: the table cache asked for %lld page checks, found %lld", (long long)n,
         (long long)i);
  return lsn;
}

uint64 topk_copy_all_visible(Relation rel, BlockNumber blk, Buffer* vmbuf, BufferAccessStrategy strategy,
                             char* copy) {
  Buffer buf = ReadBufferExtended(rel, MAIN_FORKNUM, blk, RBM_NORMAL, strategy);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  uint64 lsn = 0;
  if (PageIsAllVisible(page) && VM_ALL_VISIBLE(rel, blk, vmbuf)) {
    lsn = PageGetLSN(page);
    memcpy(copy, page, BLCKSZ);
  }
  UnlockReleaseBuffer(buf);
  return lsn;
}

int topk_page_rows(const char* page) {
  Page p = const_cast<char*>(page);
  const OffsetNumber maxoff = PageGetMaxOffsetNumber(p);
  int n = 0;
  for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off))
    n += ItemIdIsNormal(PageGetItemId(p, off));
  return n;
}

int64 topk_cache_segment_rows(Relation rel, int64 capacity) {
  const double tuples =
      rel->rd_rel->reltuples > 0 ? rel->rd_rel->reltuples : 100.0 * RelationGetNumberOfBlocks(rel);
  const int64 rows = Max(int64{4096}, Min(int64{65536}, static_cast<int64>(tuples / 64)));
  return Min(rows, capacity);
}
