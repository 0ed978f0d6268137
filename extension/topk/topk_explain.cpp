// EXPLAIN for GpuTopK: where each qual runs (Compiled Filter: the program,
// on the device; Filter: PostgreSQL during the scan; Recheck Filter:
// PostgreSQL over the fetched candidates), the ORDER BY keys, and with
// ANALYZE where the rows were ranked (Ranked On: the GPU service's GPU or
// CPU, or the backend's CPU and why), k, rows scanned and passing, batches,
// the batches shipped to the service and its queue wait and service time,
// bytes moved, GPU time, the table cache (hit, built or too large; rows
// ranked from it, beside Rows Scanned from the heap; pages it had to check),
// and a recheck's rounds and candidates. In a parallel plan the
// lines are the leader's own (as Sort reports its method), followed by one
// line (text) or group per worker.
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

// "service GPU 0", "service CPU", "backend CPU (why)", or the service's
// place followed by ", then backend CPU (why)" when it stopped midway.
const char* ranked_on(const TopKPlace& p) {
  const char* service = p.device >= 0 ? psprintf("service GPU %d", p.device) : "service CPU";
  if (!p.service) return psprintf("backend CPU (%s)", p.why);
  if (p.fell_back) return psprintf("%s, then backend CPU (%s)", service, p.why);
  return service;
}

bool on_gpu(const TopKPlace& p) { return p.service && !p.fell_back && p.device >= 0; }

void show_trips(const ServiceTopKTrips& t, ExplainState* es) {
  if (t.requests == 0) return;
  ExplainPropertyInteger("Service Batches", nullptr, t.batches, es);
  ExplainPropertyInteger("Service Rows", nullptr, t.rows, es);
  ExplainPropertyInteger("Service Requests", nullptr, t.requests, es);
  if (es->timing) {
    ExplainPropertyFloat("Queue Wait Time", "ms", t.queue_ms, 3, es);
    ExplainPropertyFloat("Service Time", "ms", t.service_ms, 3, es);
  }
}

void show_run(TopKScanState* s, ExplainState* es) {
  ExplainPropertyText("Ranked On", ranked_on(s->place), es);
  if (s->k != PG_INT64_MAX) ExplainPropertyInteger("K", nullptr, s->k, es);
  ExplainPropertyInteger("Rows Scanned", nullptr, s->heap_rows, es);
  ExplainPropertyInteger("Rows Passed", nullptr, s->stats.rows_passed, es);
  ExplainPropertyInteger("Batches", nullptr, s->stats.batches, es);
  show_trips(s->trips, es);
  if (on_gpu(s->place)) {
    ExplainPropertyInteger("Bytes To Device", "bytes", s->stats.bytes_to_device, es);
    if (es->timing) ExplainPropertyFloat("GPU Time", "ms", s->stats.device_ms, 3, es);
  }
  if (s->cache != TOPK_CACHE_UNUSED) {
    static const char* const use[] = {"", "hit", "built", "too large"};
    ExplainPropertyText("Table Cache", use[s->cache], es);
    ExplainPropertyInteger("Cached Rows", nullptr, s->cached_rows, es);
    if (s->cache == TOPK_CACHE_HIT)
      ExplainPropertyInteger("Cache Pages Checked", nullptr, s->cache_checked, es);
  }
  if (es->timing) {
    ExplainPropertyFloat("Scan Time", "ms", s->times.scan_ms, 3, es);
    ExplainPropertyFloat("Rank Time", "ms", s->times.rank_ms, 3, es);
  }
  if (s->recheck) {
    ExplainPropertyInteger("Scans", nullptr, s->rounds, es);
    ExplainPropertyInteger("Candidates Rechecked", nullptr, s->rechecked, es);
    ExplainPropertyInteger("Rows Removed by Recheck", nullptr, s->removed, es);
  }
}

