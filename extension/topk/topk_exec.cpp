// GpuTopK execution: on the first call, a heap scan under the query's
// snapshot (PostgreSQL decides visibility) deforms only the columns the
// program reads into the core's batches; the core keeps the k best rows
// (keys + TIDs) across batches on the GPU or the CPU; then the k tuples are
// fetched by TID in order and projected.
//
// Quals that did not compile run in PostgreSQL: during the scan, before a
// row is deformed; or, in a recheck plan, on the best candidates by the
// compiled quals (topk_overfetch(k, their selectivity) of them), fetched by
// TID in order until k rows pass. If the candidates run out first, a second
// round takes 8 times as many (the first round's are a prefix of them: the
// order is total, ending with the TID, and the snapshot is the same) and
// skips those already checked; if that runs out too, a last round filters
// during the scan and skips the rows already returned.
//
// Where the rows are ranked: where gknn is preloaded (the GPU service runs),
// every round's batches go to the service, which ranks them on its GPU (or
// its CPU with gknn.service = cpu) and sends back the k best row ids; no
// backend or parallel worker opens CUDA for GpuTopK. A serial scan whose
// quals all compile may use the service's table cache (gknn.topk_cache_mb,
// topk_cache.h): the first such query of a table's columns fills an entry
// from the all-visible pages, later ones rank the entry's rows in the
// service and read from the heap only the blocks it does not vouch for.
// Otherwise, with gknn.device = cpu or a shape the GPU kernels do not take,
// the backend's CPU interpreter ranks them. Both give
// the same rows in the same order. A service that stops during a round
// (gknn.device = auto) leaves the round to the backend's CPU: the rows it
// had been sent are read again (the runs of blocks this participant
// scanned, which it remembers) and the scan goes on; gknn.device = gpu
// raises 55000 instead.
//
// In a parallel plan (Limit over Gather Merge over this node) every
// participant runs the same node over its share of the heap (a parallel
// table scan in the node's DSM chunk), returns its own best LIMIT + OFFSET
// rows in order, and leaves OFFSET and LIMIT to the Limit above. Each
// participant opens its own session with the service (its own request
// slot); errors in a worker (SQL or core) are ordinary errors there, which
// PostgreSQL re-raises in the leader.
#include <cstring>

#include "core_call.h"
#include "device.h"
#include "service/service.h"
#include "topk_cache.h"
#include "topk_state.h"
#include "types/vector.h"

extern "C" {
#include "access/heapam.h"
#include "access/parallel.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "portability/instr_time.h"
#include "utils/date.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

using gknn::expr::ColumnSpec;
using gknn::expr::Type;

void gknn_topk_explain(CustomScanState* node, List* ancestors, ExplainState* es);  // topk_explain.cpp

namespace {

Node* create_state(CustomScan* cscan);
void begin_scan(CustomScanState* node, EState* estate, int eflags);
TupleTableSlot* exec_scan(CustomScanState* node);
void end_scan(CustomScanState* node);
void rescan(CustomScanState* node);
Size estimate_dsm(CustomScanState* node, ParallelContext* pcxt);
void initialize_dsm(CustomScanState* node, ParallelContext* pcxt, void* coordinate);
void reinitialize_dsm(CustomScanState* node, ParallelContext* pcxt, void* coordinate);
void initialize_worker(CustomScanState* node, shm_toc* toc, void* coordinate);

const CustomExecMethods exec_methods = {
    "GpuTopK",    begin_scan,     exec_scan,        end_scan,          rescan,  nullptr,          nullptr,
    estimate_dsm, initialize_dsm, reinitialize_dsm, initialize_worker, nullptr, gknn_topk_explain};

Node* create_state(CustomScan* cscan) {
  TopKScanState* s = static_cast<TopKScanState*>(palloc0(sizeof(TopKScanState)));
  NodeSetTag(s, T_CustomScanState);
  s->css.methods = &exec_methods;
  List* counts = static_cast<List*>(linitial(cscan->custom_private));
  const int nquals = intVal(list_nth(counts, 0)), nkeys = intVal(list_nth(counts, 1)),
            nchecks = intVal(list_nth(counts, 2)), nother = intVal(list_nth(counts, 3));
  s->partial = intVal(list_nth(counts, 4)) != 0;
  s->recheck = intVal(list_nth(counts, 5)) != 0;
  s->other_selectivity = strtod(strVal(list_nth(counts, 6)), nullptr);
  s->dirs = static_cast<List*>(lsecond(cscan->custom_private));
  List* e = cscan->custom_exprs;
  s->quals = list_copy_head(e, nquals);
  s->keys = list_copy_head(list_copy_tail(e, nquals), nkeys);
  s->checks = list_copy_head(list_copy_tail(e, nquals + nkeys), nchecks);
  s->limit = static_cast<Expr*>(list_nth(e, nquals + nkeys + nchecks));
  s->offset = static_cast<Expr*>(list_nth(e, nquals + nkeys + nchecks + 1));
  s->other_quals = list_copy_tail(e, nquals + nkeys + nchecks + 2);
  Assert(list_length(s->other_quals) == nother);
  (void)nother;
  return reinterpret_cast<Node*>(s);
}

void free_topk(void* arg) {
  TopKScanState* s = static_cast<TopKScanState*>(arg);
  delete s->topk;  // no PostgreSQL calls in the destructors
  s->topk = nullptr;
}

void begin_scan(CustomScanState* node, EState* estate, int eflags) {
  (void)eflags;
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  PlanState* ps = &node->ss.ps;
  if (s->other_quals != NIL) {
    // They read the heap slot of the scan or of a fetch, not the node's
    // virtual scan slot: let them deform whatever slot they are given.
    bool fixed = ps->scanopsfixed;
    ps->scanopsfixed = false;
    s->residual = ExecInitQual(s->other_quals, ps);
    ps->scanopsfixed = fixed;
  }
  s->limit_state = ExecInitExpr(s->limit, ps);
  s->offset_state = ExecInitExpr(s->offset, ps);
  s->fetch_slot = table_slot_create(node->ss.ss_currentRelation, &estate->es_tupleTable);
  s->free_cb.func = free_topk;
  s->free_cb.arg = s;
  MemoryContextRegisterResetCallback(CurrentMemoryContext, &s->free_cb);
}

// LIMIT / OFFSET as ExecLimit evaluates them (nodeLimit.c: recompute_limits).
void eval_limits(TopKScanState* s, int64* count, int64* offset, bool* no_count) {
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  bool isnull = false;
  Datum v = ExecEvalExprSwitchContext(s->offset_state, ec, &isnull);
  *offset = isnull ? 0 : DatumGetInt64(v);
  if (*offset < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE),
                    errmsg("OFFSET must not be negative")));
  v = ExecEvalExprSwitchContext(s->limit_state, ec, &isnull);
  *no_count = isnull;
  *count = isnull ? 0 : DatumGetInt64(v);
  if (*count < 0)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_ROW_COUNT_IN_LIMIT_CLAUSE), errmsg("LIMIT must not be negative")));
}

