// The GpuTopK executor node's state, shared by topk_exec.cpp and
// topk_explain.cpp.
#pragma once

#include "service/service.h"
#include "topk.h"

extern "C" {
#include "access/relscan.h"
#include "executor/executor.h"
#include "storage/dsm.h"
}

// Where a GpuTopK's time went, in wall-clock ms of the backend: in the core
// (rank: set-up, the CPU interpreter and top-k, or GPU launches and waits,
// the final merge) and the rest of its scans (the heap scan, visibility,
// deforming into the core's batches, the quals that run in PostgreSQL).
struct TopKTimes {
  double scan_ms;
  double rank_ms;
};

// Where a participant ranked its rows (EXPLAIN's Ranked On): in the GPU
// service (on its device, -1: its CPU) or on the backend's CPU, and why
// not the service. Plain text, no pointers: workers copy it to the leader.
struct TopKPlace {
  bool service;    // the service ranked (its last round's rows)
  bool fell_back;  // ...until it stopped: the backend's CPU ranked them again
  int device;      // the service's device (-1: its CPU), when service
  char why[64];    // why the backend's CPU, when !service or fell_back
};

// What one participant of a parallel GpuTopK did, for EXPLAIN ANALYZE.
struct TopKWorkerStats {
  bool ran;
  TopKPlace place;
  ServiceTopKTrips trips;
  int64 heap_rows;
  gknn::expr::TopKStats stats;
  TopKTimes times;
};

// The parallel plan's shared memory (the CustomScan's DSM chunk): one stats
// slot per planned worker, then the table AM's parallel scan descriptor.
struct TopKShared {
  int nworkers;
  Size pscan_offset;
  TopKWorkerStats workers[FLEXIBLE_ARRAY_MEMBER];
};

// What the GPU service's table cache did in a node's last scan
// (topk_cache.h): ranked an entry's rows, filled a new entry, or gave the
// fill up (over gknn.topk_cache_mb, or the service went away).
enum TopKCacheUse { TOPK_CACHE_UNUSED, TOPK_CACHE_HIT, TOPK_CACHE_BUILT, TOPK_CACHE_TOO_LARGE };

struct TopKScanState {
  CustomScanState css;
  // from the plan (custom_exprs / custom_private, see topk_planner.cpp)
  List* quals;        // compiled: run in the program
  List* other_quals;  // run in PostgreSQL: during the scan, or as a recheck
  List* keys;
  List* checks;
  List* dirs;  // per key: 1 = DESC, 2 = NULLS FIRST
  Expr* limit;
  Expr* offset;
  bool partial;  // a participant of a parallel plan: no OFFSET (the Limit above applies it)
  bool recheck;  // other_quals are rechecked over candidates, not run during the scan
  double other_selectivity;
  ExprState* residual;  // other_quals
  ExprState* limit_state;
  ExprState* offset_state;
  TupleTableSlot* fetch_slot;  // the table AM's slot, for fetches by TID
  // the run
  gknn::expr::TopK* topk;  // freed by EndCustomScan or the memory context callback
  // The round's ranking in the GPU service instead (null: the backend's
  // `topk`), in a memory context of its own that goes with the round.
  ServiceTopK* remote;
  MemoryContext remote_cxt;
  // What the backend's CPU needs to rank the round again when the service
  // stops midway: the round's program, k and filter, and the rows shipped
  // (pairs of first and last row id of runs in consecutive blocks, in scan
  // order).
  const TopKEmitter* round_em;
  int64 round_topk_k;
  bool round_filter;
  uint64* shipped;
  int nshipped, capshipped;
  MemoryContextCallback free_cb;
  bool done;
  uint64* row_ids;  // the current round's rows, best first
  int64 nrows, next;
  // recheck: the current round's k (it came back full, so more rows may
  // follow, when nrows == round_k), rows that passed so far (OFFSET
  // included), and whether the last round filtered during the scan instead
  int64 round_k, offset_rows, passed;
  bool fallback;
  int run_rounds;        // rounds of this run (rescans start again)
  double round_rank_ms;  // the current round's time in the core
  // for EXPLAIN ANALYZE
  bool ran;
  int64 k;
  int64 heap_rows;
  int rounds;                // scans (a recheck may need more than one)
  int64 rechecked, removed;  // candidates rechecked, and those the recheck removed
  TopKPlace place;           // the last round's
  ServiceTopKTrips trips;
  gknn::expr::TopKStats stats;
  TopKTimes times;
  TopKCacheUse cache;   // the last scan's
  int64 cached_rows;    // rows it ranked from the cache (or kept, when built)
  int64 cache_checked;  // heap pages whose LSN a hit checked
  // parallel execution (null when the node runs alone)
  TopKShared* shared;
  ParallelTableScanDesc pscan;
  dsm_segment* detach_seg;  // leader: segment whose detach copies the workers' stats out
  int nworker_stats;        // leader: the workers' stats, summed over every DSM of the query
  TopKWorkerStats* worker_stats;
};
