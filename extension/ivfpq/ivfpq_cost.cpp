// gpu_ivfpq amcostestimate.
//
// An ordered scan is priced by the work it does (ivfpq_scan.cpp), round by
// round, in the planner's own units, within the frame every gknn index
// shares (am/ordered_cost.h: any other use costs infinity).
//
//   distance  one evaluation of the operator's function, priced as the
//             planner prices it in that plan (procost x cpu_operator_cost);
//             a PQ look-up table entry of dim/m dimensions is 1/m of one.
//   round r   searches probes_r = probes x 2^r lists for want_r =
//             refine x k x 2^r candidates (both capped at the index's lists
//             and entries):
//             - the coarse keys of every list: `lists` distances;
//             - one look-up table per probed list: 2^nbits x m entries of
//               dim/m dimensions, i.e. 2^nbits distances;
//             - the PQ score of every entry of the probed lists (entries x
//               probes_r / lists), cpu_index_tuple_cost + cpu_operator_cost
//               each, as genericcostestimate prices an index tuple;
//             - the candidates new to this round (want_r - want_(r-1)): each
//               one's exact distance and its share of sorting the round
//               (2 x cpu_operator_cost x log2(candidates), as cost_sort).
//   startup   round 0, plus what round 0 reads from the heap before the
//             first row comes out: refine x k candidate rows, each at
//             cpu_tuple_cost plus its share of reading the whole table at
//             random, as cost_index prices the heap rows of any index scan
//             (index_pages_fetched). Later rounds' heap reads are not added
//             here: every candidate the scan reads is a row it returns
//             (a TID is claimed once), and cost_index adds a heap fetch for
//             every row the path returns, spread over them. Round 0's
//             candidates are counted by both (refine x k rows).
//   total     the rounds until one covers every list and entry: what a scan
//             with no LIMIT, or whose filter keeps rejecting rows, goes
//             through. The planner charges a LIMIT k its startup plus the
//             share k / rows of the rest (rows: after the filter).
//
// k is the query's LIMIT + OFFSET when the planner knows it (a constant) and
// the scan's relation is the query's only one, as the ExecutorStart hook
// (ivfpq_limit.cpp) will find it; otherwise kIvfpqDefaultK, where the scan
// starts. An index with no quantizer (built on an empty table) ranks its
// pending rows exactly in round 0: every row read and ranked.
//
// Not priced: reading the index into its searchable image (the first scan in
// a backend after the index changed; every later scan uses the image, so a
// query pays no index page reads), and TOAST (as the planner does not price
// detoasting in the sequential scan either).
//
// What this gives: round 0 costs a few thousand distances' worth (look-up
// tables, coarse keys, PQ scores) plus refine x k rows read and ranked,
// against about 0.035 per row (and its pages) for the sequential scan and
// top-N sort of LIMIT 10; so the index wins ORDER BY <op> value
// LIMIT k from about 500 rows at the default probes and refine (pgvector:
// ivfflat from 200-500, hnsw from 1,000), whatever the value is: a constant,
// a $n of a generic plan, an InitPlan's (SELECT ...) (the value is not looked
// at). It loses where its work is truly larger: a hundred rows at the
// default settings (round 0 reads every row), no LIMIT, or a LIMIT whose
// refine x k candidates are the whole table.
#include <cmath>

#include "am/ordered_cost.h"
#include "ivfpq.h"

extern "C" {
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/spccache.h"
}