// Params (and Consts) of the compiled expressions, evaluated once.
Datum param_value(void* arg, Node* node, bool* isnull) {
  TopKScanState* s = static_cast<TopKScanState*>(arg);
  ExprState* es = ExecInitExpr(reinterpret_cast<Expr*>(node), &s->css.ss.ps);
  MemoryContext old = MemoryContextSwitchTo(s->css.ss.ps.state->es_query_cxt);
  Datum d = ExecEvalExpr(es, s->css.ss.ps.ps_ExprContext, isnull);
  MemoryContextSwitchTo(old);
  return d;
}

void compile_program(TopKScanState* s, TopKEmitter* em) {
  topk_emitter_init(em, s->css.ss.ps.plan ? reinterpret_cast<Scan*>(s->css.ss.ps.plan)->scanrelid : 0,
                    param_value, s);
  bool ok = topk_compile_quals(em, s->quals);
  ListCell *kc, *dc;
  forboth(kc, s->keys, dc, s->dirs) {
    int d = lfirst_int(dc);
    ok = ok && topk_compile_key(em, static_cast<Expr*>(lfirst(kc)), d & 1, d & 2);
  }
  ok = ok && topk_compile_checks(em, s->checks);
  if (!ok) elog(ERROR, "GpuTopK: an expression the planner compiled no longer compiles");
  topk_emitter_sort_columns(em);  // the table cache's key
}

// The core objects are built here, with no PostgreSQL calls (core_call).
void build_program(const TopKEmitter* em, gknn::expr::Program& p, std::vector<ColumnSpec>& cols) {
  p.code.assign(em->code, em->code + em->ncode);
  p.consts.assign(em->consts, em->consts + em->nconst);
  p.const_nulls.assign(em->const_nulls, em->const_nulls + em->nconst);
  p.vectors.assign(em->vectors, em->vectors + em->nvectors);
  p.qual = em->qual;
  p.check = em->check;
  p.keys.assign(em->keys, em->keys + em->nkeys);
  cols.assign(em->columns, em->columns + em->ncolumns);
}

int64 batch_capacity(const TopKEmitter* em, bool gpu) {
  int64 row_bytes = 8;
  for (int c = 0; c < em->ncolumns; ++c)
    row_bytes += 1 + (em->columns[c].type == Type::Vector ? 4 + 4 * int64(em->columns[c].dim) : 8);
  int64 budget = gpu ? (int64(64) << 20) : (int64(4) << 20);
  return Max(int64(1024), Min(int64(gpu ? 1 << 20 : 1 << 16), budget / row_bytes));
}

void raise_eval_error(const gknn::expr::EvalError& e) {
  using gknn::expr::ErrorKind;
  char msg[256];
  gknn_pg::core_call([&] { strlcpy(msg, gknn::expr::error_message(e).c_str(), sizeof(msg)); });
  int code = ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
  switch (e.kind) {
    case ErrorKind::DivisionByZero:
      code = ERRCODE_DIVISION_BY_ZERO;
      break;
    case ErrorKind::SqrtNegative:
    case ErrorKind::PowZeroNegative:
    case ErrorKind::PowNegativeFrac:
      code = ERRCODE_INVALID_ARGUMENT_FOR_POWER_FUNCTION;
      break;
    case ErrorKind::LogZero:
    case ErrorKind::LogNegative:
      code = ERRCODE_INVALID_ARGUMENT_FOR_LOG;
      break;
    case ErrorKind::TimestampRange:
      code = ERRCODE_DATETIME_VALUE_OUT_OF_RANGE;
      break;
    case ErrorKind::VectorDims:
      code = ERRCODE_DATA_EXCEPTION;
      break;
    case ErrorKind::StackOverflow:
      code = ERRCODE_INTERNAL_ERROR;
      break;
    default:
      break;
  }
  ereport(ERROR, (errcode(code), errmsg("%s", msg)));
}

}  // namespace

