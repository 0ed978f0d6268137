// Reachability after the optimisation. A kNN graph of clustered data falls
// apart into one piece per cluster (every edge stays inside its cluster),
// and pruning and reverse edges keep it so: a search started in one cluster
// never leaves it. connect() walks the graph from node 0; each part it did
// not reach is linked both ways to the nearest reached node (found by a
// search restricted to reached nodes), with add_reverse_edge's rule and
// force, so rows keep their order and degree. Deterministic: parts are
// taken in ascending id of their first node.
#include <deque>

#include "graph/common.h"

namespace gknn::graph {
namespace {

// Marks every node reachable from `from` that is not marked yet.
void walk(const Graph& g, std::uint32_t from, std::vector<std::uint8_t>& unreached,
          std::deque<std::uint32_t>& q) {
  unreached[from] = 0;
  q.push_back(from);
  while (!q.empty()) {
    const std::uint32_t x = q.front();
    q.pop_front();
    const std::uint32_t* r = g.row(x);
    for (int s = 0; s < g.degree && r[s] != kNoNode; ++s)
      if (unreached[r[s]]) unreached[r[s]] = 0, q.push_back(r[s]);
  }
}

// The reached node nearest to u: a search that returns reached nodes only;
// an exact scan when that search met none.
std::uint32_t nearest_reached(const Graph& g, const float* v, const BuildParams& p,
                              const std::vector<std::uint8_t>& unreached, std::uint32_t u) {
  // Deleted nodes count as unreached: never returned, never linked to.
  SearchParams sp;
  sp.k = 1;
  sp.ef = 64;
  sp.seed = p.seed;
  sp.skip = unreached.data();
  std::int64_t id = -1;
  double d = 0;
  search_cpu(g, v, p.dim, p.metric, v + std::int64_t(u) * p.dim, 1, sp, &id, &d);
  if (id >= 0) return std::uint32_t(id);
  Scored best{0, kNoNode};
  for (std::int64_t y = 0; y < g.n; ++y)
    if (!unreached[y]) {
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

}  // namespace

void connect(Graph& g, const float* vectors, const BuildParams& p, const std::uint8_t* deleted) {
  if (g.n < 2) return;
  // Deleted nodes are never walked into (no live row points at them after a
  // repair), never linked, and skipped by the search.
  std::vector<std::uint8_t> unreached(g.n, 1), skip;
  std::deque<std::uint32_t> q;
  std::int64_t root = 0;
  if (deleted) {
    while (root < g.n && deleted[root]) ++root;
    if (root == g.n) return;
  }
  walk(g, std::uint32_t(root), unreached, q);
  auto is_dead = [&](std::int64_t u) { return deleted && deleted[u]; };
  for (std::int64_t u = root + 1; u < g.n; ++u) {
    if (!unreached[u] || is_dead(u)) continue;
    if (deleted) {  // the search's skip flags: unreached or deleted
      skip = unreached;
      for (std::int64_t i = 0; i < g.n; ++i) skip[i] |= deleted[i];
    }
    const std::uint32_t v = nearest_reached(g, vectors, p, deleted ? skip : unreached, std::uint32_t(u));
    link(g, vectors, p, v, std::uint32_t(u));
    link(g, vectors, p, std::uint32_t(u), v);
    walk(g, std::uint32_t(u), unreached, q);
  }
}

}  // namespace gknn::graph
