// The GpuTopK path: for `SELECT ... FROM one_table WHERE ... ORDER BY keys
// LIMIT n [OFFSET m]`, a CustomScan that returns the final rows itself (scan,
// quals, ranking, top-k and projection), added beside PostgreSQL's own final
// paths (Limit over Sort, Limit over an ordered index scan, Gather Merge...)
// by create_upper_paths_hook at UPPERREL_FINAL, so add_path keeps whichever
// costs less. The path's parent is the base relation, so create_plan builds
// it as a scan of that relation with the final target list. Where the scan
// can run in parallel, a second path: Limit over Gather Merge over a partial
// GpuTopK (every participant returns its own best LIMIT + OFFSET rows).
//
// Quals are split one by one: those that compile run in the program (on
// the device); the others run in PostgreSQL, either during the scan on
// every row, or as a recheck of an over-fetched candidate list (the best
// topk_overfetch(k, their selectivity) rows by the compiled quals, fetched
// by TID in order until k pass; topk_exec.cpp fetches more when they run
// out). Both are offered and add_path keeps the cheaper; parallel plans
// only filter during the scan.
//
// Offered only where the result cannot change: one plain table, no
// grouping/aggregates/windows/DISTINCT/SRFs/locking/sublinks, every ORDER BY
// key compiles with its type's default ordering, and every target-list
// expression PostgreSQL would compute below its Sort compiles (its errors
// then count for every passing row, as they do in PostgreSQL).
#include <cmath>

#include "device.h"
#include "gknn/select.h"
#include "service/service.h"
#include "topk.h"
#include "topk_cache.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "utils/syscache.h"
#include "nodes/makefuncs.h"
#include "optimizer/clauses.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
}

bool gknn_enable_topk = true;
int gknn_topk_min_rows = 10000;
int gknn_max_k = 100000;
double gknn_topk_gpu_setup_cost = 5000;

extern CustomScanMethods gknn_topk_scan_methods;  // topk_exec.cpp

namespace {

create_upper_paths_hook_type prev_upper_hook = nullptr;

Plan* plan_topk(PlannerInfo* root, RelOptInfo* rel, CustomPath* path, List* tlist, List* clauses,
                List* custom_plans);

const CustomPathMethods path_methods = {"GpuTopK", plan_topk, nullptr};

RelOptInfo* single_base_rel(PlannerInfo* root) {
  RelOptInfo* found = nullptr;
  for (int i = 1; i < root->simple_rel_array_size; ++i) {
    RelOptInfo* r = root->simple_rel_array[i];
    if (r == nullptr) continue;
    if (r->reloptkind != RELOPT_BASEREL || found) return nullptr;
    found = r;
  }
  if (!found || found->rtekind != RTE_RELATION || IS_DUMMY_REL(found)) return nullptr;
  RangeTblEntry* rte = planner_rt_fetch(found->relid, root);
  if (rte->inh || rte->tablesample || (rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_MATVIEW))
    return nullptr;
  // Heap only: the executor's slots and TIDs are the heap's.
  HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rte->relid));
  if (!HeapTupleIsValid(tup)) return nullptr;
  Oid am = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup))->relam;
  ReleaseSysCache(tup);
  return am == HEAP_TABLE_AM_OID ? found : nullptr;
}

bool query_shape_ok(Query* q) {
  return q->commandType == CMD_SELECT && !q->hasAggs && !q->hasWindowFuncs && !q->hasTargetSRFs &&
         !q->hasForUpdate && q->rowMarks == NIL && q->groupClause == NIL && q->groupingSets == NIL &&
         q->havingQual == nullptr && q->distinctClause == NIL && q->setOperations == nullptr &&
         q->sortClause != NIL && q->limitCount != nullptr && q->limitOption == LIMIT_OPTION_COUNT &&
         !q->hasModifyingCTE;
}

// LIMIT and OFFSET: computable before the scan (constants, parameters).
bool limit_expr_ok(Node* n) {
  return n == nullptr || (!contain_var_clause(n) && !contain_volatile_functions(n) && !contain_subplans(n));
}