// One heap row into batch row r: only the program's columns.
void topk_deform_row(const TopKEmitter* em, TupleTableSlot* slot, gknn::expr::BatchView* b, int64 r) {
  b->row_ids[r] = gknn::expr::make_row_id(ItemPointerGetBlockNumber(&slot->tts_tid),
                                          ItemPointerGetOffsetNumber(&slot->tts_tid));
  for (int c = 0; c < em->ncolumns; ++c) {
    gknn::expr::ColumnView& col = b->column[c];
    const int a = em->attnos[c] - 1;
    const bool null = slot->tts_isnull[a];
    const Datum d = slot->tts_values[a];
    col.nulls[r] = null;
    switch (col.type) {
      case Type::Bool:
        static_cast<uint8*>(col.data)[r] = null ? 0 : DatumGetBool(d);
        break;
      case Type::I16:
        static_cast<int16*>(col.data)[r] = null ? 0 : DatumGetInt16(d);
        break;
      case Type::I32:
      case Type::Date:
        static_cast<int32*>(col.data)[r] = null ? 0 : DatumGetInt32(d);
        break;
      case Type::F32:
        static_cast<float*>(col.data)[r] = null ? 0 : DatumGetFloat4(d);
        break;
      case Type::F64:
        static_cast<double*>(col.data)[r] = null ? 0 : DatumGetFloat8(d);
        break;
      case Type::Vector: {
        float* out = static_cast<float*>(col.data) + r * int64(col.dim);
        col.dims[r] = 0;
        if (null) break;
        Vector* v = DatumGetVector(d);  // detoasted in the per-tuple context
        col.dims[r] = v->dim;
        if (v->dim == col.dim) memcpy(out, v->x, sizeof(float) * col.dim);
        break;
      }
      default:
        static_cast<int64*>(col.data)[r] = null ? 0 : DatumGetInt64(d);
        break;
    }
  }
}

namespace {

double ms_since(const instr_time& start) {
  instr_time now;
  INSTR_TIME_SET_CURRENT(now);
  INSTR_TIME_SUBTRACT(now, start);
  return INSTR_TIME_GET_MILLISEC(now);
}

// A core call whose wall time counts as ranking (EXPLAIN ANALYZE's Rank Time).
template <typename F>
void rank_call(TopKScanState* s, F&& f) {
  instr_time start;
  INSTR_TIME_SET_CURRENT(start);
  gknn_pg::core_call(f);
  s->round_rank_ms += ms_since(start);
}

void fall_back_to_cpu(TopKScanState* s);

// The batch being filled: the service session's, or the backend TopK's.
gknn::expr::BatchView* next_batch(TopKScanState* s) {
  if (s->remote) return gknn_service_topk_batch(s->remote);
  gknn::expr::BatchView* b = nullptr;
  rank_call(s, [&] { b = &s->topk->next_batch(); });
  return b;
}

void push_batch(TopKScanState* s) {
  gknn::expr::EvalError err;
  if (s->remote) {  // waiting for the service counts as ranking too
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    const int r = gknn_service_topk_push(s->remote, &err);
    s->round_rank_ms += ms_since(start);
    if (r == kServiceTopKRaised) raise_eval_error(err);
    if (r == kServiceTopKGone) fall_back_to_cpu(s);
    return;
  }
  bool ok = true;
  rank_call(s, [&] { ok = s->topk->push(err); });
  if (!ok) raise_eval_error(err);
}

// Remembers a row shipped to the service, as runs of rows in consecutive
// blocks (first and last row id): a participant's blocks come in runs
// (parallel scans hand out chunks; a sync scan wraps once), and every row
// of a block it scanned within a run is its own.
void note_shipped(TopKScanState* s, uint64 id) {
  if (s->nshipped > 0) {
    uint64* last = &s->shipped[2 * (s->nshipped - 1)];
    const uint64 block = id >> 16, last_block = last[1] >> 16;
    if (id > last[1] && (block == last_block || block == last_block + 1)) {
      last[1] = id;
      return;
    }
  }
  if (s->nshipped == s->capshipped) {
    const int cap = Max(64, 2 * s->capshipped);
    MemoryContext cxt = s->css.ss.ps.state->es_query_cxt;
    s->shipped = static_cast<uint64*>(s->shipped ? repalloc(s->shipped, sizeof(uint64) * 2 * cap)
                                                 : MemoryContextAlloc(cxt, sizeof(uint64) * 2 * cap));
    s->capshipped = cap;
  }
  s->shipped[2 * s->nshipped] = s->shipped[2 * s->nshipped + 1] = id;
  ++s->nshipped;
}

AttrNumber max_attno(const TopKEmitter* em) {
  AttrNumber n = 0;
  for (int c = 0; c < em->ncolumns; ++c) n = Max(n, em->attnos[c]);
  return n;
}

// One row of the slot into the current batch; a full batch is pushed.
void add_row(TopKScanState* s, const TopKEmitter* em, TupleTableSlot* slot, AttrNumber natts,
             gknn::expr::BatchView*& b) {
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  if (!b) b = next_batch(s);  // on the first row: a cache hit may need none
  slot_getsomeattrs(slot, natts);
  MemoryContext old = MemoryContextSwitchTo(ec->ecxt_per_tuple_memory);
  topk_deform_row(em, slot, b, b->n++);
  MemoryContextSwitchTo(old);
  if (s->remote) note_shipped(s, b->row_ids[b->n - 1]);
  if (b->n == b->capacity) {
    push_batch(s);  // after a fall back to the CPU, b is the CPU's next
    CHECK_FOR_INTERRUPTS();
    b = next_batch(s);
  }
}

// The heap scan under the query's snapshot. filter: run the other quals on
// each row before it is deformed. from_cache: for blocks [0, ncached), 1
// where the table cache has the block's rows (not read here).
void scan_heap(TopKScanState* s, const TopKEmitter* em, bool filter, const uint8* from_cache = nullptr,
               BlockNumber ncached = 0) {
  EState* estate = s->css.ss.ps.state;
  Relation rel = s->css.ss.ss_currentRelation;
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  const AttrNumber natts = max_attno(em);
  TupleTableSlot* slot = table_slot_create(rel, nullptr);
  // A parallel plan's participant takes blocks from the shared scan; run
  // alone (no DSM: parallel mode was not available), it scans everything.
  // Block ranges (beside the cache) need a heap scan without sync scans.
  TableScanDesc scan = s->pscan     ? table_beginscan_parallel(rel, s->pscan)
                       : from_cache ? table_beginscan_strat(rel, estate->es_snapshot, 0, nullptr, true, false)
                                    : table_beginscan(rel, estate->es_snapshot, 0, nullptr);
  const BlockNumber nblocks = from_cache ? reinterpret_cast<HeapScanDesc>(scan)->rs_nblocks : 0;
  auto skip = [&](BlockNumber b) { return b < ncached && from_cache[b] == 1; };
  BlockNumber next = 0;
  gknn::expr::BatchView* b = nullptr;
  for (;;) {
    if (from_cache) {  // the next range of blocks the cache does not have
      while (next < nblocks && skip(next)) ++next;
      if (next >= nblocks) break;
      BlockNumber end = next + 1;
      while (end < nblocks && !skip(end)) ++end;
      table_rescan(scan, nullptr);
      heap_setscanlimits(scan, next, end - next);
      next = end;
    }
    while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
      ++s->heap_rows;
      ResetExprContext(ec);
      if (filter && s->residual) {
        ec->ecxt_scantuple = slot;
        if (!ExecQual(s->residual, ec)) continue;
      }
      add_row(s, em, slot, natts, b);
    }
    if (!from_cache) break;
  }
  if (b && b->n > 0) push_batch(s);
  table_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
}

