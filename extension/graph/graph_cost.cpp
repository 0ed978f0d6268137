// gpu_graph amcostestimate.
//
// An ordered scan is priced by the work it does (graph_scan.cpp), round by
// round, in the planner's own units, within the frame every gknn index
// shares (am/ordered_cost.h: any other use costs infinity).
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

#include "am/ordered_cost.h"
#include "graph.h"

namespace {

constexpr int kMaxRounds = 64;
constexpr double kExpansionsPerEf = 2.0;  // nodes a search expands per candidate-list slot

// Round r's work; *done when it ranked every row.
double round_cost(double rows, double k, double ef0, double degree, double distance, int r, bool* done) {
  double scale = std::ldexp(1.0, r);
  double want = k * scale;
  if (want >= rows) {
    *done = true;
    return rows * (distance + ordered_sort_share(rows));
  }
  *done = false;
  double distances = Min(rows, kExpansionsPerEf * ef0 * scale * degree);
  return distances * distance + want * ordered_sort_share(want);
}

// OrderedScanPricer: round 0, then the rounds until one ranks every row.
OrderedScanCost graph_rounds_cost(PlannerInfo* root, IndexPath* path, double, Relation rel) {
  GraphMeta meta;
  graph_read_meta(rel, &meta);
  IndexOptInfo* index = path->indexinfo;
  double rows = Max(index->tuples > 0 ? index->tuples : index->rel->tuples, 1.0);
  double k = Max(1.0, Min(ordered_planned_k(root, index->rel, kGraphDefaultK), rows));
  double ef0 = Max(static_cast<double>(gknn_graph_ef_search), k);
  double distance = ordered_distance_price(root, path);
  bool done = false;
  OrderedScanCost cost;
  cost.startup = round_cost(rows, k, ef0, meta.degree, distance, 0, &done);
  cost.total = cost.startup;
  for (int r = 1; !done && r < kMaxRounds; ++r)
    cost.total += round_cost(rows, k, ef0, meta.degree, distance, r, &done);
  return cost;
}

}  // namespace

void graph_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                        Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages) {
  ordered_costestimate(root, path, loop_count, startup_cost, total_cost, selectivity, correlation, pages,
                       graph_rounds_cost);
}