// k to plan for: limit + offset when constant, else the planner's estimate.
double planned_k(Query* q, FinalPathExtraData* fx) {
  double limit = fx->count_est > 0 ? fx->count_est : 100, offset = fx->offset_est > 0 ? fx->offset_est : 0;
  if (q->limitCount && IsA(q->limitCount, Const)) {
    Const* c = reinterpret_cast<Const*>(q->limitCount);
    limit = c->constisnull ? -1 : static_cast<double>(DatumGetInt64(c->constvalue));
  }
  return limit < 0 ? -1 : limit + offset;
}

List* actual_quals(RelOptInfo* rel) { return extract_actual_clauses(rel->baserestrictinfo, false); }

// The target-list entries that PostgreSQL computes below its Sort and
// that are not plain columns, constants or ORDER BY keys: they must compile
// (their errors are checked on every passing row). Volatile ones are
// postponed above the Limit by PostgreSQL, as GpuTopK computes them.
bool tlist_checks(PlannerInfo* root, Index relid, List* tlist, List** checks) {
  ListCell* lc;
  *checks = NIL;
  foreach (lc, tlist) {
    TargetEntry* te = static_cast<TargetEntry*>(lfirst(lc));
    Node* e = reinterpret_cast<Node*>(te->expr);
    if (IsA(e, Var) || IsA(e, Const) || te->ressortgroupref != 0 || contain_volatile_functions(e)) continue;
    if (!topk_expr_compiles(relid, te->expr)) return false;
    *checks = lappend(*checks, e);
  }
  (void)root;
  return true;
}

// The quals, one by one: those that compile (into `em`, as the program's
// qual) and the others. The others can be rechecked over candidates when
// none is volatile (PostgreSQL would evaluate a volatile qual on every row)
// and k is known; their selectivity sizes the over-fetch.
struct QualSplit {
  List* compiled = NIL;
  List* other = NIL;
  double other_selectivity = 1.0;
  bool recheckable = false;
};

// `quals` in their order, into those that run in the program (not
// volatile, and they compile) and the others. The path and the plan split
// by this one rule.
void split_by_compiling(Index relid, List* quals, List** compiled, List** other) {
  ListCell* lc;
  foreach (lc, quals) {
    Expr* e = static_cast<Expr*>(lfirst(lc));
    const bool compiles =
        !contain_volatile_functions(reinterpret_cast<Node*>(e)) && topk_expr_compiles(relid, e);
    if (compiles)
      *compiled = lappend(*compiled, e);
    else
      *other = lappend(*other, e);
  }
}

QualSplit split_quals(PlannerInfo* root, RelOptInfo* rel, TopKEmitter* em) {
  QualSplit q;
  split_by_compiling(rel->relid, actual_quals(rel), &q.compiled, &q.other);
  if (!topk_compile_quals(em, q.compiled))
    elog(ERROR, "GpuTopK: quals that compile one by one do not compile");
  if (q.other != NIL) {
    q.other_selectivity = clauselist_selectivity(root, q.other, rel->relid, JOIN_INNER, nullptr);
    q.recheckable = !contain_volatile_functions(reinterpret_cast<Node*>(q.other));
  }
  return q;
}

