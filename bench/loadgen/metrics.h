// What the load generator measures, apart from any database: recall of one
// result against exact ground truth, and latency percentiles.
#pragma once

#include <cstdint>
#include <vector>

namespace gknn_loadgen {

// Recall@k of one query's result ids against its exact ground truth:
// gt_ids/gt_dist are the exact top-G (G >= k) ids and distances, ordered.
// A returned id counts as a hit when it is among the first k true neighbours,
// or further down the list at a distance equal to the k-th one: a tie at the
// k-th place may be broken either way by a correct engine (PostgreSQL's sort
// does not order equal distances by id). Duplicates count once; a result with
// fewer than k rows simply has fewer hits. Returns hits / k, in [0, 1].
double recall_at_k(const std::vector<std::int64_t>& result, const std::int32_t* gt_ids, const float* gt_dist,
                   int gt_count, int k);

struct LatencySummary {
  std::int64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
};

// Nearest-rank percentile (p in (0, 100]) of sorted values: the smallest
// value with at least p% of the values at or below it. 0 for no values.
double percentile(const std::vector<double>& sorted, double p);

// Summary of latencies in milliseconds (any order).
LatencySummary summarize_latencies(std::vector<double> latencies_ms);

}  // namespace gknn_loadgen
