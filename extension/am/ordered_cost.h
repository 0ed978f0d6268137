// What the amcostestimate of gknn's index access methods (gpu_ivfpq,
// gpu_graph) share. Both serve only ORDER BY column <op> value and price an
// ordered scan by the work of its rounds, in the planner's own units, so
// that it compares fairly with the plan it competes with: a sequential scan
// that evaluates the distance operator once per row, then a top-N sort. The
// rounds' work is each access method's own (ivfpq/ivfpq_cost.cpp,
// graph/graph_cost.cpp); the frame around it is here.
#pragma once

#include "pg.h"

extern "C" {
#include "access/amapi.h"
#include "nodes/pathnodes.h"
#include "utils/rel.h"
}

// An access method's price of an ordered scan's rounds: the work before the
// first row comes out (startup) and the work of every round (total). Called
// with the index open.
struct OrderedScanCost {
  double startup;
  double total;
};
using OrderedScanPricer = OrderedScanCost (*)(PlannerInfo* root, IndexPath* path, double loop_count,
                                              Relation index);

// amcostestimate: any use but an ordered scan costs infinity (the operator
// classes have no search operators, so the planner offers no other use;
// this keeps it so). An ordered scan costs what `price` says, plus the cost
// of computing the order-by value once per scan as genericcostestimate
// gives it, with genericcostestimate's selectivity (a partial index's
// predicate) and index pages; its page and tuple costs are replaced.
void ordered_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                          Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages,
                          OrderedScanPricer price);

// cost_sort's comparisons for n rows, per row (2 x cpu_operator_cost x log2 n).
double ordered_sort_share(double n);
// The k the scan will run with: the LIMIT + OFFSET the planner knows for
// this query level when the relation is its only one (then the Limit sits
// right above the scan, where the ExecutorStart hook looks); else
// `default_k`, where the scan starts.
double ordered_planned_k(PlannerInfo* root, RelOptInfo* rel, double default_k);
// One evaluation of the order-by operator, as the planner prices it in a
// plan that computes it per row (procost x cpu_operator_cost, or the
// function's support function's estimate).
double ordered_distance_price(PlannerInfo* root, IndexPath* path);
