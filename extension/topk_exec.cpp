// GpuTopK execution: on the first call, a heap scan under the query's
// snapshot (PostgreSQL decides visibility) deforms only the columns the
// program reads into the core's batches; the core keeps the k best rows
// (keys + TIDs) across batches on the GPU or the CPU; then the k tuples are
// fetched by TID in order and projected.
#include <cstring>

#include "core_call.h"
#include "device.h"
#include "topk_state.h"
#include "vector.h"

extern "C" {
#include "access/tableam.h"
#include "miscadmin.h"
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

const CustomExecMethods exec_methods = {"GpuTopK", begin_scan, exec_scan,        end_scan, rescan,
                                        nullptr,   nullptr,    nullptr,          nullptr,  nullptr,
                                        nullptr,   nullptr,    gknn_topk_explain};

Node* create_state(CustomScan* cscan) {
  TopKScanState* s = static_cast<TopKScanState*>(palloc0(sizeof(TopKScanState)));
  NodeSetTag(s, T_CustomScanState);
  s->css.methods = &exec_methods;
  List* counts = static_cast<List*>(linitial(cscan->custom_private));
  const int nquals = intVal(list_nth(counts, 0)), nkeys = intVal(list_nth(counts, 1)),
            nchecks = intVal(list_nth(counts, 2));
  s->quals_compiled = intVal(list_nth(counts, 3)) != 0;
  s->dirs = static_cast<List*>(lsecond(cscan->custom_private));
  List* e = cscan->custom_exprs;
  s->quals = list_copy_head(e, nquals);
  s->keys = list_copy_head(list_copy_tail(e, nquals), nkeys);
  s->checks = list_copy_head(list_copy_tail(e, nquals + nkeys), nchecks);
  s->limit = static_cast<Expr*>(list_nth(e, nquals + nkeys + nchecks));
  s->offset = static_cast<Expr*>(list_nth(e, nquals + nkeys + nchecks + 1));
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
  if (!s->quals_compiled) {
    // The residual quals read the heap slot of the scan, not the node's
    // virtual scan slot: let them deform whatever slot they are given.
    bool fixed = ps->scanopsfixed;
    ps->scanopsfixed = false;
    s->residual = ExecInitQual(s->quals, ps);
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
  bool ok = !s->quals_compiled || topk_compile_quals(em, s->quals);
  ListCell *kc, *dc;
  forboth(kc, s->keys, dc, s->dirs) {
    int d = lfirst_int(dc);
    ok = ok && topk_compile_key(em, static_cast<Expr*>(lfirst(kc)), d & 1, d & 2);
  }
  ok = ok && topk_compile_checks(em, s->checks);
  if (!ok) elog(ERROR, "GpuTopK: an expression the planner compiled no longer compiles");
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

// One heap row into batch row r: only the program's columns.
void deform_row(const TopKEmitter* em, TupleTableSlot* slot, gknn::expr::BatchView* b, int64 r) {
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

void push_batch(TopKScanState* s) {
  gknn::expr::EvalError err;
  bool ok = true;
  gknn_pg::core_call([&] { ok = s->topk->push(err); });
  if (!ok) raise_eval_error(err);
}

void scan_heap(TopKScanState* s, const TopKEmitter* em) {
  EState* estate = s->css.ss.ps.state;
  Relation rel = s->css.ss.ss_currentRelation;
  ExprContext* ec = s->css.ss.ps.ps_ExprContext;
  AttrNumber max_attno = 0;
  for (int c = 0; c < em->ncolumns; ++c) max_attno = Max(max_attno, em->attnos[c]);
  TupleTableSlot* slot = table_slot_create(rel, nullptr);
  TableScanDesc scan = table_beginscan(rel, estate->es_snapshot, 0, nullptr);
  gknn::expr::BatchView* b = nullptr;
  gknn_pg::core_call([&] { b = &s->topk->next_batch(); });
  while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
    ++s->heap_rows;
    ResetExprContext(ec);
    if (s->residual) {
      ec->ecxt_scantuple = slot;
      if (!ExecQual(s->residual, ec)) continue;
    }
    slot_getsomeattrs(slot, max_attno);
    MemoryContext old = MemoryContextSwitchTo(ec->ecxt_per_tuple_memory);
    deform_row(em, slot, b, b->n++);
    MemoryContextSwitchTo(old);
    if (b->n == b->capacity) {
      push_batch(s);
      CHECK_FOR_INTERRUPTS();
      gknn_pg::core_call([&] { b = &s->topk->next_batch(); });
    }
  }
  if (b->n > 0) push_batch(s);
  table_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
}

void run_topk(TopKScanState* s) {
  s->done = true;
  s->ran = true;
  int64 count = 0, offset = 0;
  bool no_count = false;
  eval_limits(s, &count, &offset, &no_count);
  if (!no_count && count == 0) return;  // as ExecLimit: the scan does not run
  const int64 k = no_count || count > PG_INT64_MAX - offset ? PG_INT64_MAX : count + offset;
  s->k = k;
  TopKEmitter em;
  compile_program(s, &em);
  int device = gknn_resolve_device();
  const int64 cap_gpu = batch_capacity(&em, true), cap_cpu = batch_capacity(&em, false);
  gknn_pg::core_call([&] {
    gknn::expr::Program p;
    std::vector<ColumnSpec> cols;
    build_program(&em, p, cols);
    gknn::expr::validate(p, cols);
    if (device >= 0 && !gknn::expr::gpu_supports(p, k)) device = -1;
    s->topk = device >= 0 ? gknn::expr::make_topk_gpu(p, cols, cap_gpu, k, device)
                          : gknn::expr::make_topk_cpu(p, cols, cap_cpu, k);
  });
  s->device = device;
  scan_heap(s, &em);
  gknn::expr::EvalError err;
  bool ok = true;
  int64 n = 0;
  uint64* ids = nullptr;
  std::vector<gknn::expr::Selected>* rows = nullptr;
  gknn_pg::core_call([&] {
    ok = s->topk->finish(err);
    if (ok) rows = new std::vector<gknn::expr::Selected>(s->topk->result());
    s->stats = s->topk->stats();
  });
  if (!ok) raise_eval_error(err);
  n = static_cast<int64>(rows->size());
  ids =
      static_cast<uint64*>(palloc_extended(sizeof(uint64) * Max(n, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  gknn_pg::core_call([&] {
    if (ids)
      for (int64 j = 0; j < n; ++j) ids[j] = (*rows)[j].row_id();
    delete rows;
    delete s->topk;
    s->topk = nullptr;
  });
  if (!ids) ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
  s->row_ids = ids;
  s->nrows = n;
  s->next = Min(offset, n);
}

TupleTableSlot* exec_scan(CustomScanState* node) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  if (!s->done) run_topk(s);
  if (s->next >= s->nrows) return nullptr;
  const uint64 id = s->row_ids[s->next++];
  ItemPointerData tid;
  ItemPointerSet(&tid, static_cast<BlockNumber>(id >> 16), static_cast<OffsetNumber>(id & 0xffff));
  TupleTableSlot* slot = s->fetch_slot;
  if (!table_tuple_fetch_row_version(node->ss.ss_currentRelation, &tid, node->ss.ps.state->es_snapshot, slot))
    elog(ERROR, "GpuTopK: selected tuple (%u,%u) is not visible", static_cast<unsigned>(id >> 16),
         static_cast<unsigned>(id & 0xffff));
  ExprContext* ec = node->ss.ps.ps_ExprContext;
  ResetExprContext(ec);
  // The scan slot is virtual (ExecInitCustomScan) and the projection reads it so.
  slot = ExecCopySlot(node->ss.ss_ScanTupleSlot, slot);
  ec->ecxt_scantuple = slot;
  return node->ss.ps.ps_ProjInfo ? ExecProject(node->ss.ps.ps_ProjInfo) : slot;
}

void end_scan(CustomScanState* node) { free_topk(node); }

void rescan(CustomScanState* node) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  free_topk(s);
  s->done = false;
  s->nrows = s->next = 0;
  s->heap_rows = 0;
}

}  // namespace

CustomScanMethods gknn_topk_scan_methods = {"GpuTopK", create_state};