// A fill of the GPU service's table cache entry (service_topk_cache.cpp
// says why this is enough): every block whose all-visible bit the probe
// read (each map page's bits and LSN read before these heap pages), still
// set under the page's share lock with PD_ALL_VISIBLE, is copied with its
// LSN and its rows shipped as kept batches of whole blocks; then the
// blocks' and the map pages' LSNs and the commit; then the other blocks
// from the heap under the snapshot. Rows of all-visible pages are visible
// to every snapshot, this one's included.
void fill_cache(TopKScanState* s, const TopKEmitter* em, const TopKVmRead& vm) {
  Relation rel = s->css.ss.ss_currentRelation;
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  const AttrNumber natts = max_attno(em);
  const int64 n = vm.nblocks;
  uint64* lsn = static_cast<uint64*>(
      palloc_extended(sizeof(uint64) * Max(n, int64{1}), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO));
  uint8* kept = static_cast<uint8*>(palloc_extended(Max(n, int64{1}), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO));
  TupleTableSlot* slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
  BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
  Buffer vmbuf = InvalidBuffer;
  PGAlignedBlock copy;
  gknn::expr::BatchView* b = nullptr;
  int64 rows = 0;
  const int64 segment = topk_cache_segment_rows(rel, topk_service_capacity(em));
  if (s->remote) gknn_service_topk_keep(s->remote, true);
  for (int64 blk = 0; blk < n; ++blk) {
    if ((blk & 255) == 0) CHECK_FOR_INTERRUPTS();
    if (!topk_bit(vm.bits, blk)) continue;
    lsn[blk] = topk_copy_all_visible(rel, static_cast<BlockNumber>(blk), &vmbuf, strategy, copy.data);
    if (lsn[blk] == 0) continue;
    kept[blk] = 1;
    Page p = copy.data;
    const OffsetNumber maxoff = PageGetMaxOffsetNumber(p);
    const int ntuples = topk_page_rows(p);
    if (!b) b = next_batch(s);
    // A block's rows never straddle two kept batches (segments of the entry).
    if (b->n > 0 && (b->n >= segment || b->capacity - b->n < ntuples)) {
      push_batch(s);
      b = next_batch(s);
    }
    for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off)) {
      ItemId lp = PageGetItemId(p, off);
      if (!ItemIdIsNormal(lp)) continue;
      HeapTupleData tup;
      tup.t_data = reinterpret_cast<HeapTupleHeader>(PageGetItem(p, lp));
      tup.t_len = ItemIdGetLength(lp);
      tup.t_tableOid = RelationGetRelid(rel);
      ItemPointerSet(&tup.t_self, static_cast<BlockNumber>(blk), off);
      ++s->heap_rows;
      ++rows;
      ResetExprContext(ec);
      ExecStoreHeapTuple(&tup, slot, false);
      add_row(s, em, slot, natts, b);
      ExecClearTuple(slot);
    }
  }
  if (b && b->n > 0) push_batch(s);
  if (BufferIsValid(vmbuf)) ReleaseBuffer(vmbuf);
  FreeAccessStrategy(strategy);
  ExecDropSingleTupleTableSlot(slot);
  s->cache = TOPK_CACHE_TOO_LARGE;
  if (s->remote) {
    gknn_service_topk_keep(s->remote, false);
    bool committed = false;
    gknn::expr::EvalError err;
    const int r = gknn_service_topk_cache_commit(s->remote, lsn, n, vm.vm_lsn, vm.nvm, &committed, &err);
    if (r == kServiceTopKRaised) raise_eval_error(err);
    if (r == kServiceTopKGone) fall_back_to_cpu(s);
    if (committed) {
      s->cache = TOPK_CACHE_BUILT;
      s->cached_rows += rows;
    }
  }
  scan_heap(s, em, false, kept, static_cast<BlockNumber>(n));
  pfree(lsn);
  pfree(kept);
}

