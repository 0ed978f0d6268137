#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace gknn_loadgen {

double recall_at_k(const std::vector<std::int64_t>& result, const std::int32_t* gt_ids, const float* gt_dist,
                   int gt_count, int k) {
  if (k <= 0) return 0.0;
  k = std::min(k, gt_count);
  const float kth = gt_dist[k - 1];
  // The true neighbours a correct engine may return: the first k, and any
  // later one tied with the k-th (a NaN k-th distance ties with nothing).
  std::unordered_set<std::int64_t> allowed;
  for (int j = 0; j < gt_count; ++j)
    if (j < k || gt_dist[j] == kth) allowed.insert(gt_ids[j]);
  std::unordered_set<std::int64_t> seen;
  int hits = 0;
  for (std::int64_t id : result)
    if (seen.insert(id).second && allowed.count(id)) ++hits;
  return static_cast<double>(std::min(hits, k)) / k;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index = static_cast<std::size_t>(std::max(rank, 1.0)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

LatencySummary summarize_latencies(std::vector<double> latencies_ms) {
  LatencySummary s;
  s.count = static_cast<std::int64_t>(latencies_ms.size());
  if (latencies_ms.empty()) return s;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  s.mean_ms = std::accumulate(latencies_ms.begin(), latencies_ms.end(), 0.0) / s.count;
  s.p50_ms = percentile(latencies_ms, 50);
  s.p95_ms = percentile(latencies_ms, 95);
  s.p99_ms = percentile(latencies_ms, 99);
  s.max_ms = latencies_ms.back();
  return s;
}

}  // namespace gknn_loadgen
