// A planner hook (chaining any earlier one) for `SELECT ... ORDER BY col <op>
// value LIMIT k` through a gpu_ivfpq or gpu_graph index.
//
// PostgreSQL puts the ORDER BY expression in the index scan's target list as
// a junk column and computes it for every row the scan returns, although
// the index has already ordered the rows: it reads the row's vector (out of
// line in TOAST for a 784-dimension float vector: two more index and heap
// lookups) and computes the distance again, ~7-16 us a row on one core
// (EXPLAIN ANALYZE, 5,000 x 784, the CPU path), as long as a GPU search of
// the whole query. Where nothing reads that column, it is replaced by a NULL
// of its type: the scan is the top of a plan tree, under Limit nodes only,
// none WITH TIES, and that tree is the statement's (the executor's junk
// filter drops the column before the client), a subquery's under a Subquery
// Scan (which projects the subquery's visible columns only: the RAG shape
// `FROM (SELECT id ... ORDER BY ... LIMIT k) s JOIN ...`), or an InitPlan's,
// SubPlan's or CTE's (they read their visible columns by position, the junk
// ones come after). The rows, their order and every output column are the
// same; EXPLAIN VERBOSE shows the NULL, as that is what the plan computes.
#include "am/ordered_projection.h"

#include "am/ordered_ams.h"
#include "am/plan_walk.h"
#include "pg.h"

extern "C" {
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
}

namespace {

planner_hook_type prev_planner = nullptr;

// The index scan whose junk columns nothing reads: the plan's top, or under
// Limit nodes that only count rows.
IndexScan* scan_at_top(Plan* plan) {
  while (plan != nullptr && IsA(plan, Limit)) {
    if (reinterpret_cast<Limit*>(plan)->limitOption == LIMIT_OPTION_WITH_TIES) return nullptr;
    plan = outerPlan(plan);
  }
  return plan != nullptr && IsA(plan, IndexScan) ? reinterpret_cast<IndexScan*>(plan) : nullptr;
}

bool is_order_by(Expr* e, const IndexScan* scan) {
  ListCell* lc;
  foreach (lc, scan->indexorderbyorig)
    if (equal(e, lfirst(lc))) return true;
  return false;
}

void drop_order_by_columns(IndexScan* scan) {
  ListCell* lc;
  foreach (lc, scan->scan.plan.targetlist) {
    auto* tle = static_cast<TargetEntry*>(lfirst(lc));
    if (!tle->resjunk || !is_order_by(tle->expr, scan)) continue;
    const Node* e = reinterpret_cast<const Node*>(tle->expr);
    tle->expr = reinterpret_cast<Expr*>(makeNullConst(exprType(e), exprTypmod(e), exprCollation(e)));
  }
}

// The scan at the top of `plan`, if it is an ordered scan of gknn's.
void drop_at_top(Plan* plan) {
  IndexScan* scan = scan_at_top(plan);
  if (scan != nullptr && scan->indexorderbyorig != NIL && OrderedAms::lookup().has_index(scan->indexid))
    drop_order_by_columns(scan);
}

PlannedStmt* ordered_planner(Query* parse, const char* query_string, int cursor_options,
                             ParamListInfo bound_params) {
  PlannedStmt* stmt = prev_planner ? prev_planner(parse, query_string, cursor_options, bound_params)
                                   : standard_planner(parse, query_string, cursor_options, bound_params);
  if (stmt->commandType != CMD_SELECT) return stmt;
  drop_at_top(stmt->planTree);
  ListCell* lc;
  foreach (lc, stmt->subplans)  // InitPlans, SubPlans, CTEs (null: a pruned one)
    drop_at_top(static_cast<Plan*>(lfirst(lc)));
  walk_statement(stmt, [](Plan* plan) {
    if (IsA(plan, SubqueryScan)) drop_at_top(reinterpret_cast<SubqueryScan*>(plan)->subplan);
  });
  return stmt;
}

}  // namespace

void ordered_projection_register() {
  prev_planner = planner_hook;
  planner_hook = ordered_planner;
}
