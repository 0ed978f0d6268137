// gpu_ivfpq amcostestimate. The index serves only ORDER BY column <op> value:
// any other use costs infinity (the opclasses have no search operators, so
// the planner offers no other use; this keeps it so). An ordered scan does
// its work before the first row: it reads probes/lists of the index (as
// genericcostestimate prices index pages and tuples), computes the distance
// to every centroid, and reads refine x k candidate rows from the heap to
// re-rank them; all of that is startup cost.
#include <cmath>

#include "ivfpq.h"

extern "C" {
#include "access/relation.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/float.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"
}

void ivfpq_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
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
  IvfpqMeta meta;
  ivfpq_read_meta(rel, &meta);
  index_close(rel, NoLock);

  double tuples = Max(index->tuples, 0.0);
  int lists = meta.trained ? Max(meta.lists, 1) : 1;
  double ratio = Min(1.0, static_cast<double>(gknn_ivfpq_probes) / lists);
  if (!meta.trained) ratio = 1.0;  // every pending row is read and ranked exactly

  GenericCosts costs;
  memset(&costs, 0, sizeof(costs));
  costs.numIndexTuples = Max(1.0, tuples * ratio);
  genericcostestimate(root, path, loop_count, &costs);

  double dim = Max(meta.dim, 1);
  double centroid_cost = static_cast<double>(lists) * dim * cpu_operator_cost;
  double spc_random_page_cost;
  get_tablespace_page_costs(index->rel->reltablespace, &spc_random_page_cost, nullptr);
  double candidates = Min(tuples, static_cast<double>(gknn_ivfpq_refine) * kIvfpqDefaultK);
  if (!meta.trained) candidates = tuples;
  // Candidate rows are fetched at random; the exact distance costs ~dim operators.
  double rerank_cost = candidates * (spc_random_page_cost * 0.25 + cpu_tuple_cost + dim * cpu_operator_cost);

  *startup_cost = costs.indexTotalCost + centroid_cost + rerank_cost;
  *total_cost = *startup_cost;
  *selectivity = costs.indexSelectivity;
  *correlation = 0;
  *pages = costs.numIndexPages;
}
