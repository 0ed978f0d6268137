// EXPLAIN ANALYZE of a gpu_ivfpq (or gpu_graph) index scan: under each Index Scan node,
// where its searches ran (the GPU service's GPU or CPU, or this backend's
// CPU and why), how many, the sizes of the service batches they rode in,
// their queue wait and service time, the images the scan shipped.
//
// PostgreSQL 15 lets no index AM add to its node's EXPLAIN output, so three
// hooks work together:
//   - ExplainOneQuery_hook keeps the ExplainState of the EXPLAIN being run
//     (and, when it is done, puts the TEXT lines in place, below);
//   - an ExecutorFinish hook recognises that EXPLAIN's own query (its
//     source text is the EXPLAIN's) once it has run, so its PlanState tree,
//     whose scans hold their numbers until ExecutorEnd, is known while
//     EXPLAIN prints it, and only then;
//   - explain_get_index_name_hook, which ExplainNode calls while it prints
//     an index scan node, tells which node is being printed: the n-th call
//     for an index is the n-th scan of it in the order ExplainNode walks the
//     tree (planstate_tree_walker's order: init plans, outer, inner, special
//     children, subplans; a subplan printed once however often referenced).
// In JSON, YAML and XML the numbers are properties of the node, written
// where the hook is called (inside the node's group). In TEXT the hook is
// called in the middle of the node's first line, so the lines are recorded
// with their position and inserted after that line once the plan is printed.
//
// Why not the simpler ways: the index name hook alone sees no ExplainState,
// so it could only append the numbers to the index's name (which corrupts
// "Index Name" in JSON and cannot tell ANALYZE from plain EXPLAIN nor two
// scans of one index apart); ExplainOneQuery_hook alone can only print after
// the whole plan, not under the node.
//
// Not shown (nothing rather than wrong numbers): plain EXPLAIN; EXPLAIN
// EXECUTE and auto_explain (PostgreSQL 15 calls no ExplainOneQuery_hook for
// them); the first EXPLAIN of a session where gknn was neither preloaded nor
// loaded before the EXPLAIN started.
#include "am/ordered_scan.h"
#include "ivfpq.h"

extern "C" {
#include "access/relscan.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "tcop/tcopprot.h"
}

namespace {

// One EXPLAIN in progress (they nest: an EXPLAIN run by a function that an
// EXPLAIN ANALYZE executes).
struct Capture {
  ExplainState* es;
  const char* source;  // the EXPLAIN's query text, as its QueryDesc carries it
  QueryDesc* query;    // its query, from ExecutorFinish until ExecutorEnd
  List* scans;         // IndexScanState of gpu_ivfpq indexes, in print order
  bool* shown;         // per entry of scans
  bool collected;
  List* inserts;  // TEXT: TextInsert, to put in place once the plan is printed
  Capture* outer;
};

struct TextInsert {
  int offset;  // inside the node's first line
  char* lines;
};

Capture* current = nullptr;
ExplainOneQuery_hook_type prev_explain_one_query = nullptr;
explain_get_index_name_hook_type prev_index_name = nullptr;
ExecutorFinish_hook_type prev_executor_finish = nullptr;
ExecutorEnd_hook_type prev_executor_end = nullptr;

// A scan of a gpu_ivfpq or gpu_graph index (both scan through
// am/ordered_scan.h, which keeps OrderedScanStats).
bool is_ivfpq_scan(PlanState* ps) {
  if (!IsA(ps, IndexScanState)) return false;
  Relation index = reinterpret_cast<IndexScanState*>(ps)->iss_RelationDesc;
  return index != nullptr && index->rd_indam != nullptr &&
         index->rd_indam->amgettuple == ordered_scan_gettuple;
}

bool collect_walker(PlanState* ps, void* context) {
  if (ps == nullptr) return false;
  Capture* c = static_cast<Capture*>(context);
  if (is_ivfpq_scan(ps) && !list_member_ptr(c->scans, ps)) c->scans = lappend(c->scans, ps);
  // PostgreSQL 15 declares the walker without a prototype; void (*)() is
  // the generic function pointer a cast goes through without a warning.
  return planstate_tree_walker(ps, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(collect_walker)),
                               context);
}

