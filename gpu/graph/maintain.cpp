// insert_node and repair_deleted: the in-memory sequence of calls the access
// method makes on rows read from pages (gknn/graph.h), and what the tests
// measure recall after.
#include "graph/common.h"

namespace gknn::graph {
namespace {

// distance(owner, row[s]) for the occupied slots of a row.
void row_distances(const std::uint32_t* row, int degree, const float* v, int dim, Metric metric,
                   std::uint32_t owner, double* out) {
  for (int s = 0; s < degree && row[s] != kNoNode; ++s)
    out[s] = dist(metric, v + std::int64_t(row[s]) * dim, v + std::int64_t(owner) * dim, dim);
}

}  // namespace

void insert_node(Graph& g, const float* vectors, int dim, Metric metric, int ef, std::uint64_t seed) {
  if (g.degree < 1 || g.n + 1 >= std::int64_t(kNoNode) || ef < 1)
    throw Error(ErrorCode::InvalidArgument, "graph insert_node: bad arguments");
  const auto x = std::uint32_t(g.n);
  const int d = g.degree;
  const float* xv = vectors + std::int64_t(x) * dim;
  // Candidates: the nodes a search from x's vector finds.
  const int k = int(std::min<std::int64_t>(ef, g.n));
  std::vector<std::int64_t> found(std::max(k, 1));
  std::vector<double> fd(std::max(k, 1));
  std::vector<std::uint32_t> cand;
  std::vector<double> cd;
  if (k > 0) {
    SearchParams sp;
    sp.k = k;
    sp.ef = ef;
    sp.seed = seed;
    sp.width = kInsertWidth;
    search_cpu(g, vectors, dim, metric, xv, 1, sp, found.data(), fd.data());
    for (int j = 0; j < k; ++j)
      if (found[j] >= 0) cand.push_back(std::uint32_t(found[j])), cd.push_back(fd[j]);
  }
  const int m = order_candidates(x, cand.data(), cd.data(), int(cand.size()));
  std::vector<std::uint32_t> rows(std::size_t(std::max(m, 1)) * d);
  for (int i = 0; i < m; ++i) std::copy_n(g.row(cand[i]), d, rows.data() + std::int64_t(i) * d);
  std::vector<std::uint32_t> xrow(d);
  prune_list(cand.data(), m, rows.data(), d, d, xrow.data());
  g.edges.insert(g.edges.end(), xrow.begin(), xrow.end());
  ++g.n;
  // Reverse edges into the chosen neighbours' rows.
  bool taken = false;
  std::vector<double> rd(d);
  for (int s = 0; s < d && xrow[s] != kNoNode; ++s) {
    const std::uint32_t y = xrow[s];
    row_distances(g.row(y), d, vectors, dim, metric, y, rd.data());
    taken |= add_reverse_edge(g.row(y), rd.data(), d, y, x,
                              dist(metric, xv, vectors + std::int64_t(y) * dim, dim), xrow.data(), d);
  }
  if (!taken && xrow[0] != kNoNode) {
    const std::uint32_t y = xrow[0];
    row_distances(g.row(y), d, vectors, dim, metric, y, rd.data());
    add_reverse_edge(g.row(y), rd.data(), d, y, x, dist(metric, xv, vectors + std::int64_t(y) * dim, dim),
                     xrow.data(), d, true);
  }
}

void repair_deleted(Graph& g, const float* vectors, int dim, Metric metric, const std::uint8_t* deleted) {
  if (g.n > 0 && (!deleted || !vectors || g.degree < 1))
    throw Error(ErrorCode::InvalidArgument, "graph repair_deleted: bad arguments");
  const int d = g.degree;
  const std::vector<std::uint32_t> before = g.edges;  // rows read as they were: order-free, parallel
  auto old_row = [&](std::uint32_t id) { return before.data() + std::int64_t(id) * d; };
  auto is_deleted = [&](std::uint32_t id) { return deleted[id] != 0; };
  parallel_rows(g.n, [&](std::int64_t b, std::int64_t e) {
    std::vector<std::uint32_t> rows(std::size_t(2 * d) * d);
    std::vector<double> cd;
    for (std::int64_t x = b; x < e; ++x) {
      std::uint32_t* row = g.row(x);
      if (deleted[x]) {
        std::fill(row, row + d, kNoNode);
        continue;
      }
      bool touched = false;
      for (int s = 0; s < d && row[s] != kNoNode; ++s) touched |= deleted[row[s]] != 0;
      if (!touched) continue;
      std::vector<std::uint32_t> nbr_rows(std::size_t(d) * d, kNoNode);
      for (int s = 0; s < d && row[s] != kNoNode; ++s)
        std::copy_n(old_row(row[s]), d, nbr_rows.data() + s * d);
      std::vector<std::uint32_t> cand =
          repair_candidates(std::uint32_t(x), old_row(std::uint32_t(x)), d, nbr_rows.data(), is_deleted);
      cd.resize(cand.size());
      for (std::size_t i = 0; i < cand.size(); ++i)
        cd[i] = dist(metric, vectors + std::int64_t(cand[i]) * dim, vectors + x * dim, dim);
      const int m =
          std::min(order_candidates(std::uint32_t(x), cand.data(), cd.data(), int(cand.size())), 2 * d);
      for (int i = 0; i < m; ++i) std::copy_n(old_row(cand[i]), d, rows.data() + std::int64_t(i) * d);
      prune_list(cand.data(), m, rows.data(), d, d, row);
    }
  });
  // A live node whose in-edges all came from deleted nodes may have lost
  // them all (the prune kept others): link such parts back.
  BuildParams p;
  p.dim = dim;
  p.metric = metric;
  p.degree = d;
  connect(g, vectors, p, deleted);
}

}  // namespace gknn::graph
