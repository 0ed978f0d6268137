// GpuTopK's table cache (DESIGN.md stage 5, first step): the columns a
// serial GpuTopK ranks, kept per backend where it ranks them (device memory
// on a GPU, host memory on the CPU) for the rows of the table's all-visible
// pages, so a later query of the same columns moves no table data: it
// checks every cached page instead of scanning it, ranks the kept rows where
// they are, and scans from the heap only the pages that were not cached.
//
// Why a page check is enough (PostgreSQL still decides visibility):
// - Only pages with PD_ALL_VISIBLE are cached, read under the buffer's
//   share lock together with their LSN: every tuple on them is visible to
//   every snapshot (not to a standby's: no cache in recovery).
// - Any change to a heap page of a WAL-logged table (insert, update, delete,
//   prune, freeze) writes WAL and sets a newer LSN, and clearing
//   PD_ALL_VISIBLE comes with it; LSNs only grow. So a page whose LSN and
//   flag are as cached holds the cached rows and nothing else. Unlogged and
//   temporary tables (no LSNs), and tables created without WAL in this
//   transaction, are never cached.
// - The relation is matched by OID and relfilenode (TRUNCATE, VACUUM FULL,
//   CLUSTER, rewrites: a new relfilenode); a table shorter than cached or a
//   page that changed drops the entry, and the query rebuilds it.
// - SERIALIZABLE transactions scan (PostgreSQL's heap scan takes the
//   predicate locks), and so do parallel plans and quals run in PostgreSQL.
// The rows selected are then fetched by TID under the query's snapshot, as
// without the cache.
#include "topk_cache.h"

#include "core_call.h"

