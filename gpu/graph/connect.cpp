// Reachability and entries after the optimisation. A kNN graph of clustered
// data falls apart into one piece per cluster (every edge stays inside its
// cluster), and pruning and reverse edges keep it so: a search started in
// one cluster never leaves it. connect() walks the graph from its first
// live node; each part the walk did not reach is linked both ways to the
// nearest reached node, with add_reverse_edge's rule and force, so rows
// keep their order and degree, and the part's first node becomes one of
// the graph's entries (when the part is not tiny), so that every search
// also starts there. Deterministic: parts are taken in ascending id of
// their first node.
//
// The nearest reached node is found by a search over the reached nodes
// alone (unreached ones excluded, neither listed nor expanded), started
// from the entries so far (one per reached part) and a seeded sample: a
// search over the whole graph would be drawn into the unreached part
// itself, and an exact scan per part costs n distances each.
#include <deque>

#include "graph/common.h"

namespace gknn::graph {
namespace {

// Marks every node reachable from `from` that is not marked yet (absent
// cleared); returns how many it marked.
std::int64_t walk(const Graph& g, std::uint32_t from, std::vector<std::uint8_t>& absent,
                  std::deque<std::uint32_t>& q) {
  std::int64_t marked = 1;
  absent[from] = 0;
  q.push_back(from);
  while (!q.empty()) {
    const std::uint32_t x = q.front();
    q.pop_front();
    const std::uint32_t* r = g.row(x);
    for (int s = 0; s < g.degree && r[s] != kNoNode; ++s)
      if (absent[r[s]]) absent[r[s]] = 0, q.push_back(r[s]), ++marked;
  }
  return marked;
}

// The reached node nearest to u (see above); an exact scan only if the
// search had no reached entry to start from.
std::uint32_t nearest_reached(const Graph& g, const float* v, const BuildParams& p,
                              const std::vector<std::uint8_t>& absent, std::uint32_t u) {
  const std::vector<std::uint32_t> entries = entry_points(g, p.seed, nullptr);
  double d = 0;
  const std::int64_t id =
      search_within(g, v, p.dim, p.metric, v + std::int64_t(u) * p.dim, 64, entries, absent.data(), &d);
  if (id >= 0) return std::uint32_t(id);
  Scored best{0, kNoNode};
  for (std::int64_t y = 0; y < g.n; ++y)
    if (!absent[y]) {
      const Scored s{dist(p.metric, v + y * p.dim, v + std::int64_t(u) * p.dim, p.dim), std::uint32_t(y)};
      if (best.id == kNoNode || s < best) best = s;
    }
  return best.id;
}

// Adds the edge from -> to with force (see add_reverse_edge).
void link(Graph& g, const float* v, const BuildParams& p, std::uint32_t from, std::uint32_t to) {
  double rd[kMaxDegree];
  std::uint32_t* row = g.row(from);
  for (int s = 0; s < g.degree && row[s] != kNoNode; ++s)
    rd[s] = dist(p.metric, v + std::int64_t(row[s]) * p.dim, v + std::int64_t(from) * p.dim, p.dim);
  add_reverse_edge(row, rd, g.degree, from, to,
                   dist(p.metric, v + std::int64_t(to) * p.dim, v + std::int64_t(from) * p.dim, p.dim),
                   g.row(to), g.degree, true);
}

constexpr std::int64_t kReportEvery = 1 << 14;  // nodes reached between progress calls

}  // namespace

void connect(Graph& g, const float* vectors, const BuildParams& p, const std::uint8_t* deleted,
             const Progress& progress) {
  g.entries.clear();
  if (g.n < 2) return;
  // absent: not reached yet, or deleted. Deleted nodes are never walked
  // into (no live row points at them after a repair), never linked, and
  // excluded from the searches.
  std::vector<std::uint8_t> absent(g.n, 1);
  std::deque<std::uint32_t> q;
  std::int64_t root = 0;
  if (deleted) {
    while (root < g.n && deleted[root]) ++root;
    if (root == g.n) return;
  }
  check_progress(progress, kPhaseConnect, 0, g.n);
  std::int64_t reached = walk(g, std::uint32_t(root), absent, q), reported = reached;
  g.entries.push_back(std::uint32_t(root));
  for (std::int64_t u = root + 1; u < g.n; ++u) {
    if (!absent[u] || (deleted && deleted[u])) continue;
    const std::uint32_t v = nearest_reached(g, vectors, p, absent, std::uint32_t(u));
    link(g, vectors, p, v, std::uint32_t(u));
    link(g, vectors, p, std::uint32_t(u), v);
    const std::int64_t part = walk(g, std::uint32_t(u), absent, q);
    reached += part;
    if (part >= kMinEntryPart && g.entries.size() < kMaxEntries) g.entries.push_back(std::uint32_t(u));
    if (reached - reported >= kReportEvery) check_progress(progress, kPhaseConnect, reported = reached, g.n);
  }
  check_progress(progress, kPhaseConnect, g.n, g.n);
}

}  // namespace gknn::graph