// The next gpu_ivfpq scan node of `index` not yet printed, or null.
IndexScanState* next_scan(Capture* c, Oid index) {
  if (!c->collected) {
    collect_walker(c->query->planstate, c);
    c->shown = static_cast<bool*>(palloc0(sizeof(bool) * Max(list_length(c->scans), 1)));
    c->collected = true;
  }
  int i = 0;
  ListCell* lc;
  foreach (lc, c->scans) {
    auto* node = static_cast<IndexScanState*>(lfirst(lc));
    if (!c->shown[i] && reinterpret_cast<IndexScan*>(node->ss.ps.plan)->indexid == index) {
      c->shown[i] = true;
      return node;
    }
    ++i;
  }
  return nullptr;
}

const char* where_searched(const OrderedScanStats& st) {
  const char* service =
      st.service_device >= 0 ? psprintf("service GPU %d", st.service_device) : "service CPU";
  if (!st.via_service) return psprintf("backend CPU (%s)", st.cpu_reason);
  if (st.cpu_searches > 0) return psprintf("%s, then backend CPU (%s)", service, st.cpu_reason);
  return service;
}

void append_batch_sizes(StringInfo out, const OrderedScanStats& st) {
  if (st.batch_min == st.batch_max)
    appendStringInfo(out, "%lld", static_cast<long long>(st.batch_min));
  else
    appendStringInfo(out, "%lld..%lld (mean %.1f)", static_cast<long long>(st.batch_min),
                     static_cast<long long>(st.batch_max),
                     static_cast<double>(st.batch_total) / st.service_searches);
}

// TEXT: two lines at most, in the manner of "Sort Method: ...  Memory: ...".
char* text_lines(const OrderedScanStats& st, ExplainState* es) {
  StringInfoData out;
  initStringInfo(&out);
  appendStringInfoSpaces(&out, es->indent * 2);
  appendStringInfo(&out, "Searched On: %s\n", where_searched(st));
  if (st.via_service) {
    appendStringInfoSpaces(&out, es->indent * 2);
    appendStringInfo(&out, "Service Searches: %lld  Candidates: %lld",
                     static_cast<long long>(st.service_searches),
                     static_cast<long long>(st.service_candidates));
    if (st.service_searches > 0) {
      appendStringInfoString(&out, "  Batch Size: ");
      append_batch_sizes(&out, st);
      if (es->timing)
        appendStringInfo(&out, "  Queue Wait: %.3f ms  Service Time: %.3f ms", st.queue_ms, st.service_ms);
    }
    if (st.images_shipped > 0)
      appendStringInfo(&out, "  Images Shipped: %lld", static_cast<long long>(st.images_shipped));
    if (st.deltas_shipped > 0)
      appendStringInfo(&out, "  Deltas Shipped: %lld", static_cast<long long>(st.deltas_shipped));
    appendStringInfoChar(&out, '\n');
  }
  if (!st.via_service || st.cpu_searches > 0) {
    appendStringInfoSpaces(&out, es->indent * 2);
    appendStringInfo(&out, "Backend Searches: %lld  Candidates: %lld\n",
                     static_cast<long long>(st.cpu_searches), static_cast<long long>(st.cpu_candidates));
  }
  return out.data;
}

// JSON, YAML, XML: every property, always (a fixed set of keys per node).
void structured_properties(const OrderedScanStats& st, ExplainState* es) {
  ExplainPropertyText("Searched On", where_searched(st), es);
  ExplainPropertyInteger("Service Searches", nullptr, st.service_searches, es);
  ExplainPropertyInteger("Service Candidates", nullptr, st.service_candidates, es);
  ExplainPropertyInteger("Batch Size Min", nullptr, st.batch_min, es);
  ExplainPropertyInteger("Batch Size Max", nullptr, st.batch_max, es);
  ExplainPropertyFloat(
      "Batch Size Mean", nullptr,
      st.service_searches > 0 ? static_cast<double>(st.batch_total) / st.service_searches : 0, 1, es);
  if (es->timing) {
    ExplainPropertyFloat("Queue Wait Time", "ms", st.queue_ms, 3, es);
    ExplainPropertyFloat("Service Time", "ms", st.service_ms, 3, es);
  }
  ExplainPropertyInteger("Images Shipped", nullptr, st.images_shipped, es);
  ExplainPropertyInteger("Deltas Shipped", nullptr, st.deltas_shipped, es);
  ExplainPropertyInteger("Backend Searches", nullptr, st.cpu_searches, es);
  ExplainPropertyInteger("Backend Candidates", nullptr, st.cpu_candidates, es);
}