// Cost, in PostgreSQL's units, so that add_path compares it with
// PostgreSQL's own plans:
//   pages      seq_page_cost per heap page (as cost_seqscan; a parallel plan
//              does not divide it, as cost_seqscan does not); with the table
//              cache, per visibility map page and page not all-visible
//   rows       cpu_tuple_cost per heap row: the scan, deforming the program's
//              columns and filling the batch (the CPU side, also on a GPU)
//   program    cpu_operator_cost x ops x 0.5 per row on the CPU (ops: the
//              bytecode length + 2), x 0.02 on a GPU (overlapped with the scan)
//   quals      PostgreSQL's cost for quals that did not compile
//   fetch      k x (cpu_tuple_cost + 0.1 seq_page_cost): the k rows by TID
//   GPU setup  gknn.topk_gpu_setup_cost per query (a session in the GPU
//              service: its batches and device buffers; a tenth of it for
//              a table cache hit, which has neither); in a parallel plan
//              every participant opens its own, concurrently, so once in the
//              participant's cost. (Parallel workers used to open a CUDA
//              context each, about 1 s at 10M rows on the H200: with the
//              service no process but the service opens one.)
// A partial path is one participant: rows, program and quals are divided by
// the parallel divisor (get_parallel_divisor's rule), and it fetches and
// returns its own k rows.
//
// Measured on the CPU path (bench/topk/calibrate.sh, 2M-row tweets table and
// 200K x 128 vectors, 2 cores, medians of 5;
// bench/results/topk-calibrate-cpu-2026-11-21.md): the estimated cost per
// measured ms is about the same for GpuTopK's plans as for PostgreSQL's own
// plans of the same query: 0.0023-0.0041 ms per cost unit for GpuTopK serial
// and parallel, 0.0028-0.0039 for PostgreSQL's Sort and Gather Merge plans
// (PostgreSQL underprices its numeric arithmetic: Q2 at 0.0056-0.0061). So
// the CPU constants stand as they were; GpuTopK is, if anything, slightly
// overpriced. On the H200 with the GPU service (calibrate.sh with
// CACHE_MB, bench/results/topk-calibrate-H200-2026-11-27.md): PostgreSQL's
// plans 0.0046-0.0057 ms per unit serial, 0.0019-0.0028 parallel; GpuTopK
// 0.0028-0.0045 serial, 0.0020-0.0030 parallel, 0.0014-0.0036 from the
// table cache; the lowest estimate was the fastest plan of every query. So
// the GPU setup cost stands at 5000 units (about 15 ms), a tenth of it for
// a cache hit (1.3-3.0 ms measured for the whole query).
double parallel_divisor(int workers) {
  double divisor = workers;
  if (parallel_leader_participation) {
    double leader = 1.0 - 0.3 * workers;
    if (leader > 0) divisor += leader;
  }
  return divisor;
}

void cost_topk(PlannerInfo* root, RelOptInfo* rel, CustomPath* p, double k, const QualSplit& q, int ops,
               bool gpu, int workers, bool recheck, bool cached = false) {
  const double divisor = workers > 0 ? parallel_divisor(workers) : 1.0;
  // With the table cache the heap's pages are not read: its visibility map
  // is, and the pages the map does not vouch for (the part not all-visible,
  // rel->allvisfrac, as index-only scans price theirs); a page check instead
  // of every row's scan and deform. (Priced as heap pages, a cached 1M x 128
  // vector table cost more than PostgreSQL's 16-worker plan, which the
  // planner chose at 48 ms over the cache's 10.8 ms on the H200:
  // bench/results/topk-H200-2026-11-27-cache-run4.md.)
  const double vm_pages = ceil(rel->pages / double(topk_vm_span()));
  Cost startup = seq_page_cost * (cached ? rel->pages * (1.0 - rel->allvisfrac) + vm_pages : rel->pages);
  Cost cpu = cached ? cpu_operator_cost * rel->pages : cpu_tuple_cost * rel->tuples;
  double per_row_ops = gpu ? 0.02 * ops : 0.5 * ops;
  cpu += cpu_operator_cost * per_row_ops * rel->tuples;
  QualCost qc{0, 0};
  if (q.other != NIL) cost_qual_eval(&qc, q.other, root);
  startup += qc.startup;
  if (!recheck) cpu += qc.per_tuple * rel->tuples;
  // A cache hit's session ships no batches and takes no batch buffers: its
  // three or four round trips to the service cost 1.0-2.4 ms on the H200
  // (bench/results/topk-H200-2026-11-27-dsm.md), about 500 units at the
  // 0.003 ms per unit calibrated below; at the full setup cost, PostgreSQL's
  // 200 ms plan over Fashion-MNIST's TOASTed vectors (which it prices as
  // 1,800 units) won over the cache's. A tenth for the all-visible part of
  // the table (rel->allvisfrac: what the cache can hold; a table never
  // vacuumed fills, shipping every batch), and only for a k the GPU kernels
  // take (a larger one ranks on the backend's CPU, with no cache).
  if (gpu) {
    double setup = gknn_topk_gpu_setup_cost;
    if (cached && k >= 0 && k <= gknn::kMaxBitonicK) setup *= 0.1 + 0.9 * (1.0 - rel->allvisfrac);
    startup += setup;
  }
  double rows = k < 0 ? rel->rows / divisor : Min(k, rel->rows / divisor);
  Cost fetch = rows * (cpu_tuple_cost + seq_page_cost * 0.1);
  if (recheck) {
    // every candidate is fetched and rechecked (more rounds, when the
    // estimate was too high, are not priced)
    const double fetched = Min(double(topk_overfetch(int64(k), q.other_selectivity)), rel->tuples);
    fetch = fetched * (cpu_tuple_cost + seq_page_cost * 0.1 + qc.per_tuple);
  }
  p->path.rows = clamp_row_est(rows);
  p->path.startup_cost = startup + cpu / divisor + fetch;
  p->path.total_cost = p->path.startup_cost + rows * cpu_tuple_cost;
}

