// The ordered scan machinery gpu_ivfpq and gpu_graph share (ordered_scan.h):
// begin, rescan, the rounds' batches handed out in order, end.
#include "am/ordered_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "am/heap_id.h"
#include "ivfpq/ivfpq.h"  // ivfpq_limit_hint: the LIMIT above the scan, for either access method

extern "C" {
#include "utils/memutils.h"
}

bool scan_candidate_less(const ScanCandidate& a, const ScanCandidate& b) {
  bool na = std::isnan(a.distance), nb = std::isnan(b.distance);
  if (na != nb) return nb;
  if (!na && a.distance != b.distance) return a.distance < b.distance;
  return ItemPointerCompare(const_cast<ItemPointer>(&a.tid), const_cast<ItemPointer>(&b.tid)) < 0;
}

void scan_stats_count_service(OrderedScanStats* st, const ServiceTrip& trip, int64 count) {
  st->service_searches++;
  st->service_candidates += count;
  st->batch_min = st->service_searches == 1 ? trip.batch_size : Min(st->batch_min, int64{trip.batch_size});
  st->batch_max = Max(st->batch_max, int64{trip.batch_size});
  st->batch_total += trip.batch_size;
  st->queue_ms += trip.queue_ms;
  st->service_ms += trip.run_ms;
}

namespace {

// The names come from the access method's OrderedScanMethods: string
// literals, which is what AllocSetContextCreate's constant-name check asks
// for (the context keeps the pointer), passed through a variable.
MemoryContext round_context(const OrderedScan* os) {
  return AllocSetContextCreateInternal(os->cxt, os->methods->round_cxt_name, ALLOCSET_DEFAULT_SIZES);
}

void clear_batch(OrderedScan* os) {
  os->batch = nullptr;
  os->nbatch = os->pos = 0;
}

// The first amgettuple after a begin or rescan: the keys are known now.
void start_scan(IndexScanDesc scan, OrderedScan* os) {
  if (scan->numberOfOrderBys != 1 || scan->numberOfKeys != 0)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("%s supports only ordered scans (ORDER BY column <-> value)", os->methods->am)));
  MemoryContext old = MemoryContextSwitchTo(os->cxt);
  ScanKey key = &scan->orderByData[0];
  os->query_null = (key->sk_flags & SK_ISNULL) != 0;
  os->query = nullptr;
  os->qdim = 0;
  os->methods->start(scan, os);
  HASHCTL ctl;
  memset(&ctl, 0, sizeof(ctl));
  ctl.keysize = sizeof(ItemPointerData);
  ctl.entrysize = sizeof(ItemPointerData);
  ctl.hcxt = os->cxt;
  os->returned = hash_create(os->methods->tids_name, 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  MemoryContextSwitchTo(old);
  clear_batch(os);
  os->started = true;
}

// Fills the next batch, sorted; false when the scan has nothing more.
bool next_round(IndexScanDesc scan, OrderedScan* os) {
  MemoryContextReset(os->round_cxt);
  MemoryContext old = MemoryContextSwitchTo(os->round_cxt);
  clear_batch(os);
  bool more = os->methods->next_round(scan, os);
  if (more) std::sort(os->batch, os->batch + os->nbatch, scan_candidate_less);
  MemoryContextSwitchTo(old);
  return more;
}

}  // namespace

IndexScanDesc ordered_scan_begin(Relation index, int nkeys, int norderbys, Size size,
                                 const OrderedScanMethods* methods) {
  IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
  auto* os = static_cast<OrderedScan*>(palloc0(size));
  os->methods = methods;
  os->cxt =
      AllocSetContextCreateInternal(CurrentMemoryContext, methods->scan_cxt_name, ALLOCSET_DEFAULT_SIZES);
  os->round_cxt = round_context(os);
  os->route = gknn_service_route();
  os->stats.via_service = os->route.use_service;
  os->stats.service_device = os->route.device;
  os->stats.cpu_reason = os->route.why;
  int64 hint = ivfpq_limit_hint(RelationGetRelid(index));
  os->k = hint > 0 ? hint : methods->default_k;
  scan->opaque = os;
  if (norderbys > 0) {  // the AM provides these arrays
    scan->xs_orderbyvals = static_cast<Datum*>(palloc0(sizeof(Datum) * norderbys));
    scan->xs_orderbynulls = static_cast<bool*>(palloc(sizeof(bool) * norderbys));
    for (int i = 0; i < norderbys; ++i) scan->xs_orderbynulls[i] = true;
  }
  return scan;
}

void ordered_scan_rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys) {
  auto* os = static_cast<OrderedScan*>(scan->opaque);
  if (keys && scan->numberOfKeys > 0) memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
  if (orderbys && scan->numberOfOrderBys > 0)
    memmove(scan->orderByData, orderbys, scan->numberOfOrderBys * sizeof(ScanKeyData));
  os->started = false;
  clear_batch(os);
  os->returned = nullptr;
  if (os->methods->release) os->methods->release(os);
  // Drops the query copy, the TID set and round_cxt (a child).
  MemoryContextReset(os->cxt);
  os->round_cxt = round_context(os);
}

bool ordered_scan_gettuple(IndexScanDesc scan, ScanDirection dir) {
  auto* os = static_cast<OrderedScan*>(scan->opaque);
  if (!ScanDirectionIsForward(dir))
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s scans only forward", os->methods->am)));
  if (!os->started) start_scan(scan, os);
  for (;;) {
    if (os->pos < os->nbatch) {
      const ScanCandidate& c = os->batch[os->pos++];
      scan->xs_heaptid = c.tid;
      scan->xs_recheck = false;
      scan->xs_recheckorderby = false;
      scan->xs_orderbyvals[0] = c.isnull ? (Datum)0 : Float8GetDatum(c.distance);
      scan->xs_orderbynulls[0] = c.isnull;
      return true;
    }
    if (!next_round(scan, os)) return false;
  }
}

const OrderedScanStats* ordered_scan_stats(IndexScanDesc scan) {
  return &static_cast<const OrderedScan*>(scan->opaque)->stats;
}

void ordered_scan_endscan(IndexScanDesc scan) {
  auto* os = static_cast<OrderedScan*>(scan->opaque);
  if (os->methods->release) os->methods->release(os);
  MemoryContextDelete(os->cxt);
  pfree(os);
  scan->opaque = nullptr;
}

bool ordered_scan_claim(OrderedScan* os, const ItemPointerData* tid) {
  bool found;
  hash_search(os->returned, tid, HASH_ENTER, &found);
  return !found;
}

void ordered_scan_add(OrderedScan* os, const ScanCandidate& c) {
  if (ordered_scan_claim(os, &c.tid)) os->batch[os->nbatch++] = c;
}

void ordered_scan_null_batch(OrderedScan* os, const int64* a, int64 na, const int64* b, int64 nb) {
  os->batch = static_cast<ScanCandidate*>(
      MemoryContextAllocHuge(os->round_cxt, sizeof(ScanCandidate) * Max(na + nb, int64{1})));
  for (int64 i = 0; i < na + nb; ++i) {
    ScanCandidate c;
    heap_id_to_tid(i < na ? a[i] : b[i - na], &c.tid);
    c.distance = 0;
    c.isnull = true;
    ordered_scan_add(os, c);
  }
}
