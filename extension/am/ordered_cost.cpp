// The frame and units of gpu_ivfpq's and gpu_graph's amcostestimate
// (ordered_cost.h).
#include "am/ordered_cost.h"

#include <cmath>
#include <cstring>

extern "C" {
#include "access/relation.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "utils/float.h"
#include "utils/selfuncs.h"
}

void ordered_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                          Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages,
                          OrderedScanPricer price) {
  if (path->indexorderbys == NIL) {
    *startup_cost = get_float8_infinity();
    *total_cost = get_float8_infinity();
    *selectivity = 0;
    *correlation = 0;
    *pages = 0;
    return;
  }
  Relation rel = index_open(path->indexinfo->indexoid, NoLock);
  OrderedScanCost rounds = price(root, path, loop_count, rel);
  index_close(rel, NoLock);

  GenericCosts generic;
  memset(&generic, 0, sizeof(generic));
  genericcostestimate(root, path, loop_count, &generic);

  *startup_cost = generic.indexStartupCost + rounds.startup;
  *total_cost = generic.indexStartupCost + rounds.total;
  *selectivity = generic.indexSelectivity;
  *correlation = 0;
  *pages = generic.numIndexPages;
}

double ordered_sort_share(double n) { return n > 1 ? 2.0 * cpu_operator_cost * std::log2(n) : 0; }

double ordered_planned_k(PlannerInfo* root, RelOptInfo* rel, double default_k) {
  if (root->limit_tuples > 0 && bms_membership(root->all_baserels) == BMS_SINGLETON &&
      bms_is_member(rel->relid, root->all_baserels))
    return root->limit_tuples;
  return default_k;
}

double ordered_distance_price(PlannerInfo* root, IndexPath* path) {
  Node* clause = path->indexorderbys != NIL ? static_cast<Node*>(linitial(path->indexorderbys)) : nullptr;
  if (clause == nullptr || !IsA(clause, OpExpr)) return cpu_operator_cost;
  OpExpr* op = reinterpret_cast<OpExpr*>(clause);
  set_opfuncid(op);
  QualCost qc = {0, 0};
  add_function_cost(root, op->opfuncid, clause, &qc);
  return Max(qc.per_tuple, 0.0);
}