// Whether a serial GpuTopK over rel would use the GPU service's table cache
// (topk_cache.h): the GUC on, the service preloaded and used, every qual
// compiled, a permanent heap table, not SERIALIZABLE. The first query of
// the table's columns fills the entry (a scan); the cost is that of the
// queries after it (the visibility map and the pages it does not vouch
// for), as for an index image.
bool cache_applies(PlannerInfo* root, RelOptInfo* rel, const QualSplit& q) {
  if (gknn_topk_cache_mb <= 0 || !gknn_service_preloaded() || gknn_device_mode == GKNN_DEVICE_CPU ||
      q.other != NIL || IsolationIsSerializable())
    return false;
  HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(planner_rt_fetch(rel->relid, root)->relid));
  if (!HeapTupleIsValid(tup)) return false;
  const Form_pg_class c = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup));
  const bool ok = c->relkind == RELKIND_RELATION && c->relam == HEAP_TABLE_AM_OID &&
                  c->relpersistence == RELPERSISTENCE_PERMANENT;
  ReleaseSysCache(tup);
  return ok;
}

// workers > 0: a partial path (parallel aware, for a Gather Merge).
// custom_private: (partial, recheck, the other quals' selectivity).
CustomPath* make_topk_path(RelOptInfo* rel, PathTarget* target, List* pathkeys, int workers, bool recheck,
                           double other_selectivity) {
  CustomPath* p = makeNode(CustomPath);
  p->path.pathtype = T_CustomScan;
  p->path.parent = rel;
  p->path.pathtarget = target;
  p->path.param_info = nullptr;
  p->path.parallel_aware = workers > 0;
  p->path.parallel_safe = workers > 0;
  p->path.parallel_workers = workers;
  p->path.pathkeys = pathkeys;
  p->flags = 0;
  p->methods = &path_methods;
  // The selectivity travels as a String: a Float node that prints like an
  // integer ("1") would be read back as an Integer in parallel workers.
  p->custom_private = list_make3(makeInteger(workers > 0), makeInteger(recheck),
                                 makeString(psprintf("%.17g", other_selectivity)));
  return p;
}

// Participants for a parallel GpuTopK. PostgreSQL's rule
// (compute_parallel_worker) grows with the logarithm of the table's size:
// 4 workers for 550 MB. GpuTopK's participants are bound by scanning and
// deforming their share of the heap, which divides evenly, so a large table
// gets one participant per 4 x min_parallel_table_scan_size of heap, up to
// max_parallel_workers_per_gather. A table's parallel_workers setting
// still decides.
int topk_workers(RelOptInfo* rel) {
  const int by_log = compute_parallel_worker(rel, rel->pages, -1, max_parallel_workers_per_gather);
  if (rel->rel_parallel_workers != -1 || by_log <= 0) return by_log;
  const double share = 4.0 * Max(min_parallel_table_scan_size, 1);
  const int by_size = int(Min(double(max_parallel_workers_per_gather), double(rel->pages) / share));
  return Max(by_log, by_size);
}