// A hit on the GPU service's table cache entry: the pages the probe asked
// about checked, the entry's rows the final map keeps ranked in the
// service while the other blocks are read from the heap (and shipped as
// usual). The kept blocks count as shipped: a service that stops midway
// leaves them to be read again from the heap. An entry that held every
// block the probe saw (none to check) came back ranked: the table's blocks
// past those hold no row this snapshot sees (it was taken before the probe
// counted them), so nothing is read.
void rank_from_cache(TopKScanState* s, const TopKEmitter* em, ServiceTopKCacheProbe* probe) {
  if (probe->final) {  // every block from the entry: ranked and finished with the probe
    s->cache = TOPK_CACHE_HIT;
    s->cached_rows += probe->ranked;
    return;
  }
  Relation rel = s->css.ss.ss_currentRelation;
  uint64* lsn = topk_check_pages(rel, probe->map, probe->map_blocks, probe->checks);
  s->cache_checked += probe->checks;
  int64 rows = 0;
  gknn::expr::EvalError err;
  instr_time start;
  INSTR_TIME_SET_CURRENT(start);
  int r = kServiceTopKOk;
  if (probe->checked)  // no page to check: the probe's map is final
    rows = probe->ranked;
  else
    r = gknn_service_topk_cache_check(s->remote, lsn, probe->checks, probe->map, &rows);
  if (r == kServiceTopKOk) r = gknn_service_topk_cache_rank(s->remote, &err);
  s->round_rank_ms += ms_since(start);
  pfree(lsn);
  if (r == kServiceTopKRaised) raise_eval_error(err);
  if (r == kServiceTopKGone) {
    fall_back_to_cpu(s);
    scan_heap(s, em, false);
    return;
  }
  s->cache = TOPK_CACHE_HIT;
  s->cached_rows += rows;
  for (int64 blk = 0; blk < probe->map_blocks;) {  // runs of whole blocks
    if (probe->map[blk] != 1) {
      ++blk;
      continue;
    }
    int64 end = blk + 1;
    while (end < probe->map_blocks && probe->map[end] == 1) ++end;
    note_shipped(s, gknn::expr::make_row_id(static_cast<uint32>(blk), FirstOffsetNumber));
    s->shipped[2 * (s->nshipped - 1) + 1] =
        gknn::expr::make_row_id(static_cast<uint32>(end - 1), MaxOffsetNumber);
    blk = end;
  }
  scan_heap(s, em, false, probe->map, static_cast<BlockNumber>(probe->map_blocks));
}

void add_stats(gknn::expr::TopKStats* to, const gknn::expr::TopKStats& from) {
  to->rows_scanned += from.rows_scanned;
  to->rows_passed += from.rows_passed;
  to->batches += from.batches;
  to->bytes_to_device += from.bytes_to_device;
  to->device_ms += from.device_ms;
}

void add_times(TopKTimes* to, const TopKTimes& from) {
  to->scan_ms += from.scan_ms;
  to->rank_ms += from.rank_ms;
}

void set_why(TopKPlace* place, const char* why) { strlcpy(place->why, why, sizeof(place->why)); }

// The backend's CPU TopK of the round's program.
void make_cpu_topk(TopKScanState* s, const TopKEmitter* em, int64 k) {
  const int64 cap = batch_capacity(em, false);
  rank_call(s, [&] {
    gknn::expr::Program p;
    std::vector<ColumnSpec> cols;
    build_program(em, p, cols);
    s->topk = gknn::expr::make_topk_cpu(p, cols, cap, k);
  });
}

}  // namespace

// Rows per batch shipped to the service: about 8 MB of shared memory per
// batch (two per participant), 1024 to 2^18 rows. A table cache entry is
// ranked by sessions of the same capacity (it depends on the columns only).
int64 topk_service_capacity(const TopKEmitter* em) {
  int64 row_bytes = 8;
  for (int c = 0; c < em->ncolumns; ++c)
    row_bytes += 1 + (em->columns[c].type == Type::Vector ? 4 + 4 * int64(em->columns[c].dim) : 8);
  return Max(int64(1024), Min(int64(1) << 18, (int64(8) << 20) / row_bytes));
}

