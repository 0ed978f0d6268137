// Parameter checks and the helpers of common.h.
#include "graph/common.h"

#include <cmath>
#include <exception>
#include <numeric>
#include <mutex>
#include <string>

#include "runtime/cpu_cores.h"

namespace gknn::graph {

void validate(const BuildParams& p) {
  if (p.dim < 1 || p.dim > kMaxDim)
    throw Error(ErrorCode::InvalidArgument, "graph: dim must be between 1 and " + std::to_string(kMaxDim));
  if (p.metric != Metric::L2 && p.metric != Metric::InnerProduct && p.metric != Metric::Cosine)
    throw Error(ErrorCode::InvalidArgument, "graph: metric must be L2, inner product or cosine");
  if (p.degree < 2 || p.degree > kMaxDegree || p.degree % 2 != 0)
    throw Error(ErrorCode::InvalidArgument,
                "graph: degree must be an even number between 2 and " + std::to_string(kMaxDegree));
  if (p.intermediate_degree != 0 &&
      (p.intermediate_degree < p.degree || p.intermediate_degree > kMaxIntermediateDegree))
    throw Error(ErrorCode::InvalidArgument, "graph: intermediate_degree must be 0 or between degree and " +
                                                std::to_string(kMaxIntermediateDegree));
}

int effective_intermediate_degree(const BuildParams& p, std::int64_t n) {
  std::int64_t d = p.intermediate_degree ? p.intermediate_degree : 2 * std::int64_t(p.degree);
  d = std::min<std::int64_t>(std::max<std::int64_t>(d, p.degree), kMaxIntermediateDegree);
  return int(std::max<std::int64_t>(0, std::min<std::int64_t>(d, n - 1)));
}

void validate(const Graph& g) {
  if (g.n < 0 || g.n >= std::int64_t(kNoNode) || g.degree < 0 || g.degree > kMaxDegree ||
      g.edges.size() != std::size_t(g.n) * std::size_t(g.degree))
    throw Error(ErrorCode::InvalidArgument, "graph: inconsistent sizes");
  if (g.n > 0 && g.degree < 1) throw Error(ErrorCode::InvalidArgument, "graph: degree 0");
  for (std::int64_t i = 0; i < g.n; ++i) {
    const std::uint32_t* r = g.row(i);
    bool ended = false;
    for (int s = 0; s < g.degree; ++s) {
      if (r[s] == kNoNode) {
        ended = true;
        continue;
      }
      if (ended) throw Error(ErrorCode::InvalidArgument, "graph: an empty slot before an edge");
      if (r[s] >= g.n) throw Error(ErrorCode::InvalidArgument, "graph: an edge to a node out of range");
      if (r[s] == i) throw Error(ErrorCode::InvalidArgument, "graph: a self edge");
      for (int t = 0; t < s; ++t)
        if (r[t] == r[s]) throw Error(ErrorCode::InvalidArgument, "graph: a repeated edge");
    }
  }
  for (std::size_t i = 0; i < g.entries.size(); ++i)
    if (g.entries[i] >= g.n || (i > 0 && g.entries[i] <= g.entries[i - 1]))
      throw Error(ErrorCode::InvalidArgument, "graph: entries not ascending node ids");
}

void check_row_order(const Graph& g, const float* vectors, int dim, Metric metric) {
  for (std::int64_t i = 0; i < g.n; ++i) {
    const std::uint32_t* r = g.row(i);
    for (int s = 1; s < g.degree && r[s] != kNoNode; ++s) {
      const double a = dist(metric, vectors + std::int64_t(r[s - 1]) * dim, vectors + i * dim, dim);
      const double b = dist(metric, vectors + std::int64_t(r[s]) * dim, vectors + i * dim, dim);
      if (!score_less(a, r[s - 1], b, r[s]))
        throw Error(ErrorCode::InvalidArgument,
                    "graph: row " + std::to_string(i) + " is not in distance order");
    }
  }
}

void parallel_rows(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                   int max_threads) {
  if (n <= 0) return;
  std::int64_t threads = cpu_cores();
  if (max_threads > 0) threads = std::min<std::int64_t>(threads, max_threads);
  threads = std::min(threads, n);
  const std::int64_t per = (n + threads - 1) / threads;
  std::exception_ptr failure;
  std::mutex mu;
  auto guarded = [&](std::int64_t b, std::int64_t e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
  };
  {
    std::vector<std::thread> pool;
    struct Join {
      std::vector<std::thread>& pool;
      ~Join() {
        for (auto& t : pool) t.join();
      }
    } join{pool};
    for (std::int64_t b = per; b < n; b += per) pool.emplace_back(guarded, b, std::min(n, b + per));
    guarded(0, std::min(n, per));
  }
  if (failure) std::rethrow_exception(failure);
}

void check_progress(const Progress& progress, const char* phase, std::int64_t done, std::int64_t total) {
  if (progress && !progress(phase, done, total)) throw Error(ErrorCode::Cancelled, "graph: cancelled");
}

int entry_samples(std::int64_t n) {
  // sqrt(n): on the H200, 2 sqrt(n) (489 at 60,000 x 784, 2,000 at 1M x
  // 128) gave the same recall at every ef, one query 4-13 us slower and
  // batches of 1,000 25-40 % slower (bench/results/graph-kernel-phases-H200-2026-11-28.md).
  const auto s = std::int64_t(std::sqrt(double(std::max<std::int64_t>(n, 0))));
  return int(std::min<std::int64_t>(n, std::clamp<std::int64_t>(s, 256, 4096)));
}

std::vector<std::uint32_t> entry_points(const Graph& g, std::uint64_t seed, const std::uint8_t* skip) {
  // The graph's entries, then a seeded start and a stride coprime to n:
  // distinct ids without a dedup pass over n (entries are ascending: a
  // binary search leaves them out of the sample). Deleted nodes (skipped,
  // empty row) are passed over, so deletions do not thin the sample.
  const std::int64_t n = g.n;
  const int count = entry_samples(n);
  std::vector<std::uint32_t> out;
  if (n == 0) return out;
  auto dead = [&](std::uint32_t id) { return skip && skip[id] && g.row(id)[0] == kNoNode; };
  out.reserve(std::max<std::size_t>(count, g.entries.size()));
  const bool usable = std::is_sorted(g.entries.begin(), g.entries.end()) &&
                      (g.entries.empty() || g.entries.back() < std::uint64_t(n));
  const auto hubs = g.entries.begin();
  const auto hubs_end = usable ? g.entries.end() : hubs;
  for (auto h = hubs; h != hubs_end; ++h)
    if (!dead(*h)) out.push_back(*h);
  const std::uint64_t un = std::uint64_t(n);
  const std::uint64_t start = mix64(seed ^ 0x67726170686b6e6eull) % un;
  std::uint64_t step = (mix64(seed + 1) % un) | 1;
  while (std::gcd(step, un) != 1) step += 1;
  for (std::uint64_t i = 0, at = start; i < un && int(out.size()) < count; ++i, at = (at + step) % un) {
    const auto id = std::uint32_t(at);
    if (dead(id) || std::binary_search(hubs, hubs_end, id)) continue;
    out.push_back(id);
  }
  return out;
}

void sort_row(std::uint32_t* row, int degree, const float* vectors, int dim, Metric metric,
              std::uint32_t owner) {
  Scored s[kMaxDegree];
  int m = 0;
  // The rows are scattered over the vectors: ask for all their lines before
  // the first distance waits on one (a build sorts every node's row).
  const std::size_t bytes = std::size_t(dim) * sizeof(float);
  for (int i = 0; i < degree; ++i)
    if (row[i] != kNoNode) {
      const char* r = reinterpret_cast<const char*>(vectors + std::int64_t(row[i]) * dim);
      for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(r + b);
    }
  for (int i = 0; i < degree; ++i)
    if (row[i] != kNoNode)
      s[m++] = {dist(metric, vectors + std::int64_t(row[i]) * dim, vectors + std::int64_t(owner) * dim, dim),
                row[i]};
  std::sort(s, s + m);
  for (int i = 0; i < degree; ++i) row[i] = i < m ? s[i].id : kNoNode;
}

void check_search(const Graph& g, const float* vectors, int dim, Metric metric, const float* queries,
                  std::int64_t nq, const SearchParams& sp, const std::int64_t* ids, const double* distances) {
  if (dim < 1 || dim > kMaxDim || nq < 0 || sp.k < 1 || sp.ef < 1 || sp.width < 1 || sp.width > kMaxWidth)
    throw Error(ErrorCode::InvalidArgument, "graph search: bad sizes (dim, nq, k, ef or width)");
  if (metric != Metric::L2 && metric != Metric::InnerProduct && metric != Metric::Cosine)
    throw Error(ErrorCode::InvalidArgument, "graph search: metric must be L2, inner product or cosine");
  if (g.n < 0 || g.edges.size() != std::size_t(g.n) * std::size_t(g.degree) || (g.n > 0 && g.degree < 1))
    throw Error(ErrorCode::InvalidArgument, "graph search: inconsistent graph");
  if ((g.n > 0 && !vectors) || (nq > 0 && (!queries || !ids || !distances)))
    throw Error(ErrorCode::InvalidArgument, "graph search: missing input");
}

}  // namespace gknn::graph