extern "C" {
#include "access/heapam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

int gknn_topk_cache_mb = 0;

struct TopKCacheEntry {
  Oid relid;
  RelFileNode node;
  int device;
  int ncolumns;
  AttrNumber attnos[gknn::expr::kMaxColumns];
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  BlockNumber nblocks;  // the table's length when built
  XLogRecPtr* lsn;      // per block; InvalidXLogRecPtr: not cached (scanned every time)
  Buffer* recent;       // per block: the buffer it was last seen in (ReadRecentBuffer skips the lookup)
  gknn::expr::ResidentBatches* store;
  int64 rows;
  Size bytes;
  uint64 used;  // for eviction: larger is more recent
};

namespace {

constexpr int kMaxEntries = 8;
TopKCacheEntry* entries[kMaxEntries];
uint64 use_clock = 0;

Size limit_bytes() { return Size(gknn_topk_cache_mb) * 1024 * 1024; }

void drop(int i) {
  TopKCacheEntry* e = entries[i];
  entries[i] = nullptr;
  if (!e) return;
  gknn_pg::core_call([&] { delete e->store; });
  pfree(e->lsn);
  pfree(e->recent);
  pfree(e);
}

bool same_columns(const TopKCacheEntry* e, const TopKEmitter* em) {
  if (e->ncolumns != em->ncolumns) return false;
  for (int c = 0; c < em->ncolumns; ++c)
    if (e->attnos[c] != em->attnos[c] || e->columns[c].type != em->columns[c].type ||
        e->columns[c].dim != em->columns[c].dim)
      return false;
  return true;
}

// The least recently used entry's slot, -1 when there is none.
int least_recent() {
  int oldest = -1;
  for (int i = 0; i < kMaxEntries; ++i)
    if (entries[i] && (oldest < 0 || entries[i]->used < entries[oldest]->used)) oldest = i;
  return oldest;
}

Size used_bytes() {
  Size n = 0;
  for (TopKCacheEntry* e : entries)
    if (e) n += e->bytes;
  return n;
}

// Whether every cached page still has the LSN and the all-visible flag it
// was cached with.
bool pages_unchanged(Relation rel, const TopKCacheEntry* e) {
  BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
  bool same = true;
  for (BlockNumber b = 0; b < e->nblocks && same; ++b) {
    if (e->lsn[b] == InvalidXLogRecPtr) continue;
    if ((b & 1023) == 0) CHECK_FOR_INTERRUPTS();
    Buffer buf = e->recent[b];
    if (!BufferIsValid(buf) || !ReadRecentBuffer(rel->rd_node, MAIN_FORKNUM, b, buf)) {
      buf = ReadBufferExtended(rel, MAIN_FORKNUM, b, RBM_NORMAL, strategy);
      e->recent[b] = buf;
    }
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    same = PageIsAllVisible(page) && PageGetLSN(page) == e->lsn[b];
    UnlockReleaseBuffer(buf);
  }
  FreeAccessStrategy(strategy);
  return same;
}

}  // namespace

bool topk_cache_usable(Relation rel, Snapshot snapshot) {
  return gknn_topk_cache_mb > 0 && rel->rd_rel->relkind == RELKIND_RELATION &&
         rel->rd_tableam == GetHeapamTableAmRoutine() && RelationNeedsWAL(rel) && IsMVCCSnapshot(snapshot) &&
         !snapshot->takenDuringRecovery && !RecoveryInProgress() && !IsolationIsSerializable();
}

TopKCacheEntry* topk_cache_lookup(Relation rel, const TopKEmitter* em, int device) {
  const BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
  for (int i = 0; i < kMaxEntries; ++i) {
    TopKCacheEntry* e = entries[i];
    if (!e || e->relid != RelationGetRelid(rel)) continue;
    if (!RelFileNodeEquals(e->node, rel->rd_node) || e->nblocks > nblocks) {
      drop(i);  // another relfilenode, or pages gone: never valid again
      continue;
    }
    if (e->device != device || !same_columns(e, em)) continue;
    if (!pages_unchanged(rel, e)) {
      drop(i);
      return nullptr;
    }
    e->used = ++use_clock;
    return e;
  }
  return nullptr;
}

const gknn::expr::ResidentBatches* topk_cache_store(const TopKCacheEntry* e) { return e->store; }
int64 topk_cache_rows(const TopKCacheEntry* e) { return e->rows; }

const XLogRecPtr* topk_cache_lsns(const TopKCacheEntry* e, BlockNumber* nblocks) {
  *nblocks = e->nblocks;
  return e->lsn;
}

Size topk_cache_make_room(void) {
  const Size limit = limit_bytes();
  Size used = used_bytes();
  // Least recently used first, until half the limit is free (or all is).
  while (used > limit / 2) {
    const int oldest = least_recent();
    if (oldest < 0) break;
    used -= entries[oldest]->bytes;
    drop(oldest);
  }
  return limit > used ? limit - used : 0;
}

void topk_cache_add(Relation rel, const TopKEmitter* em, int device, BlockNumber nblocks,
                    const XLogRecPtr* lsn, gknn::expr::ResidentBatches* store) {
  // Nothing here raises before the entry owns the store.
  XLogRecPtr* kept = static_cast<XLogRecPtr*>(
      MemoryContextAllocExtended(TopMemoryContext, sizeof(XLogRecPtr) * Max(nblocks, BlockNumber(1)),
                                 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  Buffer* recent = kept ? static_cast<Buffer*>(MemoryContextAllocExtended(
                              TopMemoryContext, sizeof(Buffer) * Max(nblocks, BlockNumber(1)),
                              MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM | MCXT_ALLOC_ZERO))
                        : nullptr;
  TopKCacheEntry* e =
      recent ? static_cast<TopKCacheEntry*>(MemoryContextAllocExtended(
                   TopMemoryContext, sizeof(TopKCacheEntry), MCXT_ALLOC_ZERO | MCXT_ALLOC_NO_OOM))
             : nullptr;
  if (!e) {
    if (kept) pfree(kept);
    if (recent) pfree(recent);
    gknn_pg::core_call([&] { delete store; });
    return;
  }
  memcpy(kept, lsn, sizeof(XLogRecPtr) * nblocks);
  int slot = -1;
  for (int i = 0; i < kMaxEntries && slot < 0; ++i)
    if (!entries[i]) slot = i;
  if (slot < 0) {  // full: the least recently used goes
    slot = least_recent();
    drop(slot);
  }
  e->relid = RelationGetRelid(rel);
  e->node = rel->rd_node;
  e->device = device;
  e->ncolumns = em->ncolumns;
  for (int c = 0; c < em->ncolumns; ++c) {
    e->attnos[c] = em->attnos[c];
    e->columns[c] = em->columns[c];
  }
  e->nblocks = nblocks;
  e->lsn = kept;
  e->recent = recent;  // InvalidBuffer (0): the first check looks each page up
  e->store = store;
  gknn_pg::core_call([&] {
    e->rows = store->rows();
    e->bytes = store->bytes();
  });
  e->used = ++use_clock;
  entries[slot] = e;
}

void topk_cache_reset(void) {
  for (int i = 0; i < kMaxEntries; ++i) drop(i);
}

extern "C" {

// gknn_topk_cache(): this backend's entries of tables the current user may
// read (after SET ROLE, or a REVOKE, the others are not shown: an entry
// tells a table's row count).
PG_FUNCTION_INFO_V1(gknn_topk_cache);
Datum gknn_topk_cache(PG_FUNCTION_ARGS) {
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  InitMaterializedSRF(fcinfo, 0);
  for (const TopKCacheEntry* e : entries) {
    if (!e) continue;
    bool missing = false;
    if (pg_class_aclcheck_ext(e->relid, GetUserId(), ACL_SELECT, &missing) != ACLCHECK_OK && !missing)
      continue;
    Datum* attnos = static_cast<Datum*>(palloc(sizeof(Datum) * Max(e->ncolumns, 1)));
    for (int c = 0; c < e->ncolumns; ++c) attnos[c] = Int16GetDatum(e->attnos[c]);
    int64 cached = 0;
    for (BlockNumber b = 0; b < e->nblocks; ++b) cached += e->lsn[b] != InvalidXLogRecPtr;
    Datum values[6] = {
        ObjectIdGetDatum(e->relid),
        PointerGetDatum(construct_array(attnos, e->ncolumns, INT2OID, 2, true, TYPALIGN_SHORT)),
        CStringGetTextDatum(e->device >= 0 ? psprintf("gpu %d", e->device) : "cpu"),
        Int64GetDatum(e->rows),
        Int64GetDatum(cached),
        Int64GetDatum(int64(e->bytes))};
    bool nulls[6] = {false, false, false, false, false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  }
  return (Datum)0;
}

// gknn_topk_cache_reset(): drops this backend's entries; returns how many.
// Any user may call it: the cache is this backend's own (as DISCARD is), and
// dropping it only frees memory. (A cache shared by the cluster, as the GPU
// service will keep, needs a privilege to reset.)
PG_FUNCTION_INFO_V1(gknn_topk_cache_reset);
Datum gknn_topk_cache_reset(PG_FUNCTION_ARGS) {
  int n = 0;
  for (const TopKCacheEntry* e : entries) n += e != nullptr;
  topk_cache_reset();
  PG_RETURN_INT32(n);
}
}
