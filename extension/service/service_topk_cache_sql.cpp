// gknn_topk_cache() and gknn_topk_cache_reset(): the GPU service's GpuTopK
// table cache as SQL sees it (service_topk_cache.h keeps it).
#include "service.h"
#include "service_shmem.h"

extern "C" {
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace gknn_service;

// Whether the caller may see an entry: one of this database on a table it
// may read (an entry tells a table's row count).
bool may_see(const ShownCacheEntry& e) {
  if (e.database != MyDatabaseId) return false;
  bool missing = false;
  return pg_class_aclcheck_ext(e.relation, GetUserId(), ACL_SELECT, &missing) == ACLCHECK_OK && !missing;
}

}  // namespace

extern "C" {

// gknn_topk_cache(): the service's entries of tables the current user may
// read; none without the service.
PG_FUNCTION_INFO_V1(gknn_topk_cache);
Datum gknn_topk_cache(PG_FUNCTION_ARGS) {
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  InitMaterializedSRF(fcinfo, 0);
  ServiceShared* ctl = shared();
  if (ctl == nullptr) return (Datum)0;
  ShownCacheEntry* shown = static_cast<ShownCacheEntry*>(palloc(sizeof(ShownCacheEntry) * kMaxShownCache));
  SpinLockAcquire(&ctl->mutex);
  const int n = ctl->state == kStopped ? 0 : ctl->ncache;
  memcpy(shown, ctl->cache, sizeof(ShownCacheEntry) * n);
  SpinLockRelease(&ctl->mutex);
  for (int i = 0; i < n; ++i) {
    const ShownCacheEntry& e = shown[i];
    if (!may_see(e)) continue;
    Datum* attnos = static_cast<Datum*>(palloc(sizeof(Datum) * Max(e.ncolumns, 1)));
    for (int c = 0; c < e.ncolumns; ++c) attnos[c] = Int16GetDatum(e.attnos[c]);
    constexpr int kCols = 12;
    Datum v[kCols] = {ObjectIdGetDatum(e.relation),
                      PointerGetDatum(construct_array(attnos, e.ncolumns, INT2OID, 2, true, TYPALIGN_SHORT)),
                      CStringGetTextDatum(e.device >= 0 ? psprintf("gpu %d", e.device) : "cpu"),
                      Int64GetDatum(e.rows),
                      Int64GetDatum(e.blocks),
                      Int64GetDatum(e.bytes),
                      Int64GetDatum(e.hits),
                      Int64GetDatum(e.segments),
                      Int64GetDatum(e.excluded_blocks),
                      CStringGetTextDatum(e.ready ? "ready" : "filling"),
                      TimestampTzGetDatum(e.built_us),
                      TimestampTzGetDatum(e.last_used_us)};
    bool nulls[kCols] = {false, false, false, false, false,    false,
                         false, false, false, false, !e.ready, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
  }
  return (Datum)0;
}

// gknn_topk_cache_reset(): drops the service's entries (sessions ranking
// one keep it until they end); returns how many. The extension script
// revokes it from PUBLIC (as PostgreSQL does pg_stat_reset()): the cache
// serves every session. Without the service there is nothing to drop.
PG_FUNCTION_INFO_V1(gknn_topk_cache_reset);
Datum gknn_topk_cache_reset(PG_FUNCTION_ARGS) {
  if (!gknn_service_preloaded()) PG_RETURN_INT32(0);
  PG_RETURN_INT32(gknn_service_topk_cache_reset());
}
}