void show_worker(int n, const TopKWorkerStats& w, ExplainState* es) {
  if (es->format == EXPLAIN_FORMAT_TEXT) {
    appendStringInfoSpaces(es->str, es->indent * 2);
    appendStringInfo(es->str,
                     "Worker %d:  Ranked On: %s  Rows Scanned: " INT64_FORMAT "  Rows Passed: " INT64_FORMAT
                     "  Batches: " INT64_FORMAT,
                     n, ranked_on(w.place), w.heap_rows, w.stats.rows_passed, w.stats.batches);
    if (w.trips.requests > 0) {
      appendStringInfo(es->str, "  Service Batches: " INT64_FORMAT "  Service Rows: " INT64_FORMAT,
                       w.trips.batches, w.trips.rows);
      if (es->timing)
        appendStringInfo(es->str, "  Queue Wait: %.3f ms  Service Time: %.3f ms", w.trips.queue_ms,
                         w.trips.service_ms);
    }
    if (on_gpu(w.place)) {
      appendStringInfo(es->str, "  Bytes To Device: " INT64_FORMAT "kB",
                       (w.stats.bytes_to_device + 1023) / 1024);
      if (es->timing) appendStringInfo(es->str, "  GPU Time: %.3f ms", w.stats.device_ms);
    }
    if (es->timing)
      appendStringInfo(es->str, "  Scan Time: %.3f ms  Rank Time: %.3f ms", w.times.scan_ms, w.times.rank_ms);
    appendStringInfoChar(es->str, '\n');
    return;
  }
  ExplainOpenGroup("Worker", nullptr, true, es);
  ExplainPropertyInteger("Worker Number", nullptr, n, es);
  ExplainPropertyText("Ranked On", ranked_on(w.place), es);
  ExplainPropertyInteger("Rows Scanned", nullptr, w.heap_rows, es);
  ExplainPropertyInteger("Rows Passed", nullptr, w.stats.rows_passed, es);
  ExplainPropertyInteger("Batches", nullptr, w.stats.batches, es);
  show_trips(w.trips, es);
  if (on_gpu(w.place)) {
    ExplainPropertyInteger("Bytes To Device", "bytes", w.stats.bytes_to_device, es);
    if (es->timing) ExplainPropertyFloat("GPU Time", "ms", w.stats.device_ms, 3, es);
  }
  if (es->timing) {
    ExplainPropertyFloat("Scan Time", "ms", w.times.scan_ms, 3, es);
    ExplainPropertyFloat("Rank Time", "ms", w.times.rank_ms, 3, es);
  }
  ExplainCloseGroup("Worker", nullptr, true, es);
}

void show_workers(TopKScanState* s, ExplainState* es) {
  bool any = false;
  for (int i = 0; i < s->nworker_stats; ++i) any = any || s->worker_stats[i].ran;
  if (!any) return;
  if (es->format != EXPLAIN_FORMAT_TEXT) ExplainOpenGroup("GpuTopK Workers", "GpuTopK Workers", false, es);
  for (int i = 0; i < s->nworker_stats; ++i)
    if (s->worker_stats[i].ran) show_worker(i, s->worker_stats[i], es);
  if (es->format != EXPLAIN_FORMAT_TEXT) ExplainCloseGroup("GpuTopK Workers", "GpuTopK Workers", false, es);
}

}  // namespace

void gknn_topk_explain(CustomScanState* node, List* ancestors, ExplainState* es) {
  TopKScanState* s = reinterpret_cast<TopKScanState*>(node);
  List* ctx = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
  show_keys(s, ctx, es);
  show_exprs("Compiled Filter", s->quals, ctx, es);
  show_exprs(s->recheck ? "Recheck Filter" : "Filter", s->other_quals, ctx, es);
  if (es->verbose) show_exprs("Compiled Checks", s->checks, ctx, es);
  if (!es->analyze) return;
  if (s->ran) show_run(s, es);
  show_workers(s, es);
}
