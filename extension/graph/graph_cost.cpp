// gpu_graph amcostestimate.
//
// The index serves only ORDER BY column <op> value: any other use costs
// infinity (the operator classes have no search operators, so the planner
// offers no other use; this keeps it so). An ordered scan is priced by the
// work it does (graph_scan.cpp), round by round, in the planner's own units,
// so that it compares fairly with the plan it competes with: a sequential
// scan that evaluates the distance operator once per row, then a top-N sort.
//
//   distance  one evaluation of the operator's function, priced as the
//             planner prices it in that plan (procost x cpu_operator_cost).
//   round r   a graph search with a candidate list of ef_r =
//             max(gknn.graph_ef_search, k) x 2^r: about 2 x ef_r nodes
//             expanded, each computing the distances of its `degree`
//             neighbours (at most every row), plus sorting its want_r =
//             k x 2^r rows (2 x cpu_operator_cost x log2, as cost_sort);
//             the round that asks for every row ranks every row once.
//   startup   round 0: the first row comes out after it.
//   total     the rounds until one ranks every row: what a scan with no
//             LIMIT, or whose filter keeps rejecting rows, goes through. The
//             planner charges a LIMIT k its startup plus the share k / rows
//             of the rest.
// The heap rows the scan returns are priced by cost_index as for any index.
//
// k is the query's LIMIT + OFFSET when the planner knows it and the scan's
// relation is the query's only one (as the ExecutorStart hook will find it),
// else kGraphDefaultK. Not priced: reading the index into its searchable
// image (the first scan in a backend after another backend changed it).
//
// What this gives: round 0 of LIMIT 10 at the default ef (40) and degree
// (32) costs at most 2,560 distances (about 6.4), or one per row in smaller
// tables, against about 0.035 per row for the sequential scan and top-N
// sort; so the index wins ORDER BY <op> value LIMIT k on tables of a few
// dozen rows on (as pgvector's hnsw is chosen), whatever the value is.
#include <cmath>

#include "graph.h"

extern "C" {
#include "access/relation.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "utils/float.h"
#include "utils/selfuncs.h"
}

namespace {

constexpr int kMaxRounds = 64;
constexpr double kExpansionsPerEf = 2.0;  // nodes a search expands per candidate-list slot

double sort_share(double n) { return n > 1 ? 2.0 * cpu_operator_cost * std::log2(n) : 0; }

double planned_k(PlannerInfo* root, RelOptInfo* rel) {
  if (root->limit_tuples > 0 && bms_membership(root->all_baserels) == BMS_SINGLETON &&
      bms_is_member(rel->relid, root->all_baserels))
    return root->limit_tuples;
  return kGraphDefaultK;
}

double distance_price(PlannerInfo* root, IndexPath* path) {
  Node* clause = path->indexorderbys != NIL ? static_cast<Node*>(linitial(path->indexorderbys)) : nullptr;
  if (clause == nullptr || !IsA(clause, OpExpr)) return cpu_operator_cost;
  OpExpr* op = reinterpret_cast<OpExpr*>(clause);
  set_opfuncid(op);
  QualCost qc = {0, 0};
  add_function_cost(root, op->opfuncid, clause, &qc);
  return Max(qc.per_tuple, 0.0);
}

// Round r's work; *done when it ranked every row.
double round_cost(double rows, double k, double ef0, double degree, double distance, int r, bool* done) {
  double scale = std::ldexp(1.0, r);
  double want = k * scale;
  if (want >= rows) {
    *done = true;
    return rows * (distance + sort_share(rows));
  }
  *done = false;
  double distances = Min(rows, kExpansionsPerEf * ef0 * scale * degree);
  return distances * distance + want * sort_share(want);
}

}  // namespace

void graph_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                        Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages) {
  if (path->indexorderbys == NIL) {
    *startup_cost = get_float8_infinity();
    *total_cost = get_float8_infinity();
    *selectivity = 0;
    *correlation = 0;
    *pages = 0;
    return;
  }
  IndexOptInfo* index = path->indexinfo;
  Relation rel = index_open(index->indexoid, NoLock);
  GraphMeta meta;
  graph_read_meta(rel, &meta);
  index_close(rel, NoLock);

  // Selectivity (a partial index's predicate), index pages, and the cost of
  // computing the order-by value once per scan, as genericcostestimate gives
  // them; its page and tuple costs are replaced.
  GenericCosts generic;
  memset(&generic, 0, sizeof(generic));
  genericcostestimate(root, path, loop_count, &generic);

  double rows = Max(index->tuples > 0 ? index->tuples : index->rel->tuples, 1.0);
  double k = Max(1.0, Min(planned_k(root, index->rel), rows));
  double ef0 = Max(static_cast<double>(gknn_graph_ef_search), k);
  double distance = distance_price(root, path);
  bool done = false;
  double startup = round_cost(rows, k, ef0, meta.degree, distance, 0, &done);
  double total = startup;
  for (int r = 1; !done && r < kMaxRounds; ++r)
    total += round_cost(rows, k, ef0, meta.degree, distance, r, &done);

  *startup_cost = generic.indexStartupCost + startup;
  *total_cost = generic.indexStartupCost + total;
  *selectivity = generic.indexSelectivity;
  *correlation = 0;
  *pages = generic.numIndexPages;
}