const char* index_name_hook(Oid index) {
  const char* name = prev_index_name ? prev_index_name(index) : nullptr;
  Capture* c = current;
  if (c == nullptr || c->query == nullptr || !c->es->analyze) return name;
  IndexScanState* node = next_scan(c, index);
  if (node == nullptr || node->iss_ScanDesc == nullptr) return name;  // not ours, or never executed
  const OrderedScanStats& st = *ordered_scan_stats(node->iss_ScanDesc);
  ExplainState* es = c->es;
  if (es->format == EXPLAIN_FORMAT_TEXT) {
    TextInsert* ins = static_cast<TextInsert*>(palloc(sizeof(TextInsert)));
    ins->offset = es->str->len;
    ins->lines = text_lines(st, es);
    c->inserts = lappend(c->inserts, ins);
  } else {
    structured_properties(st, es);
  }
  return name;
}

// Puts the recorded lines after the first line of their nodes, last first so
// that earlier offsets stay valid.
void insert_text_lines(Capture* c) {
  StringInfo str = c->es->str;
  for (int i = list_length(c->inserts) - 1; i >= 0; --i) {
    const TextInsert* ins = static_cast<const TextInsert*>(list_nth(c->inserts, i));
    const char* eol = static_cast<const char*>(memchr(str->data + ins->offset, '\n', str->len - ins->offset));
    int at = eol ? static_cast<int>(eol - str->data) + 1 : str->len;
    int n = static_cast<int>(strlen(ins->lines));
    enlargeStringInfo(str, n);
    memmove(str->data + at + n, str->data + at, str->len - at + 1);  // with the terminating NUL
    memcpy(str->data + at, ins->lines, n);
    str->len += n;
  }
}

// What PostgreSQL 15 does for a query without an ExplainOneQuery_hook (it
// has no standard_ExplainOneQuery to call): plan, timing the planner and its
// buffer use, then ExplainOnePlan.
void plan_and_explain(Query* query, int cursor_options, IntoClause* into, ExplainState* es,
                      const char* source, ParamListInfo params, QueryEnvironment* env) {
  BufferUsage before = pgBufferUsage, used;
  instr_time start, planning;
  INSTR_TIME_SET_CURRENT(start);
  PlannedStmt* plan = pg_plan_query(query, source, cursor_options, params);
  INSTR_TIME_SET_CURRENT(planning);
  INSTR_TIME_SUBTRACT(planning, start);
  memset(&used, 0, sizeof(used));
  BufferUsageAccumDiff(&used, &pgBufferUsage, &before);
  ExplainOnePlan(plan, into, es, source, params, env, &planning, es->buffers ? &used : nullptr);
}

void explain_one_query(Query* query, int cursor_options, IntoClause* into, ExplainState* es,
                       const char* source, ParamListInfo params, QueryEnvironment* env) {
  Capture* c = static_cast<Capture*>(palloc0(sizeof(Capture)));
  c->es = es;
  c->source = source;
  c->outer = current;
  current = c;
  PG_TRY();
  {
    if (prev_explain_one_query)
      prev_explain_one_query(query, cursor_options, into, es, source, params, env);
    else
      plan_and_explain(query, cursor_options, into, es, source, params, env);
    if (es->format == EXPLAIN_FORMAT_TEXT) insert_text_lines(c);
  }
  PG_FINALLY();
  { current = c->outer; }
  PG_END_TRY();
}

void executor_finish(QueryDesc* query) {
  if (prev_executor_finish)
    prev_executor_finish(query);
  else
    standard_ExecutorFinish(query);
  // Queries run inside the explained one (functions, triggers) finish
  // before it and have texts of their own.
  Capture* c = current;
  if (c != nullptr && c->query == nullptr && !c->collected && query->sourceText == c->source)
    c->query = query;
}

void executor_end(QueryDesc* query) {
  Capture* c = current;
  if (c != nullptr && c->query == query) c->query = nullptr;  // its scans end now
  if (prev_executor_end)
    prev_executor_end(query);
  else
    standard_ExecutorEnd(query);
}

}  // namespace

void ivfpq_register_explain() {
  prev_explain_one_query = ExplainOneQuery_hook;
  ExplainOneQuery_hook = explain_one_query;
  prev_index_name = explain_get_index_name_hook;
  explain_get_index_name_hook = index_name_hook;
  prev_executor_finish = ExecutorFinish_hook;
  ExecutorFinish_hook = executor_finish;
  prev_executor_end = ExecutorEnd_hook;
  ExecutorEnd_hook = executor_end;
}