namespace {

// Opens the round's session with the service; false when it went away
// meanwhile (gknn.device = auto).
bool start_service_round(TopKScanState* s, const TopKEmitter* em, int64 k, ServiceTopKCacheProbe* probe) {
  ServiceTopKProgram prog;
  prog.code = em->code;
  prog.ncode = em->ncode;
  prog.consts = em->consts;
  prog.const_nulls = em->const_nulls;
  prog.nconst = em->nconst;
  prog.vectors = em->vectors;
  prog.nvectors = em->nvectors;
  prog.qual = em->qual;
  prog.check = em->check;
  prog.keys = em->keys;
  prog.nkeys = em->nkeys;
  prog.columns = em->columns;
  prog.ncolumns = em->ncolumns;
  // The session goes with this context (deleted at the round's end, or with
  // the query's after an ERROR), so rescans do not pile sessions up.
  s->remote_cxt = AllocSetContextCreate(s->css.ss.ps.state->es_query_cxt, "GpuTopK service session",
                                        ALLOCSET_SMALL_SIZES);
  MemoryContext old = MemoryContextSwitchTo(s->remote_cxt);
  int device = -1;
  instr_time start;
  INSTR_TIME_SET_CURRENT(start);
  s->remote = gknn_service_topk_begin(prog, k, topk_service_capacity(em), &device, probe);
  s->round_rank_ms += ms_since(start);
  MemoryContextSwitchTo(old);
  s->place.device = device;
  return s->remote != nullptr;
}

// Where the round ranks, and starts it there (s->remote or s->topk): the
// GPU service where it serves (gknn_service_route: gknn.device = gpu needs
// it on a GPU, else 55000), else the backend's CPU. On a GPU service, a
// shape its kernels do not take is ranked on the backend's CPU (as a
// backend with its own GPU did). A serial scan of a table the cache may
// hold probes the service's table cache (reading the visibility map into
// *vm first); returns what the probe found (kServiceCacheNone without one).
int start_round(TopKScanState* s, const TopKEmitter* em, int64 k, ServiceTopKCacheProbe* probe,
                TopKVmRead* vm) {
  TopKPlace& place = s->place;
  memset(&place, 0, sizeof(place));
  place.device = -1;
  s->nshipped = 0;
  Relation rel = s->css.ss.ss_currentRelation;
  const bool cache =
      !s->partial && s->other_quals == NIL && topk_cache_usable(rel, s->css.ss.ps.state->es_snapshot);
  ServiceRoute route = gknn_service_route();
  bool supported = true;
  rank_call(s, [&] {
    gknn::expr::Program p;
    std::vector<ColumnSpec> cols;
    build_program(em, p, cols);
    gknn::expr::validate(p, cols);
    supported = gknn::expr::gpu_supports(p, k);
  });
  if (route.use_service && (route.device < 0 || supported)) {
    ServiceTopKCacheProbe* p = nullptr;
    if (cache) {
      topk_read_vm(rel, RelationGetNumberOfBlocks(rel), vm);
      memset(probe, 0, sizeof(*probe));
      probe->database = MyDatabaseId;
      probe->relation = RelationGetRelid(rel);
      probe->node = rel->rd_node;
      probe->attnos = em->attnos;
      probe->nblocks = vm->nblocks;
      probe->nvm = vm->nvm;
      probe->vm_span = topk_vm_span();
      probe->vm_lsn = vm->vm_lsn;
      probe->bits = vm->bits;
      p = probe;
    }
    if (start_service_round(s, em, k, p)) {
      place.service = true;
      return p ? p->state : kServiceCacheNone;
    }
    route.why = "the gknn service is not running";
  } else if (route.use_service) {
    route.why = "a shape the GPU kernels do not take";
  }
  set_why(&place, route.why);
  make_cpu_topk(s, em, k);
  return kServiceCacheNone;
}

// Adds the session's trips into the node's totals.
void absorb_trips(TopKScanState* s) {
  const ServiceTopKTrips& t = gknn_service_topk_trips(s->remote);
  s->trips.requests += t.requests;
  s->trips.batches += t.batches;
  s->trips.rows += t.rows;
  s->trips.queue_ms += t.queue_ms;
  s->trips.service_ms += t.service_ms;
}

// The rows shipped to the service in this round, read again into the
// backend's TopK: the runs note_shipped kept, under the same snapshot, the
// other quals run again where the round filters. Rows Scanned counts them
// once.
void rescan_shipped(TopKScanState* s, const TopKEmitter* em) {
  Relation rel = s->css.ss.ss_currentRelation;
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  const AttrNumber natts = max_attno(em);
  TupleTableSlot* slot = table_slot_create(rel, nullptr);
  TableScanDesc scan = table_beginscan_strat(rel, s->css.ss.ps.state->es_snapshot, 0, nullptr, true, false);
  const int runs = s->nshipped;
  s->nshipped = 0;
  gknn::expr::BatchView* b = nullptr;
  for (int i = 0; i < runs; ++i) {
    const uint64 first = s->shipped[2 * i], last = s->shipped[2 * i + 1];
    const BlockNumber from = static_cast<BlockNumber>(first >> 16), to = static_cast<BlockNumber>(last >> 16);
    table_rescan(scan, nullptr);
    heap_setscanlimits(scan, from, to - from + 1);
    while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
      const uint64 id = gknn::expr::make_row_id(ItemPointerGetBlockNumber(&slot->tts_tid),
                                                ItemPointerGetOffsetNumber(&slot->tts_tid));
      if (id < first || id > last) continue;
      ResetExprContext(ec);
      if (s->round_filter && s->residual) {
        ec->ecxt_scantuple = slot;
        if (!ExecQual(s->residual, ec)) continue;
      }
      add_row(s, em, slot, natts, b);
    }
  }
  if (b && b->n > 0) push_batch(s);
  table_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
}

// The service stopped during the round (gknn.device = auto; gpu raised
// 55000): the backend's CPU ranks the round, starting with the rows the
// service had; the scan then goes on.
void fall_back_to_cpu(TopKScanState* s) {
  absorb_trips(s);
  s->remote = nullptr;  // closed and unmapped by the client
  s->place.fell_back = true;
  set_why(&s->place, "the service stopped during the scan");
  ereport(LOG,
          (errmsg("gknn: the GPU service stopped during a GpuTopK scan; it goes on on the backend's CPU")));
  make_cpu_topk(s, s->round_em, s->round_topk_k);
  rescan_shipped(s, s->round_em);
}