// The parallel plan: Limit over Gather Merge (by the ORDER BY) over a
// partial GpuTopK in every participant, each returning its own best
// LIMIT + OFFSET rows in order; the Limit applies OFFSET and LIMIT. Only
// where everything the participants evaluate is parallel safe: the quals
// (rel->consider_parallel), the final target list, LIMIT and OFFSET; and no
// volatile functions in the target list (PostgreSQL postpones them above
// its Sort; here each participant would compute them for its k rows).
void add_partial_topk_path(PlannerInfo* root, RelOptInfo* rel, RelOptInfo* final_rel, FinalPathExtraData* fx,
                           double k, const QualSplit& quals, int ops) {
  Query* q = root->parse;
  PathTarget* target = root->upper_targets[UPPERREL_FINAL];
  if (!rel->consider_parallel || max_parallel_workers_per_gather <= 0 ||
      contain_volatile_functions(reinterpret_cast<Node*>(target->exprs)) ||
      !is_parallel_safe(root, reinterpret_cast<Node*>(target->exprs)) ||
      !is_parallel_safe(root, q->limitCount) || !is_parallel_safe(root, q->limitOffset))
    return;
  const int workers = topk_workers(rel);
  if (workers <= 0) return;
  CustomPath* p = make_topk_path(rel, target, root->sort_pathkeys, workers, false, 1.0);
  // The participants rank on a GPU only through the GPU service (one that
  // serves on a GPU now; a plan may outlive it, and then runs on CPUs).
  const bool gpu = gknn_device_mode != GKNN_DEVICE_CPU && gknn_service_serves_gpu();
  cost_topk(root, rel, p, k, quals, ops, gpu, workers, false);
  double rows = p->path.rows * parallel_divisor(workers);
  GatherMergePath* gm =
      create_gather_merge_path(root, rel, &p->path, target, root->sort_pathkeys, nullptr, &rows);
  LimitPath* limit = create_limit_path(root, final_rel, &gm->path, q->limitOffset, q->limitCount,
                                       q->limitOption, fx->offset_est, fx->count_est);
  add_path(final_rel, &limit->path);
}

void add_topk_path(PlannerInfo* root, RelOptInfo* final_rel, FinalPathExtraData* fx) {
  Query* q = root->parse;
  if (!fx->limit_needed || !query_shape_ok(q) || !limit_expr_ok(q->limitCount) ||
      !limit_expr_ok(q->limitOffset))
    return;
  RelOptInfo* rel = single_base_rel(root);
  if (!rel || rel->tuples < gknn_topk_min_rows) return;
  // Sub-selects: an uncorrelated one is an InitPlan whose result is a
  // PARAM_EXEC (compiled like $n); a SubPlan left in the quals or the target
  // list runs per row, which GpuTopK does not do.
  if (contain_subplans(reinterpret_cast<Node*>(root->processed_tlist)) ||
      contain_subplans(reinterpret_cast<Node*>(actual_quals(rel))))
    return;
  const double k = planned_k(q, fx);
  if (k > gknn_max_k || k < 0) return;

  // ORDER BY keys.
  TopKEmitter em;
  topk_emitter_init(&em, rel->relid, nullptr, nullptr);
  ListCell* lc;
  foreach (lc, q->sortClause) {
    SortGroupClause* s = static_cast<SortGroupClause*>(lfirst(lc));
    TargetEntry* te = get_sortgroupclause_tle(s, root->processed_tlist);
    bool desc = false;
    if (!topk_sortop_direction(s->sortop, exprType(reinterpret_cast<Node*>(te->expr)), &desc) ||
        contain_volatile_functions(reinterpret_cast<Node*>(te->expr)) ||
        !topk_compile_key(&em, te->expr, desc, s->nulls_first))
      return;
  }
  const QualSplit quals = split_quals(root, rel, &em);
  List* checks = NIL;
  if (!tlist_checks(root, rel->relid, root->processed_tlist, &checks)) return;

  const int ops = em.ncode + 2;
  const bool gpu = gknn_device_mode != GKNN_DEVICE_CPU;
  PathTarget* target = root->upper_targets[UPPERREL_FINAL];
  CustomPath* p = make_topk_path(rel, target, root->sort_pathkeys, 0, false, quals.other_selectivity);
  cost_topk(root, rel, p, k, quals, ops, gpu, 0, false, cache_applies(root, rel, quals));
  add_path(final_rel, &p->path);
  if (quals.recheckable && topk_overfetch(int64(k), quals.other_selectivity) <= gknn_max_k) {
    p = make_topk_path(rel, target, root->sort_pathkeys, 0, true, quals.other_selectivity);
    cost_topk(root, rel, p, k, quals, ops, gpu, 0, true);
    add_path(final_rel, &p->path);
  }
  add_partial_topk_path(root, rel, final_rel, fx, k, quals, ops);
}

