// gknn_service_status() and gknn_service_images(): what the GPU service is
// doing, from its shared counters (its GpuTopK table cache's too: entries,
// bytes, budget, evictions); the images of both kinds (gpu_ivfpq,
// gpu_graph), each row saying which.
#include "service.h"
#include "service_shmem.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/index.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace gknn_service;

const char* state_name(uint32 state) {
  switch (state) {
    case kStarting:
      return "starting";
    case kReady:
      return "ready";
    case kNoDevice:
      return "no device";
    default:
      return "stopped";
  }
}

struct SlotCounts {
  int queued, running;
};

SlotCounts count_slots(ServiceShared* ctl) {
  SlotCounts c{0, 0};
  for (int i = 0; i < ctl->nslots; ++i) {
    uint32 st = ctl->slots[i].state;  // a glance; exact counts need no lock
    if (st == kSubmitted) c.queued++;
    if (st == kRunning || st == kAbandoned) c.running++;
  }
  c.queued += ring_waiting_searches(ctl);  // graph searches waiting in the resident kernel's ring
  return c;
}

// Whether the caller may see an image: members of pg_read_all_stats see
// all; others those of this database whose table they may read.
bool may_see(const ImageKey& key) {
  if (has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS)) return true;
  if (key.database != MyDatabaseId) return false;
  Oid heap = IndexGetRelation(key.index, true);
  return OidIsValid(heap) && pg_class_aclcheck(heap, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(gknn_service_status);
Datum gknn_service_status(PG_FUNCTION_ARGS) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "gknn_service_status: return type must be a row type");
  constexpr int kCols = 35;
  Datum v[kCols];
  bool nulls[kCols];
  for (int i = 0; i < kCols; ++i) nulls[i] = true;
  ServiceShared* ctl = shared();
  if (ctl == nullptr) {
    v[0] = CStringGetTextDatum("not running");
    nulls[0] = false;
    v[3] = CStringGetTextDatum(gknn_service_mode == GKNN_SERVICE_OFF
                                   ? "gknn.service is off"
                                   : "gknn is not in shared_preload_libraries");
    nulls[3] = false;
  } else {
    ServiceShared c;
    SpinLockAcquire(&ctl->mutex);
    memcpy(&c, ctl, offsetof(ServiceShared, images));
    const int32 ncache = ctl->ncache;  // the GpuTopK table cache (service_topk_cache.h)
    const int64 cache_bytes = ctl->cache_bytes, cache_budget = ctl->cache_budget,
                cache_evictions = ctl->cache_evictions;
    SpinLockRelease(&ctl->mutex);
    SlotCounts slots = count_slots(ctl);
    bool running = c.state != kStopped;
    v[0] = CStringGetTextDatum(state_name(c.state));
    v[1] = Int32GetDatum(c.pid);
    v[2] = CStringGetTextDatum(c.device_name);
    v[3] = CStringGetTextDatum(c.reason);
    v[4] = TimestampTzGetDatum(c.started_us);
    v[5] = Int64GetDatum(c.incarnation > 0 ? c.incarnation - 1 : 0);
    v[6] = Int32GetDatum(slots.queued);
    v[7] = Int32GetDatum(slots.running);
    v[8] = Int64GetDatum(c.requests);
    v[9] = Int64GetDatum(c.searches);
    v[10] = Int64GetDatum(c.batches);
    v[11] = Float8GetDatum(c.batches > 0 ? static_cast<double>(c.batched_queries) / c.batches : 0.0);
    v[12] = Float8GetDatum(c.busy_us / 1000.0);
    v[13] = Int64GetDatum(c.loads);
    v[14] = Int64GetDatum(c.evictions);
    v[15] = Int64GetDatum(c.errors);
    v[16] = Int32GetDatum(c.nimages);
    v[17] = Int64GetDatum(c.memory_used);
    v[18] = Int64GetDatum(c.memory_budget);
    v[19] = Int64GetDatum(c.load_bytes);
    v[20] = Int64GetDatum(c.deltas);
    v[21] = Int64GetDatum(c.delta_bytes);
    v[22] = Int64GetDatum(c.topk_sessions);
    v[23] = Int64GetDatum(c.topk_batches);
    v[24] = Int64GetDatum(c.topk_rows);
    v[25] = Int32GetDatum(ncache);
    v[26] = Int64GetDatum(cache_bytes);
    v[27] = Int64GetDatum(cache_budget);
    v[28] = Int64GetDatum(cache_evictions);
    v[29] = Int64GetDatum(c.topk_shared_rankings);
    v[30] = Int64GetDatum(c.topk_shared_hits);
    v[31] = Float8GetDatum(c.wait_us / 1000.0);
    v[32] = Float8GetDatum(c.held_us / 1000.0);
    v[33] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&ctl->ring_searches)));
    v[34] = Float8GetDatum(static_cast<double>(pg_atomic_read_u64(&ctl->ring_us)) / 1000.0);
    for (int i = 0; i < kCols; ++i) nulls[i] = false;
    if (!running) nulls[1] = nulls[4] = true;
    if (c.reason[0] == '\0') nulls[3] = true;
  }
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
}

PG_FUNCTION_INFO_V1(gknn_service_images);
Datum gknn_service_images(PG_FUNCTION_ARGS) {
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  InitMaterializedSRF(fcinfo, 0);
  ServiceShared* ctl = shared();
  if (ctl == nullptr) return (Datum)0;
  ShownImage shown[kMaxShownImages];
  SpinLockAcquire(&ctl->mutex);
  int n = ctl->state == kStopped ? 0 : ctl->nimages;
  memcpy(shown, ctl->images, sizeof(ShownImage) * n);
  SpinLockRelease(&ctl->mutex);
  for (int i = 0; i < n; ++i) {
    const ShownImage& im = shown[i];
    if (!may_see(im.key)) continue;
    char* name = im.key.database == MyDatabaseId ? get_rel_name(im.key.index) : nullptr;
    Datum v[11] = {ObjectIdGetDatum(im.key.database),
                   ObjectIdGetDatum(im.key.index),
                   name ? CStringGetTextDatum(name) : (Datum)0,
                   CStringGetTextDatum(im.kind == kImageGraph ? "gpu_graph" : "gpu_ivfpq"),
                   Int64GetDatum(static_cast<int64>(im.key.generation)),
                   Int32GetDatum(im.device),
                   Int64GetDatum(im.bytes),
                   Int64GetDatum(im.entries),
                   Int64GetDatum(im.hits),
                   TimestampTzGetDatum(im.loaded_us),
                   TimestampTzGetDatum(im.last_used_us)};
    bool nulls[11] = {false, false, name == nullptr, false, false, false, false, false, false, false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
  }
  return (Datum)0;
}

}  // extern "C"