// The round's rows, best first, from the service or the backend's TopK
// (palloc'd ids); its counters into *stats.
void finish_round(TopKScanState* s, uint64** ids, int64* n, gknn::expr::TopKStats* stats) {
  gknn::expr::EvalError err;
  *ids = nullptr;
  *n = 0;
  if (s->remote) {
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    const int r = gknn_service_topk_finish(s->remote, &err, ids, n, stats);
    s->round_rank_ms += ms_since(start);
    if (r == kServiceTopKGone) {
      fall_back_to_cpu(s);  // then finished below
    } else {
      absorb_trips(s);
      s->remote = nullptr;
      if (r == kServiceTopKRaised) raise_eval_error(err);
      return;
    }
  }
  bool ok = true;
  std::vector<gknn::expr::Selected>* rows = nullptr;
  rank_call(s, [&] {
    ok = s->topk->finish(err);
    if (ok) rows = new std::vector<gknn::expr::Selected>(s->topk->result());
    *stats = s->topk->stats();
  });
  if (!ok) raise_eval_error(err);
  const int64 count = static_cast<int64>(rows->size());
  uint64* out = static_cast<uint64*>(
      palloc_extended(sizeof(uint64) * Max(count, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  gknn_pg::core_call([&] {
    if (out)
      for (int64 j = 0; j < count; ++j) out[j] = (*rows)[j].row_id();
    delete rows;
    delete s->topk;
    s->topk = nullptr;
  });
  if (!out) ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
  *ids = out;
  *n = count;
}

// One scan: the best k rows (by the compiled quals, and by the other quals
// too when `filter`) into s->row_ids.
void run_round(TopKScanState* s, int64 k, bool filter) {
  const int64 heap_rows_before = s->heap_rows;
  const ServiceTopKTrips trips_before = s->trips;
  instr_time start;
  INSTR_TIME_SET_CURRENT(start);
  s->round_rank_ms = 0;
  ++s->rounds;
  ++s->run_rounds;
  TopKEmitter em;
  compile_program(s, &em);
  if (!s->partial && s->other_quals == NIL &&
      topk_cache_usable(s->css.ss.ss_currentRelation, s->css.ss.ps.state->es_snapshot))
    topk_cache_widen(s->css.ss.ss_currentRelation, &em);  // an entry holding more columns serves too
  s->round_em = &em;
  s->round_topk_k = k;
  s->round_filter = filter;
  s->cache = TOPK_CACHE_UNUSED;
  ServiceTopKCacheProbe probe;
  TopKVmRead vm;
  const int use = start_round(s, &em, k, &probe, &vm);
  if (use == kServiceCacheHit)
    rank_from_cache(s, &em, &probe);
  else if (use == kServiceCacheFill)
    fill_cache(s, &em, vm);
  else
    scan_heap(s, &em, filter);
  uint64* ids = nullptr;
  int64 n = 0;
  gknn::expr::TopKStats run_stats;
  finish_round(s, &ids, &n, &run_stats);
  // EXPLAIN ANALYZE's numbers are totals over the node's runs (rescans).
  add_stats(&s->stats, run_stats);
  const TopKTimes run_times{ms_since(start) - s->round_rank_ms, s->round_rank_ms};
  add_times(&s->times, run_times);
  if (s->remote_cxt) MemoryContextDelete(s->remote_cxt);  // the session, closed
  s->remote_cxt = nullptr;
  s->round_em = nullptr;
  if (s->row_ids) pfree(s->row_ids);
  s->row_ids = ids;
  s->nrows = n;
  s->round_k = k;
  if (s->shared && IsParallelWorker() && ParallelWorkerNumber < s->shared->nworkers) {
    TopKWorkerStats* w = &s->shared->workers[ParallelWorkerNumber];  // this worker's slot: no lock
    w->ran = true;
    w->place = s->place;
    w->heap_rows += s->heap_rows - heap_rows_before;
    add_stats(&w->stats, run_stats);
    add_times(&w->times, run_times);
    w->trips.requests += s->trips.requests - trips_before.requests;
    w->trips.batches += s->trips.batches - trips_before.batches;
    w->trips.rows += s->trips.rows - trips_before.rows;
    w->trips.queue_ms += s->trips.queue_ms - trips_before.queue_ms;
    w->trips.service_ms += s->trips.service_ms - trips_before.service_ms;
  }
}

// The most candidates a recheck round fetches: 8 x gknn.max_k (the planner
// offers a recheck when the first round's are at most gknn.max_k).
int64 max_candidates() { return 8 * int64(gknn_max_k); }

void run_topk(TopKScanState* s) {
  s->done = true;
  s->ran = true;
  int64 count = 0, offset = 0;
  bool no_count = false;
  eval_limits(s, &count, &offset, &no_count);
  s->nrows = s->next = 0;
  if (!no_count && count == 0) return;  // as ExecLimit: the scan does not run
  const int64 k = no_count || count > PG_INT64_MAX - offset ? PG_INT64_MAX : count + offset;
  s->k = k;
  s->offset_rows = offset;
  s->passed = 0;
  s->fallback = false;
  s->run_rounds = 0;
  const int64 fetch = topk_overfetch(k, s->other_selectivity);
  if (s->recheck && fetch <= max_candidates()) {
    run_round(s, fetch, false);
  } else if (s->recheck) {  // a LIMIT parameter far above the plan's: filter during the scan
    run_round(s, k, true);
    s->fallback = true;
  } else {
    run_round(s, k, true);
    s->next = s->partial ? 0 : Min(offset, s->nrows);
  }
}

// A recheck's candidates ran out: the next round, or false when no rows
// are left.
bool next_round(TopKScanState* s) {
  if (!s->recheck || s->fallback || s->nrows < s->round_k) return false;
  const int64 checked = s->nrows;
  if (s->run_rounds == 1 && s->round_k <= max_candidates() / 8) {
    run_round(s, s->round_k * 8, false);
    s->next = checked;  // the first round's candidates lead this list
  } else {
    run_round(s, s->k, true);
    s->fallback = true;
    s->next = s->passed;  // they lead this list of rows that pass everything
  }
  return true;
}

// The row `id` of the node's relation, as the query's snapshot sees it.
TupleTableSlot* fetch_row(TopKScanState* s, uint64 id) {
  ItemPointerData tid;
  ItemPointerSet(&tid, static_cast<BlockNumber>(id >> 16), static_cast<OffsetNumber>(id & 0xffff));
  TupleTableSlot* slot = s->fetch_slot;
  if (!table_tuple_fetch_row_version(s->css.ss.ss_currentRelation, &tid, s->css.ss.ps.state->es_snapshot,
                                     slot))
    elog(ERROR, "GpuTopK: selected tuple (%u,%u) is not visible", static_cast<unsigned>(id >> 16),
         static_cast<unsigned>(id & 0xffff));
  return slot;
}

// The next row to return, fetched; null at the end.
TupleTableSlot* next_row(TopKScanState* s) {
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  if (!s->recheck) {
    if (s->next >= s->nrows) return nullptr;
    ResetExprContext(ec);
    return fetch_row(s, s->row_ids[s->next++]);
  }
  while (s->passed < s->k) {
    if (s->next >= s->nrows && !next_round(s)) return nullptr;
    if (s->next >= s->nrows) continue;
    ResetExprContext(ec);
    TupleTableSlot* slot = fetch_row(s, s->row_ids[s->next++]);
    if (!s->fallback) {
      CHECK_FOR_INTERRUPTS();
      ++s->rechecked;
      ec->ecxt_scantuple = slot;
      if (!ExecQual(s->residual, ec)) {
        ++s->removed;
        continue;
      }
    }
    if (++s->passed > s->offset_rows) return slot;
  }
  return nullptr;
}

TupleTableSlot* exec_scan(CustomScanState* node) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  if (!s->done) run_topk(s);
  TupleTableSlot* slot = next_row(s);
  if (!slot) return nullptr;
  // The scan slot is virtual (ExecInitCustomScan) and the projection reads it so.
  ExprContext* ec = node->ss.ps.ps_ExprContext;
  slot = ExecCopySlot(node->ss.ss_ScanTupleSlot, slot);
  ec->ecxt_scantuple = slot;
  return node->ss.ps.ps_ProjInfo ? ExecProject(node->ss.ps.ps_ProjInfo) : slot;
}

void copy_worker_stats(dsm_segment* seg, Datum arg);

void end_scan(CustomScanState* node) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  free_topk(s);
  // The segment is still attached (its detach would have cleared
  // detach_seg): the workers' numbers are not needed past this point.
  if (s->detach_seg) cancel_on_dsm_detach(s->detach_seg, copy_worker_stats, PointerGetDatum(s));
  s->detach_seg = nullptr;
  s->shared = nullptr;
  s->pscan = nullptr;
}

void rescan(CustomScanState* node) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  free_topk(s);
  s->done = false;
  s->nrows = s->next = 0;
}