namespace {

// What the scan will search, as far as the planner knows.
struct ScanShape {
  double entries;  // coded entries (or pending rows, untrained)
  double lists;
  double probes;  // round 0
  double want;    // round 0's candidates: refine x k
  double lut;     // distances one look-up table costs: 2^nbits
  bool trained;
};

// Prices of the units of work, in the planner's cost units.
struct Prices {
  double distance;   // one evaluation of the operator
  double entry;      // one PQ score
  double heap_read;  // one candidate row read from the heap (startup only)
};

constexpr int kMaxRounds = 64;  // probes and candidates double: far more than any index needs

// cpu_tuple_cost plus one row's share of reading the whole table at random,
// as cost_index prices the heap rows of an uncorrelated index scan.
double heap_read_price(PlannerInfo* root, IndexOptInfo* index, double loop_count) {
  RelOptInfo* rel = index->rel;
  double tuples = Max(rel->tuples, 1.0);
  double spc_random_page_cost;
  get_tablespace_page_costs(rel->reltablespace, &spc_random_page_cost, nullptr);
  double loops = Max(loop_count, 1.0);
  double pages =
      index_pages_fetched(tuples * loops, rel->pages, static_cast<double>(index->pages), root) / loops;
  return cpu_tuple_cost + pages * spc_random_page_cost / tuples;
}

// Round r's work, without heap reads. *fetched: candidates asked for so far
// (in: before this round; out: after it). *done: this round covered every
// list and entry.
double round_cost(const ScanShape& s, const Prices& p, int r, double* fetched, bool* done) {
  double scale = std::ldexp(1.0, r);
  double probes = Min(s.lists, s.probes * scale);
  double want = Min(s.entries, s.want * scale);
  double fresh = Max(want - *fetched, 0.0);
  *fetched = Max(*fetched, want);
  *done = probes >= s.lists && want >= s.entries;
  double coarse = s.lists * p.distance;
  double tables = probes * s.lut * p.distance;
  double scoring = s.entries * (probes / s.lists) * p.entry;
  double ranking = fresh * (p.distance + ordered_sort_share(fresh));
  return coarse + tables + scoring + ranking;
}

ScanShape scan_shape(PlannerInfo* root, IndexPath* path, const IvfpqMeta& meta) {
  IndexOptInfo* index = path->indexinfo;
  ScanShape s;
  s.trained = meta.trained != 0;
  s.entries = Max(index->tuples > 0 ? index->tuples : index->rel->tuples, 1.0);
  s.lists = s.trained ? Max(meta.lists, 1) : 1;
  s.probes = Min(static_cast<double>(gknn_ivfpq_probes), s.lists);
  double k = Min(ordered_planned_k(root, index->rel, kIvfpqDefaultK), s.entries);
  s.want = Min(s.entries, Max(1.0, k * gknn_ivfpq_refine));
  s.lut = s.trained ? std::ldexp(1.0, Max(meta.nbits, 1)) : 0;
  return s;
}

// OrderedScanPricer: round 0 and its heap reads, then the rounds until one
// covers every list and entry.
OrderedScanCost ivfpq_rounds_cost(PlannerInfo* root, IndexPath* path, double loop_count, Relation rel) {
  IvfpqMeta meta;
  ivfpq_read_meta(rel, &meta);
  ScanShape s = scan_shape(root, path, meta);
  Prices p;
  p.distance = ordered_distance_price(root, path);
  p.entry = cpu_index_tuple_cost + cpu_operator_cost;
  p.heap_read = heap_read_price(root, path->indexinfo, loop_count);

  OrderedScanCost cost;
  if (!s.trained) {
    // Round 0 reads and ranks every pending row; nothing follows.
    cost.startup = s.entries * (p.heap_read + p.distance + ordered_sort_share(s.entries));
    cost.total = cost.startup;
  } else {
    double fetched = 0;
    bool done = false;
    cost.startup = round_cost(s, p, 0, &fetched, &done) + s.want * p.heap_read;
    cost.total = cost.startup;
    for (int r = 1; !done && r < kMaxRounds; ++r) cost.total += round_cost(s, p, r, &fetched, &done);
  }
  return cost;
}

}  // namespace

void ivfpq_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                        Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages) {
  ordered_costestimate(root, path, loop_count, startup_cost, total_cost, selectivity, correlation, pages,
                       ivfpq_rounds_cost);
}