void upper_paths_hook(PlannerInfo* root, UpperRelationKind stage, RelOptInfo* input_rel,
                      RelOptInfo* output_rel, void* extra) {
  if (prev_upper_hook) prev_upper_hook(root, stage, input_rel, output_rel, extra);
  if (stage != UPPERREL_FINAL || !gknn_enable_topk) return;
  add_topk_path(root, output_rel, static_cast<FinalPathExtraData*>(extra));
}

// custom_exprs: compiled quals, ORDER BY expressions, checks, LIMIT and
// OFFSET (a NULL Const when absent), then the quals PostgreSQL evaluates.
// custom_private: the counts of those lists, then the path's flags
// (partial: a participant of a parallel plan, which returns its best
// LIMIT + OFFSET rows and leaves OFFSET to the Limit above; recheck: the
// other quals are rechecked over candidates) and their selectivity.
Plan* plan_topk(PlannerInfo* root, RelOptInfo* rel, CustomPath* path, List* tlist, List* clauses,
                List* custom_plans) {
  (void)custom_plans;
  Query* q = root->parse;
  CustomScan* cs = makeNode(CustomScan);
  cs->scan.plan.targetlist = tlist;
  cs->scan.plan.qual = NIL;
  cs->scan.scanrelid = rel->relid;
  cs->flags = path->flags;
  cs->methods = &gknn_topk_scan_methods;
  // The same split as the path's (the quals are the path's restriction
  // clauses, which are the relation's).
  List* compiled = NIL;
  List* other = NIL;
  split_by_compiling(rel->relid, extract_actual_clauses(clauses, false), &compiled, &other);
  List* keys = NIL;
  List* dirs = NIL;
  ListCell* lc;
  foreach (lc, q->sortClause) {
    SortGroupClause* s = static_cast<SortGroupClause*>(lfirst(lc));
    TargetEntry* te = get_sortgroupclause_tle(s, root->processed_tlist);
    bool desc = false;
    topk_sortop_direction(s->sortop, exprType(reinterpret_cast<Node*>(te->expr)), &desc);
    keys = lappend(keys, copyObjectImpl(te->expr));
    dirs = lappend_int(dirs, (desc ? 1 : 0) | (s->nulls_first ? 2 : 0));
  }
  List* checks = NIL;
  tlist_checks(root, rel->relid, root->processed_tlist, &checks);
  Node* none = reinterpret_cast<Node*>(makeNullConst(INT8OID, -1, InvalidOid));
  List* exprs = list_concat(list_copy(compiled), keys);
  exprs = list_concat(exprs, list_copy(checks));
  exprs = lappend(exprs, q->limitCount ? static_cast<Node*>(copyObjectImpl(q->limitCount)) : none);
  exprs = lappend(exprs, q->limitOffset ? static_cast<Node*>(copyObjectImpl(q->limitOffset)) : none);
  exprs = list_concat(exprs, list_copy(other));
  cs->custom_exprs = exprs;
  List* counts = list_make4(makeInteger(list_length(compiled)), makeInteger(list_length(keys)),
                            makeInteger(list_length(checks)), makeInteger(list_length(other)));
  counts = list_concat(counts, path->custom_private);  // partial, recheck, selectivity
  cs->custom_private = list_make2(counts, dirs);
  return &cs->scan.plan;
}

}  // namespace

void gknn_topk_register(void) {
  prev_upper_hook = create_upper_paths_hook;
  create_upper_paths_hook = upper_paths_hook;
  RegisterCustomScanMethods(&gknn_topk_scan_methods);
}
