// CAGRA's graph optimisation (Ootomo et al., ICDE 2024, section IV-B) on CPU
// threads (the prune on a GPU when the build has one): every node's kNN list pruned by its count of
// detourable routes (rank-based: no distances needed), then the reverse edges of the pruned graph merged in
// (half the row from each), then each row put in distance order, the graph's row invariant.
#include <numeric>

#include "graph/common.h"

namespace gknn::graph {
namespace {

constexpr std::int64_t kChunk = 1 << 14;  // nodes between progress calls

// Runs fn over [0, n) in chunks with a progress call after each.
void chunked(std::int64_t n, const char* phase, const Progress& progress,
             const std::function<void(std::int64_t, std::int64_t)>& fn) {
  check_progress(progress, phase, 0, n);
  for (std::int64_t b = 0; b < n; b += kChunk) {
    const std::int64_t e = std::min(n, b + kChunk);
    parallel_rows(e - b, [&](std::int64_t lo, std::int64_t hi) { fn(b + lo, b + hi); });
    check_progress(progress, phase, e, n);
  }
}

}  // namespace

Graph optimise(const std::vector<std::uint32_t>& knn, std::int64_t n, int kdeg, const float* vectors,
               const BuildParams& p, const Progress& progress, int device) {
  const int d = p.degree;
  Graph g;
  g.n = n;
  g.degree = d;
  g.edges.assign(std::size_t(n) * d, kNoNode);
  if (n == 0) return g;

  // 1. Prune each kNN list to d edges, in priority order (detours, rank).
  std::vector<std::uint32_t> pruned(std::size_t(n) * d, kNoNode);
  if (device >= 0) {  // the same edges (prune_cuda.cu)
    check_progress(progress, kPhasePrune, 0, n);
    prune_gpu(knn, n, kdeg, d, device, pruned.data());
    check_progress(progress, kPhasePrune, n, n);
  } else {
    chunked(n, kPhasePrune, progress, [&](std::int64_t b, std::int64_t e) {
      PruneScratch scratch;
      for (std::int64_t x = b; x < e; ++x)
        prune_knn_row(knn.data(), kdeg, x, d, pruned.data() + x * d, scratch);
    });
  }

  // 2. Reverse edges: y's list of x with x -> y kept at priority r, ordered
  // by (r, x), at most d. Buckets filled in ascending x, so the order and
  // the result do not depend on threads.
  check_progress(progress, kPhaseReverse, 0, n);
  std::vector<std::int64_t> start(n + 1, 0);
  for (std::size_t i = 0; i < pruned.size(); ++i)
    if (pruned[i] != kNoNode) ++start[pruned[i] + 1];
  for (std::int64_t y = 0; y < n; ++y) start[y + 1] += start[y];
  std::vector<std::uint64_t> rev(start[n]);  // (priority << 32) | x
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t x = 0; x < n; ++x)
      for (int r = 0; r < d; ++r) {
        const std::uint32_t y = pruned[x * d + r];
        if (y != kNoNode) rev[fill[y]++] = (std::uint64_t(r) << 32) | std::uint64_t(x);
      }
  }

  // 3. Merge: the first d/2 pruned edges, then reverse edges by priority,
  // then the remaining pruned ones; rows then in distance order.
  chunked(n, kPhaseReverse, progress, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t y = b; y < e; ++y) {
      std::uint64_t* rb = rev.data() + start[y];
      std::uint64_t* re = rev.data() + start[y + 1];
      std::sort(rb, re);
      std::uint32_t* out = g.row(y);
      const std::uint32_t* pr = pruned.data() + y * d;
      int used = 0;
      auto add = [&](std::uint32_t id) {
        if (id == kNoNode || used == d || id == std::uint32_t(y)) return;
        for (int s = 0; s < used; ++s)
          if (out[s] == id) return;
        out[used++] = id;
      };
      for (int s = 0; s < d / 2; ++s) add(pr[s]);
      for (std::uint64_t* it = rb; it != re && used < d; ++it) add(std::uint32_t(*it & 0xFFFFFFFFu));
      for (int s = d / 2; s < d; ++s) add(pr[s]);
      sort_row(out, d, vectors, p.dim, p.metric, std::uint32_t(y));
    }
  });
  return g;
}

}  // namespace gknn::graph
