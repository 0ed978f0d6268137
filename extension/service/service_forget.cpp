// Images of dropped, truncated or rebuilt gpu_ivfpq and gpu_graph indexes leave the GPU
// service when the transaction that changed them commits, instead of staying
// resident until LRU eviction; so do the GpuTopK table cache entries of
// dropped tables (service_topk_cache.h; a table's other changes are the
// entry's own business: a new relfilenode drops it at the next probe).
//
// Backend side: an object access hook (OAT_DROP of a gpu_ivfpq or gpu_graph
// index or of a database, OAT_POST_ALTER of such an index) and ambuild (CREATE INDEX, REINDEX, TRUNCATE,
// VACUUM FULL, CLUSTER: the index gets new storage, or its storage is rebuilt in place) note the index in
// this backend's list; at commit (or PREPARE) a transaction callback puts the list in the service's queue in
// shared memory and sets the service's latch, fire and forget. An abort drops the list. Nothing here can
// raise an ERROR once the transaction has committed: the list is a fixed array, the queue a spinlock-guarded
// array; when either is full the request widens (every index of the database; every image loaded so far),
// which costs reloads, never a wrong answer.
//
// Service side: forget_dropped_images() drops the images of each queued
// index that were loaded at or before the commit that queued it. Images
// loaded later are of the new storage: the committing backend held its
// index lock until after it queued the request, so no image of the new
// index could be shipped before then. A drop that is rolled back never
// queues anything; one undone by ROLLBACK TO SAVEPOINT still does (the next
// scan ships the image again).
#include "service.h"
#include "service_forget.h"
#include "service_topk_cache.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/syscache.h"
}

namespace gknn_service {
namespace {

struct Pending {
  Oid database;
  Oid index;  // InvalidOid: every index of the database
};

constexpr int kMaxPending = 64;
Pending pending[kMaxPending];
int npending = 0;
bool pending_overflow = false;  // more than kMaxPending: this whole database
bool callback_registered = false;
object_access_hook_type prev_object_access = nullptr;

void clear_pending() {
  npending = 0;
  pending_overflow = false;
}

// Appends to the service's queue (or widens it when full) and wakes the
// service. Called after commit: raises nothing.
void publish_pending() {
  ServiceShared* ctl = shared();
  if (ctl == nullptr || (npending == 0 && !pending_overflow)) return;
  const int64 now = now_us();
  if (pending_overflow) {
    npending = 1;
    pending[0] = Pending{MyDatabaseId, InvalidOid};
  }
  SpinLockAcquire(&ctl->mutex);
  for (int i = 0; i < npending; ++i) {
    if (ctl->nforgets < kMaxForgets)
      ctl->forgets[ctl->nforgets++] = ForgetRequest{pending[i].database, pending[i].index, now};
    else
      ctl->forget_all_before_us = now;
  }
  Latch* latch = ctl->latch;
  SpinLockRelease(&ctl->mutex);
  if (latch) SetLatch(latch);
}

void on_xact(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PREPARE:  // an early drop is harmless: locks hold the index until it resolves
      publish_pending();
      clear_pending();
      break;
    case XACT_EVENT_ABORT:
      clear_pending();
      break;
    default:
      break;
  }
}

void note(Oid database, Oid index) {
  if (shared() == nullptr) return;
  if (!callback_registered) {
    RegisterXactCallback(on_xact, nullptr);
    callback_registered = true;
  }
  for (int i = 0; i < npending; ++i)
    if (pending[i].database == database && (pending[i].index == index || pending[i].index == InvalidOid))
      return;
  if (npending == kMaxPending) {
    pending_overflow = true;
    return;
  }
  pending[npending++] = Pending{database, index};
}

// A gpu_ivfpq or gpu_graph index: the kinds whose images the service holds.
bool is_gknn_index(Oid relid) {
  HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
  if (!HeapTupleIsValid(tup)) return false;
  Form_pg_class rel = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup));
  bool index = rel->relkind == RELKIND_INDEX;
  Oid am = rel->relam;
  ReleaseSysCache(tup);
  return index && (am == get_index_am_oid("gpu_ivfpq", true) || am == get_index_am_oid("gpu_graph", true));
}

// A table the GpuTopK table cache shows an entry of.
bool is_cached_table(Oid relid) {
  ServiceShared* ctl = shared();
  if (ctl == nullptr) return false;
  const int n = Min(ctl->ncache, kMaxShownCache);
  for (int i = 0; i < n; ++i)
    if (ctl->cache[i].database == MyDatabaseId && ctl->cache[i].relation == relid) return true;
  return false;
}

// OAT_DROP runs just before the object is deleted, in the dropping
// transaction (DROP INDEX, DROP TABLE, DROP ... CASCADE, REINDEX
// CONCURRENTLY's old index, a session's temporary tables at exit).
// OAT_POST_ALTER of an index covers ALTER INDEX ... SET TABLESPACE (new
// storage, copied); other ALTERs of it (a rename) cost one reload. A
// dropped table is noted when the service shows a cache entry of it (the
// list the service publishes, read without its lock: an entry missed is
// evicted later by LRU, never a wrong answer), so dropping many tables does
// not widen the request to the whole database.
void on_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id, void* arg) {
  if (prev_object_access) prev_object_access(access, class_id, object_id, sub_id, arg);
  if (access != OAT_DROP && access != OAT_POST_ALTER) return;
  if (class_id == RelationRelationId && sub_id == 0 && is_gknn_index(object_id))
    note(MyDatabaseId, object_id);
  else if (class_id == RelationRelationId && sub_id == 0 && access == OAT_DROP && is_cached_table(object_id))
    note(MyDatabaseId, object_id);
  else if (class_id == DatabaseRelationId && access == OAT_DROP)
    note(object_id, InvalidOid);
}

}  // namespace

bool forget_dropped_images(ServiceShared* ctl, ResidentImages* images) {
  // An unlocked peek first: the loop calls this on every pass (while it
  // polls too), and the lock is the one every backend's request takes.
  if (ctl->nforgets == 0 && ctl->forget_all_before_us == 0) return false;
  ForgetRequest taken[kMaxForgets];
  SpinLockAcquire(&ctl->mutex);
  const int n = ctl->nforgets;
  const int64 all_before = ctl->forget_all_before_us;
  memcpy(taken, ctl->forgets, sizeof(ForgetRequest) * n);
  ctl->nforgets = 0;
  ctl->forget_all_before_us = 0;
  SpinLockRelease(&ctl->mutex);
  int gone = 0;
  try {
    if (all_before > 0) gone += images->forget(0, 0, all_before) + topk_cache().forget(0, 0, all_before);
    for (int i = 0; i < n; ++i)
      gone += images->forget(taken[i].database, taken[i].index, taken[i].before_us) +
              topk_cache().forget(taken[i].database, taken[i].index, taken[i].before_us);
  } catch (...) {
    // Nothing in forget() throws (erasing frees memory only); the worker
    // must not see an exception either way.
  }
  return gone > 0;
}

void register_forget_hook() {
  prev_object_access = object_access_hook;
  object_access_hook = on_object_access;
}

}  // namespace gknn_service

void gknn_service_forget_index(Oid index) { gknn_service::note(MyDatabaseId, index); }
