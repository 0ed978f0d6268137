// gpu_ivfpq (and gpu_graph): the k of a scan. The index AM API does not pass
// LIMIT, so an ExecutorStart hook (chaining any earlier one) looks in the
// plan for Limit nodes whose child, through Result and Gather nodes, is an
// Index Scan on a gpu_ivfpq or gpu_graph index, and records LIMIT + OFFSET for that index with the
// query's executor state; an ExecutorRun hook makes them the running query's
// while it runs (the executor begins an index scan lazily, at its first
// tuple, inside ExecutorRun), and ambeginscan reads them. Queries run inside
// another (functions, cursors fetched in a loop) have their own. Counts are
// taken from constants and from the query's $n parameters (also through
// integer casts); anything else (LIMIT ALL, subqueries, expressions) leaves
// k unknown and the scan starts from kIvfpqDefaultK, growing as rows are
// asked for.
#include "ivfpq.h"

#include "am/ordered_ams.h"
#include "am/plan_walk.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/params.h"
#include "nodes/plannodes.h"
}

namespace {

struct LimitHint {
  Oid index;
  int64 k;
};

constexpr int kMaxHints = 16;

// The hints of one query, in its executor state's memory: unlinked when
// that memory goes (ExecutorEnd, or an error's cleanup).
struct QueryHints {
  EState* estate;
  int n;
  LimitHint hints[kMaxHints];
  QueryHints* next;
  MemoryContextCallback freed;
};

QueryHints* started = nullptr;        // every query started and not yet freed
const QueryHints* running = nullptr;  // the innermost query in ExecutorRun
QueryHints* computing = nullptr;      // the query whose plan is being walked
ExecutorStart_hook_type prev_executor_start = nullptr;
ExecutorRun_hook_type prev_executor_run = nullptr;

bool int_value(Oid type, Datum d, int64* out) {
  switch (type) {
    case INT8OID:
      *out = DatumGetInt64(d);
      return true;
    case INT4OID:
      *out = DatumGetInt32(d);
      return true;
    case INT2OID:
      *out = DatumGetInt16(d);
      return true;
  }
  return false;
}

// The value of a LIMIT/OFFSET expression known at executor start.
bool eval_count(Node* node, ParamListInfo params, int64* out, bool* isnull) {
  *isnull = false;
  while (node != nullptr) {
    if (IsA(node, RelabelType)) {
      node = reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(node)->arg);
    } else if (IsA(node, FuncExpr)) {
      FuncExpr* f = reinterpret_cast<FuncExpr*>(node);
      if ((f->funcformat != COERCE_IMPLICIT_CAST && f->funcformat != COERCE_EXPLICIT_CAST) ||
          list_length(f->args) != 1)
        return false;
      node = static_cast<Node*>(linitial(f->args));
    } else {
      break;
    }
  }
  if (node == nullptr) return false;
  if (IsA(node, Const)) {
    Const* c = reinterpret_cast<Const*>(node);
    *isnull = c->constisnull;
    return c->constisnull || int_value(c->consttype, c->constvalue, out);
  }
  if (IsA(node, Param)) {
    Param* p = reinterpret_cast<Param*>(node);
    if (p->paramkind != PARAM_EXTERN || params == nullptr) return false;
    ParamExternData workspace;
    ParamExternData* prm = nullptr;
    if (params->paramFetch != nullptr)
      prm = params->paramFetch(params, p->paramid, false, &workspace);
    else if (p->paramid > 0 && p->paramid <= params->numParams)
      prm = &params->params[p->paramid - 1];
    if (prm == nullptr || !OidIsValid(prm->ptype)) return false;
    *isnull = prm->isnull;
    return prm->isnull || int_value(prm->ptype, prm->value, out);
  }
  return false;
}

void record(Oid index, int64 k) {
  QueryHints* q = computing;
  for (int i = 0; i < q->n; ++i)
    if (q->hints[i].index == index) {
      q->hints[i].k = Max(q->hints[i].k, k);  // the same index under two Limits: the larger
      return;
    }
  if (q->n < kMaxHints) q->hints[q->n++] = LimitHint{index, k};
}

void visit_limit(Limit* limit, ParamListInfo params, const OrderedAms& am) {
  Plan* child = outerPlan(&limit->plan);
  while (child != nullptr && (IsA(child, Result) || IsA(child, Gather))) child = outerPlan(child);
  if (child == nullptr || !IsA(child, IndexScan)) return;
  Oid index = reinterpret_cast<IndexScan*>(child)->indexid;
  if (!am.has_index(index)) return;  // gpu_ivfpq or gpu_graph: both read their k here
  int64 count, offset = 0;
  bool null_count, null_offset;
  if (limit->limitCount == nullptr || !eval_count(limit->limitCount, params, &count, &null_count) ||
      null_count)
    return;  // LIMIT ALL or not known now
  if (limit->limitOffset != nullptr &&
      (!eval_count(limit->limitOffset, params, &offset, &null_offset) || null_offset))
    offset = 0;
  if (count <= 0) return;
  offset = Max(offset, int64{0});
  record(index, count > PG_INT64_MAX / 4 - offset ? PG_INT64_MAX / 4 : count + offset);
}

void unlink_query(void* arg) {
  for (QueryHints** p = &started; *p != nullptr; p = &(*p)->next)
    if (*p == arg) {
      *p = (*p)->next;
      break;
    }
  if (running == arg) running = nullptr;
}

void ivfpq_executor_start(QueryDesc* qd, int eflags) {
  QueryHints found;
  found.n = 0;
  if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY) && qd->plannedstmt != nullptr) {
    const OrderedAms am = OrderedAms::lookup();
    if (am.any()) {
      computing = &found;
      walk_statement(qd->plannedstmt, [&](Plan* plan) {
        if (IsA(plan, Limit)) visit_limit(reinterpret_cast<Limit*>(plan), qd->params, am);
      });
      computing = nullptr;
    }
  }
  if (prev_executor_start)
    prev_executor_start(qd, eflags);
  else
    standard_ExecutorStart(qd, eflags);
  if (found.n == 0 || qd->estate == nullptr) return;
  QueryHints* q = static_cast<QueryHints*>(MemoryContextAlloc(qd->estate->es_query_cxt, sizeof(QueryHints)));
  memcpy(q, &found, sizeof(QueryHints));
  q->estate = qd->estate;
  q->next = started;
  q->freed.func = unlink_query;
  q->freed.arg = q;
  MemoryContextRegisterResetCallback(qd->estate->es_query_cxt, &q->freed);
  started = q;
}

void ivfpq_executor_run(QueryDesc* qd, ScanDirection direction, uint64 count, bool execute_once) {
  const QueryHints* outer = running;
  running = nullptr;
  for (const QueryHints* q = started; q != nullptr; q = q->next)
    if (q->estate == qd->estate) running = q;
  PG_TRY();
  {
    if (prev_executor_run)
      prev_executor_run(qd, direction, count, execute_once);
    else
      standard_ExecutorRun(qd, direction, count, execute_once);
  }
  PG_FINALLY();
  { running = outer; }
  PG_END_TRY();
}

}  // namespace

int64 ivfpq_limit_hint(Oid indexoid) {
  if (running == nullptr) return 0;
  for (int i = 0; i < running->n; ++i)
    if (running->hints[i].index == indexoid) return running->hints[i].k;
  return 0;
}

void ivfpq_register_limit_hook() {
  prev_executor_start = ExecutorStart_hook;
  ExecutorStart_hook = ivfpq_executor_start;
  prev_executor_run = ExecutorRun_hook;
  ExecutorRun_hook = ivfpq_executor_run;
}
