// The maintenance rules of gknn/graph.h: one pruning rule (CAGRA's
// rank-based detour count) for the build, inserts and repairs, the reverse
// edge of an insert, and the candidates of a repair.
#include <algorithm>
#include <numeric>

#include "graph/common.h"

namespace gknn::graph {
namespace {

// ids -> rank of a candidate list, open addressing (the lists are short:
// a hash of 2-4x their length costs less than a search per lookup).
class RankTable {
 public:
  RankTable(const std::uint32_t* ids, int m) {
    int size = 16;
    while (size < 2 * m) size *= 2;
    mask_ = size - 1;
    keys_.assign(size, kNoNode);
    ranks_.assign(size, -1);
    for (int r = 0; r < m; ++r) {
      int h = slot(ids[r]);
      while (keys_[h] != kNoNode && keys_[h] != ids[r]) h = (h + 1) & mask_;
      if (keys_[h] == kNoNode) keys_[h] = ids[r], ranks_[h] = r;
    }
  }
  int rank(std::uint32_t id) const {
    for (int h = slot(id);; h = (h + 1) & mask_) {
      if (keys_[h] == id) return ranks_[h];
      if (keys_[h] == kNoNode) return -1;
    }
  }

 private:
  int slot(std::uint32_t id) const { return int(mix64(id) & std::uint64_t(mask_)); }
  int mask_;
  std::vector<std::uint32_t> keys_;
  std::vector<int> ranks_;
};

bool holds(const std::uint32_t* row, int len, std::uint32_t id) {
  for (int i = 0; i < len && row[i] != kNoNode; ++i)
    if (row[i] == id) return true;
  return false;
}

}  // namespace

int order_candidates(std::uint32_t owner, std::uint32_t* ids, double* distances, int m) {
  std::vector<Scored> s;
  s.reserve(std::max(m, 0));
  for (int i = 0; i < m; ++i)
    if (ids[i] != owner && ids[i] != kNoNode) s.push_back({canonical_score(distances[i]), ids[i]});
  // A repeated id keeps its best distance (the same node is the same
  // distance, unless the caller's differ): by id, best first, then unique.
  std::sort(s.begin(), s.end(),
            [](const Scored& a, const Scored& b) { return a.id != b.id ? a.id < b.id : a < b; });
  s.erase(std::unique(s.begin(), s.end(), [](const Scored& a, const Scored& b) { return a.id == b.id; }),
          s.end());
  std::sort(s.begin(), s.end());
  for (std::size_t i = 0; i < s.size(); ++i) ids[i] = s[i].id, distances[i] = s[i].d;
  return int(s.size());
}

namespace {

// The prune of prune_priority with row(i) giving candidate i's row and the
// scratch reused across calls (the build prunes every node: a table and
// three arrays allocated per node cost as much as the counting). The rank
// table is open addressing with a multiplicative hash; it changes nothing
// but speed (a rank is a rank).
template <typename RowOf>
int prune_with(const std::uint32_t* candidates, int m, RowOf row, int row_len, int degree, std::uint32_t* out,
               PruneScratch& sc) {
  sc.count.assign(std::max(m, 0), 0);
  if (m > 0) {
    int bits = 4;
    while ((1 << bits) < 2 * m) ++bits;
    const std::uint32_t mask = (1u << bits) - 1;
    sc.keys.assign(std::size_t(1) << bits, kNoNode);
    sc.ranks.resize(std::size_t(1) << bits);
    auto slot = [&](std::uint32_t id) { return (id * 2654435761u) >> (32 - bits); };
    for (int r = 0; r < m; ++r) {
      std::uint32_t h = slot(candidates[r]);
      while (sc.keys[h] != kNoNode && sc.keys[h] != candidates[r]) h = (h + 1) & mask;
      if (sc.keys[h] == kNoNode) sc.keys[h] = candidates[r], sc.ranks[h] = r;
    }
    auto rank = [&](std::uint32_t id) {
      for (std::uint32_t h = slot(id);; h = (h + 1) & mask) {
        if (sc.keys[h] == id) return sc.ranks[h];
        if (sc.keys[h] == kNoNode) return -1;
      }
    };
    const int reach = std::min(row_len, m - 1);  // a rank p >= m - 1 detours nothing
    for (int i = 0; i + 1 < m; ++i) {
      const std::uint32_t* r = row(i);
      for (int p = 0; p < reach; ++p) {
        if (r[p] == kNoNode) break;
        const int j = rank(r[p]);
        if (j > i && j > p) ++sc.count[j];
      }
    }
  }
  sc.order.resize(std::max(m, 0));
  std::iota(sc.order.begin(), sc.order.end(), 0);
  const int kept = std::min(m, degree);
  const std::vector<int>& count = sc.count;
  std::partial_sort(sc.order.begin(), sc.order.begin() + kept, sc.order.end(),
                    [&](int a, int b) { return count[a] != count[b] ? count[a] < count[b] : a < b; });
  for (int s = 0; s < degree; ++s) out[s] = s < kept ? candidates[sc.order[s]] : kNoNode;
  return kept;
}

}  // namespace

int prune_priority(const std::uint32_t* candidates, int m, const std::uint32_t* candidate_rows, int row_len,
                   int degree, std::uint32_t* out, PruneScratch& scratch) {
  return prune_with(
      candidates, m, [&](int i) { return candidate_rows + std::int64_t(i) * row_len; }, row_len, degree, out,
      scratch);
}

int prune_knn_row(const std::uint32_t* knn, int kdeg, std::int64_t x, int degree, std::uint32_t* out,
                  PruneScratch& scratch) {
  const std::uint32_t* cand = knn + x * kdeg;
  int m = 0;
  while (m < kdeg && cand[m] != kNoNode) ++m;
  return prune_with(
      cand, m, [&](int i) { return knn + std::int64_t(cand[i]) * kdeg; }, kdeg, degree, out, scratch);
}

int prune_list(const std::uint32_t* candidates, int m, const std::uint32_t* candidate_rows, int row_len,
               int degree, std::uint32_t* out) {
  if (m < 0 || row_len < 0 || degree < 1 || (m > 0 && (!candidates || (row_len > 0 && !candidate_rows))))
    throw Error(ErrorCode::InvalidArgument, "graph prune_list: bad sizes");
  PruneScratch scratch;
  std::vector<std::uint32_t> picked(degree);
  const int kept = prune_priority(candidates, m, candidate_rows, row_len, degree, picked.data(), scratch);
  // Back into rank order: the order of `candidates`.
  RankTable rank(candidates, m);
  std::sort(picked.begin(), picked.begin() + kept,
            [&](std::uint32_t a, std::uint32_t b) { return rank.rank(a) < rank.rank(b); });
  std::copy(picked.begin(), picked.end(), out);
  return kept;
}

bool add_reverse_edge(std::uint32_t* row, double* row_distances, int degree, std::uint32_t owner,
                      std::uint32_t x, double x_distance, const std::uint32_t* x_row, int x_row_len,
                      bool force) {
  if (degree < 1 || !row || !row_distances || x == kNoNode)
    throw Error(ErrorCode::InvalidArgument, "graph add_reverse_edge: bad arguments");
  if (x == owner || holds(row, degree, x)) return false;
  x_distance = canonical_score(x_distance);
  int used = 0;
  while (used < degree && row[used] != kNoNode) ++used;
  int pos = 0;
  while (pos < used && score_less(canonical_score(row_distances[pos]), row[pos], x_distance, x)) ++pos;
  int drop = -1;
  if (used == degree) {
    for (int s = degree - 1; s >= pos && drop < 0; --s)
      if (x_row && holds(x_row, x_row_len, row[s])) drop = s;
    if (drop < 0 && !force) return false;
    if (drop < 0) drop = degree - 1, pos = std::min(pos, degree - 1);
  } else {
    drop = used;  // the first free slot
  }
  for (int s = drop; s > pos; --s) row[s] = row[s - 1], row_distances[s] = row_distances[s - 1];
  row[pos] = x;
  row_distances[pos] = x_distance;
  return true;
}

std::vector<std::uint32_t> repair_candidates(std::uint32_t owner, const std::uint32_t* row, int degree,
                                             const std::uint32_t* rows_of_row,
                                             const std::function<bool(std::uint32_t)>& deleted) {
  if (degree < 1 || !row || !rows_of_row || !deleted)
    throw Error(ErrorCode::InvalidArgument, "graph repair_candidates: bad arguments");
  std::vector<std::uint32_t> out;
  std::vector<char> dead(degree, 0);
  bool any_dead = false;
  auto add = [&](std::uint32_t id) {
    if (id == kNoNode || id == owner || std::find(out.begin(), out.end(), id) != out.end()) return;
    if (!deleted(id)) out.push_back(id);
  };
  for (int s = 0; s < degree && row[s] != kNoNode; ++s) {
    dead[s] = deleted(row[s]);
    any_dead = any_dead || dead[s];
    if (!dead[s]) add(row[s]);
  }
  if (!any_dead) return out;
  for (int s = 0; s < degree; ++s)
    if (dead[s])
      for (int t = 0; t < degree; ++t) add(rows_of_row[std::int64_t(s) * degree + t]);
  if (int(out.size()) >= 2 * degree) return out;
  for (int s = 0; s < degree && row[s] != kNoNode; ++s)
    if (!dead[s])
      for (int t = 0; t < degree; ++t) add(rows_of_row[std::int64_t(s) * degree + t]);
  return out;
}

}  // namespace gknn::graph
