// EXPLAIN for GpuTopK: where each qual runs (the compiled program on the
// device, or PostgreSQL during the scan), the ORDER BY keys, and with
// ANALYZE the device, k, rows scanned and passing, batches, bytes moved and
// GPU time.
#include "topk_state.h"

extern "C" {
#include "commands/explain.h"
#include "nodes/makefuncs.h"
#include "utils/ruleutils.h"
}

namespace {

void show_exprs(const char* label, List* exprs, List* ctx, ExplainState* es) {
  if (exprs == NIL) return;
  Node* e = reinterpret_cast<Node*>(make_ands_explicit(exprs));
  ExplainPropertyText(label, deparse_expression(e, ctx, es->verbose, false), es);
}

void show_keys(TopKScanState* s, List* ctx, ExplainState* es) {
  List* out = NIL;
  ListCell *kc, *dc;
  forboth(kc, s->keys, dc, s->dirs) {
    int d = lfirst_int(dc);
    bool desc = d & 1, nulls_first = d & 2;
    char* e = deparse_expression(static_cast<Node*>(lfirst(kc)), ctx, es->verbose, false);
    const char* dir = desc ? " DESC" : "";
    const char* nulls = nulls_first != desc ? (nulls_first ? " NULLS FIRST" : " NULLS LAST") : "";
    out = lappend(out, psprintf("%s%s%s", e, dir, nulls));
  }
  ExplainPropertyList("Order By", out, es);
}

}  // namespace

void gknn_topk_explain(CustomScanState* node, List* ancestors, ExplainState* es) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  List* ctx = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
  show_keys(s, ctx, es);
  show_exprs(s->quals_compiled ? "Compiled Filter" : "Filter", s->quals, ctx, es);
  if (es->verbose) show_exprs("Compiled Checks", s->checks, ctx, es);
  if (!es->analyze || !s->ran) return;
  ExplainPropertyText("Device", s->device >= 0 ? psprintf("gpu %d", s->device) : "cpu", es);
  if (s->k != PG_INT64_MAX) ExplainPropertyInteger("K", nullptr, s->k, es);
  ExplainPropertyInteger("Rows Scanned", nullptr, s->heap_rows, es);
  ExplainPropertyInteger("Rows Passed", nullptr, s->stats.rows_passed, es);
  ExplainPropertyInteger("Batches", nullptr, s->stats.batches, es);
  if (s->device >= 0) {
    ExplainPropertyInteger("Bytes To Device", "bytes", s->stats.bytes_to_device, es);
    if (es->timing) ExplainPropertyFloat("GPU Time", "ms", s->stats.device_ms, 3, es);
  }
}
