// What the ordered scans (ORDER BY column <op> value) of gknn's index access
// methods, gpu_ivfpq and gpu_graph, share: the scan's state, its candidates
// and their order, the set of TIDs already returned, and the index AM
// callbacks amrescan, amgettuple and amendscan. Each access method keeps
// only how it fills a round's batch (ivfpq/ivfpq_scan.cpp,
// graph/graph_scan.cpp).
//
// A scan runs in rounds: a round fills a batch of candidates, each a heap
// TID not returned before with its distance; the batch is sorted in SQL's
// order and handed out row by row; when the executor wants more, the next
// round fills the next batch, until a round says there is nothing more.
#pragma once

#include "pg.h"
#include "service/service.h"  // ServiceRoute, ServiceTrip

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "utils/hsearch.h"
}

// One row a round proposes: a heap TID and its distance (NULL: a NULL
// vector, or ORDER BY column <-> NULL).
struct ScanCandidate {
  ItemPointerData tid;
  double distance;
  bool isnull;
};
// The order of a batch: distance ascending, NaN last, then TID (the order
// PostgreSQL's float8 sort with a TID tie-break gives; DESIGN rule 3).
bool scan_candidate_less(const ScanCandidate& a, const ScanCandidate& b);

// What a scan's searches did, summed over its rounds and rescans (one plan
// node's loops), for EXPLAIN ANALYZE (ivfpq/ivfpq_explain.cpp prints them).
struct OrderedScanStats {
  bool via_service;        // the route chosen at the scan's start
  int service_device;      // the service's device (-1: its CPU), when via_service
  const char* cpu_reason;  // why this backend searched itself (static text), or null
  int64 service_searches;  // searches the service answered
  int64 service_candidates;
  int64 batch_min, batch_max, batch_total;  // queries in the batches those searches rode in
  double queue_ms;                          // submitted -> taken by the service, summed
  double service_ms;                        // taken -> answered, summed
  int64 images_shipped;                     // times this scan shipped the index image to the service
  int64 deltas_shipped;                     // ... or what changed in the index (a delta)
  int64 cpu_searches;                       // searches on this backend's CPU
  int64 cpu_candidates;
};
// Adds one search's trip through the service (`count` rows answered).
void scan_stats_count_service(OrderedScanStats* st, const ServiceTrip& trip, int64 count);

struct OrderedScan;

// What differs between the access methods' scans. The names are string
// literals (memory contexts keep a pointer to their name).
struct OrderedScanMethods {
  const char* am;              // "gpu_graph": in error messages
  const char* scan_cxt_name;   // the scan's memory context
  const char* round_cxt_name;  // one round's memory context
  const char* tids_name;       // the hash table of returned TIDs
  int64 default_k;             // k when no LIMIT was found above the scan
  // The scan's keys are known (first amgettuple after a begin or rescan):
  // the query is copied (query_null already set), the first round's sizes
  // set. Runs in the scan's memory context.
  void (*start)(IndexScanDesc scan, OrderedScan* os);
  // Fills os->batch (os->nbatch candidates, in any order) with the next
  // round's candidates; false when the scan has nothing more. Runs in the
  // round's memory context, reset before each round.
  bool (*next_round)(IndexScanDesc scan, OrderedScan* os);
  // Releases what the rounds hold outside the scan's memory context (before
  // a rescan resets it, and at the end); null when nothing is.
  void (*release)(OrderedScan* os);
};

// A scan's shared state; each access method's scan state derives from it
// (palloc0'd by ordered_scan_begin, so plain data only).
struct OrderedScan {
  const OrderedScanMethods* methods;
  MemoryContext cxt;        // the scan's life (reset by a rescan)
  MemoryContext round_cxt;  // one round's candidates (a child of cxt)
  bool started;
  bool query_null;  // ORDER BY column <-> NULL: every distance is NULL
  float* query;     // the query's elements as floats (in cxt)
  int qdim;
  ServiceRoute route;      // where searches run, decided at begin
  OrderedScanStats stats;  // kept across rescans
  int64 k;                 // the LIMIT (+ OFFSET) above the scan, or default_k
  HTAB* returned;          // TIDs handed out by this scan (or claimed by a round)
  ScanCandidate* batch;    // the current round's candidates, sorted
  int64 nbatch;
  int64 pos;  // the next to hand out
};

// ambeginscan's shared part: a scan state of `size` bytes (the access
// method's struct deriving from OrderedScan), zeroed, its contexts, route,
// statistics and k set; the access method sets its own fields after it.
IndexScanDesc ordered_scan_begin(Relation index, int nkeys, int norderbys, Size size,
                                 const OrderedScanMethods* methods);
// The index AM callbacks, the same for both access methods.
void ordered_scan_rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys);
bool ordered_scan_gettuple(IndexScanDesc scan, ScanDirection dir);
void ordered_scan_endscan(IndexScanDesc scan);
// A scan's numbers (of a scan whose amgettuple is ordered_scan_gettuple).
const OrderedScanStats* ordered_scan_stats(IndexScanDesc scan);

// True the first time this scan sees `tid` (it is then never returned again).
bool ordered_scan_claim(OrderedScan* os, const ItemPointerData* tid);
// Adds `c` to the round's batch unless its TID was seen before; the batch
// must have room.
void ordered_scan_add(OrderedScan* os, const ScanCandidate& c);
// A batch of the rows whose ids (heap TIDs, am/heap_id.h) are `a` (na of
// them) then `b` (nb), with NULL distances, those not returned before: the
// NULL rows that come last, or every row when the query is NULL. Allocated
// in the round's memory context.
void ordered_scan_null_batch(OrderedScan* os, const int64* a, int64 na, const int64* b, int64 nb);