// ---- parallel execution ----

Size shared_header_size(int nworkers) {
  return MAXALIGN(offsetof(TopKShared, workers) + sizeof(TopKWorkerStats) * Max(nworkers, 0));
}

Size estimate_dsm(CustomScanState* node, ParallelContext* pcxt) {
  return add_size(shared_header_size(pcxt->nworkers),
                  table_parallelscan_estimate(node->ss.ss_currentRelation, node->ss.ps.state->es_snapshot));
}

// Called in the leader as the segment detaches (end of the Gather Merge, or
// error cleanup), while the executor's memory is still there: the workers'
// numbers are added into the leader's copy for EXPLAIN ANALYZE. No
// allocation, no error.
void copy_worker_stats(dsm_segment* seg, Datum arg) {
  (void)seg;
  TopKScanState* s = reinterpret_cast<TopKScanState*>(DatumGetPointer(arg));
  if (s->shared) {
    const int n = Min(s->shared->nworkers, s->nworker_stats);
    for (int i = 0; i < n; ++i) {
      const TopKWorkerStats& from = s->shared->workers[i];
      TopKWorkerStats& to = s->worker_stats[i];
      if (!from.ran) continue;
      to.ran = true;
      to.place = from.place;
      to.trips.requests += from.trips.requests;
      to.trips.batches += from.trips.batches;
      to.trips.rows += from.trips.rows;
      to.trips.queue_ms += from.trips.queue_ms;
      to.trips.service_ms += from.trips.service_ms;
      to.heap_rows += from.heap_rows;
      add_stats(&to.stats, from.stats);
      add_times(&to.times, from.times);
    }
  }
  s->detach_seg = nullptr;
  s->shared = nullptr;
  s->pscan = nullptr;
}

void initialize_dsm(CustomScanState* node, ParallelContext* pcxt, void* coordinate) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  EState* estate = node->ss.ps.state;
  TopKShared* shared = static_cast<TopKShared*>(coordinate);
  const Size header = shared_header_size(pcxt->nworkers);
  memset(static_cast<void*>(shared), 0, header);
  shared->nworkers = pcxt->nworkers;
  shared->pscan_offset = header;
  s->pscan = reinterpret_cast<ParallelTableScanDesc>(static_cast<char*>(coordinate) + header);
  table_parallelscan_initialize(node->ss.ss_currentRelation, s->pscan, estate->es_snapshot);
  s->shared = shared;
  // Room for the workers' numbers, kept across the query's parallel contexts
  // (a Gather Merge may set one up again after a shutdown).
  if (pcxt->nworkers > s->nworker_stats) {
    TopKWorkerStats* more = static_cast<TopKWorkerStats*>(
        MemoryContextAllocZero(estate->es_query_cxt, sizeof(TopKWorkerStats) * pcxt->nworkers));
    if (s->nworker_stats > 0) memcpy(more, s->worker_stats, sizeof(TopKWorkerStats) * s->nworker_stats);
    s->worker_stats = more;
    s->nworker_stats = pcxt->nworkers;
  }
  if (pcxt->seg != nullptr && pcxt->nworkers > 0) {
    if (s->detach_seg) cancel_on_dsm_detach(s->detach_seg, copy_worker_stats, PointerGetDatum(s));
    s->detach_seg = pcxt->seg;
    on_dsm_detach(pcxt->seg, copy_worker_stats, PointerGetDatum(s));
  }
}

void reinitialize_dsm(CustomScanState* node, ParallelContext* pcxt, void* coordinate) {
  (void)pcxt;
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  TopKShared* shared = static_cast<TopKShared*>(coordinate);
  s->shared = shared;
  s->pscan = reinterpret_cast<ParallelTableScanDesc>(static_cast<char*>(coordinate) + shared->pscan_offset);
  table_parallelscan_reinitialize(node->ss.ss_currentRelation, s->pscan);
}

void initialize_worker(CustomScanState* node, shm_toc* toc, void* coordinate) {
  (void)toc;
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  TopKShared* shared = static_cast<TopKShared*>(coordinate);
  s->shared = shared;
  s->pscan = reinterpret_cast<ParallelTableScanDesc>(static_cast<char*>(coordinate) + shared->pscan_offset);
}

}  // namespace

CustomScanMethods gknn_topk_scan_methods = {"GpuTopK", create_state};
