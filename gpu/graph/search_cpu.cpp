// The CPU beam search over a graph (the reference of DeviceGraph::search):
// a candidate list of the ef best nodes seen, expanded best unexpanded first
// until every node in it is expanded; a visited set so each node's distance
// is computed once. Queries run on CPU threads (one query, one thread).
#include "distance/pad_results.h"
#include "graph/common.h"

namespace gknn::graph {
namespace {

// Visited ids: open addressing, grown at half load, cleared per query.
class VisitedSet {
 public:
  VisitedSet() : keys_(1024, kNoNode) {}
  void clear() {
    std::fill(keys_.begin(), keys_.end(), kNoNode);
    size_ = 0;
  }
  // Inserts id; returns false when it was there already.
  bool insert(std::uint32_t id) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    const std::size_t mask = keys_.size() - 1;
    for (std::size_t h = mix64(id) & mask;; h = (h + 1) & mask) {
      if (keys_[h] == id) return false;
      if (keys_[h] == kNoNode) {
        keys_[h] = id;
        ++size_;
        return true;
      }
    }
  }

 private:
  void grow() {
    std::vector<std::uint32_t> old(keys_.size() * 2, kNoNode);
    old.swap(keys_);
    size_ = 0;
    for (std::uint32_t id : old)
      if (id != kNoNode) insert(id);
  }
  std::vector<std::uint32_t> keys_;
  std::size_t size_ = 0;
};

struct Entry {
  Scored s;
  bool expanded;
};

struct Searcher {
  const Graph& g;
  const float* vectors;
  int dim;
  Metric metric;
  const SearchParams& sp;
  const std::vector<std::uint32_t>& entries;
  const std::uint8_t* exclude;  // null, or n flags: nodes taken as absent (connect.cpp)
  VisitedSet visited;
  std::vector<Entry> list;

  // Offers a node at distance d to the list (kept sorted, at most ef). A
  // skipped node with an empty row (a deleted one) can neither be returned
  // nor lead anywhere: it takes no place in the list.
  void offer(double d, std::uint32_t id, int ef) {
    if (sp.skip && sp.skip[id] && g.row(id)[0] == kNoNode) return;
    if (exclude && exclude[id]) return;
    const Scored s{d, id};
    if (int(list.size()) == ef && !(s < list.back().s)) return;
    auto at = std::upper_bound(list.begin(), list.end(), s,
                               [](const Scored& a, const Entry& e) { return a < e.s; });
    list.insert(at, Entry{s, false});
    if (int(list.size()) > ef) list.pop_back();
  }

  void run(const float* q, std::int64_t* ids, double* distances) {
    const int ef = std::max(sp.ef, sp.k);
    visited.clear();
    list.clear();
    for (std::uint32_t e : entries)
      if (visited.insert(e)) offer(dist(metric, vectors + std::int64_t(e) * dim, q, dim), e, ef);
    std::uint32_t picks[kMaxWidth];
    for (;;) {
      // The `width` best unexpanded nodes, picked before any is expanded
      // (offers reorder the list).
      int npick = 0;
      for (std::size_t at = 0; at < list.size() && npick < sp.width; ++at)
        if (!list[at].expanded) {
          list[at].expanded = true;
          picks[npick++] = list[at].s.id;
        }
      if (npick == 0) break;
      for (int p = 0; p < npick; ++p) {
        const std::uint32_t* row = g.row(picks[p]);
        for (int s = 0; s < g.degree && row[s] != kNoNode; ++s)
          if (visited.insert(row[s]))
            offer(dist(metric, vectors + std::int64_t(row[s]) * dim, q, dim), row[s], ef);
      }
    }
    int out = 0;
    for (const Entry& e : list) {
      if (out == sp.k) break;
      if (sp.skip && sp.skip[e.s.id]) continue;
      ids[out] = e.s.id;
      distances[out] = e.s.d;
      ++out;
    }
    pad_results(ids + out, distances + out, sp.k - out);
  }
};

}  // namespace

void search_cpu(const Graph& g, const float* vectors, int dim, Metric metric, const float* queries,
                std::int64_t nq, const SearchParams& sp, std::int64_t* ids, double* distances) {
  check_search(g, vectors, dim, metric, queries, nq, sp, ids, distances);
  const std::vector<std::uint32_t> entries = entry_points(g, sp.seed, sp.skip);
  // Threads only where a batch is large enough to pay for them.
  parallel_rows(
      nq,
      [&](std::int64_t b, std::int64_t e) {
        Searcher s{g, vectors, dim, metric, sp, entries, nullptr, {}, {}};
        for (std::int64_t q = b; q < e; ++q) s.run(queries + q * dim, ids + q * sp.k, distances + q * sp.k);
      },
      nq < 16 ? 1 : 0);
}

std::int64_t search_within(const Graph& g, const float* vectors, int dim, Metric metric, const float* query,
                           int ef, const std::vector<std::uint32_t>& entries, const std::uint8_t* exclude,
                           double* distance) {
  SearchParams sp;
  sp.k = 1;
  sp.ef = ef;
  sp.width = 1;  // builds keep their graphs whatever searches use
  Searcher s{g, vectors, dim, metric, sp, entries, exclude, {}, {}};
  std::int64_t id = -1;
  s.run(query, &id, distance);
  return id;
}

}  // namespace gknn::graph
