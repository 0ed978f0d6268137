// Helpers the graph's build, search and maintenance share (not a public
// header): threads over rows, progress, entry points, row ordering.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "gknn/graph.h"

namespace gknn::graph {

// fn(begin, end) over [0, n) in contiguous blocks, one per core (at most
// `max_threads`); the calling thread takes the first block. Each row's
// result depends on that row only, so the split changes no result. An
// exception in any block is rethrown after every thread has joined.
void parallel_rows(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                   int max_threads = 0);

// Reports progress; throws Error(Cancelled) when the callback says stop.
void check_progress(const Progress& progress, const char* phase, std::int64_t done, std::int64_t total);

// SplitMix64: the one source of pseudo-random numbers (seeded, portable).
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The search's entry sample for `seed` over g's nodes: entry_samples(n)
// distinct ids, deleted ones (skipped with an empty row) passed over. The
// CPU and the GPU search start from these.
std::vector<std::uint32_t> entry_points(const Graph& g, std::uint64_t seed, const std::uint8_t* skip);

// A node and its (canonical) distance to some owner or query.
struct Scored {
  double d;
  std::uint32_t id;
};
inline bool operator<(const Scored& a, const Scored& b) { return score_less(a.d, a.id, b.d, b.id); }

// Distance of two stored rows (or a row and a query), canonical.
inline double dist(Metric m, const float* a, const float* b, int dim) {
  return canonical_score(distance(m, a, b, dim));
}

// Rewrites row (degree slots, kNoNode-padded, any order) in (distance to
// owner, id) order, kNoNode at the end.
void sort_row(std::uint32_t* row, int degree, const float* vectors, int dim, Metric metric,
              std::uint32_t owner);

// Checks the arguments every search takes (sizes, pointers).
void check_search(const Graph& g, const float* vectors, int dim, Metric metric, const float* queries,
                  std::int64_t nq, const SearchParams& sp, const std::int64_t* ids, const double* distances);

// CAGRA's optimisation of a kNN graph (n x kdeg ids per row in (distance,
// id) order, kNoNode-padded) to the final graph: rank-based pruning, reverse
// edges, merge, rows put in distance order. Runs on CPU threads, the prune
// on `device` when >= 0 (prune_gpu: the same edges).
Graph optimise(const std::vector<std::uint32_t>& knn, std::int64_t n, int kdeg, const float* vectors,
               const BuildParams& p, const Progress& progress, int device = -1);

// prune_knn_row of every node of knn (n x kdeg) on a GPU: pruned, n x degree
// (host), exactly the CPU's rows (prune_cuda.cu).
void prune_gpu(const std::vector<std::uint32_t>& knn, std::int64_t n, int kdeg, int degree, int device,
               std::uint32_t* pruned);

// Links every part of g that its first live node does not reach to the
// nearest reached node, both ways, and sets g.entries to the first node of
// every part of at least kMinEntryPart nodes (connect.cpp). deleted: n
// flags or null.
void connect(Graph& g, const float* vectors, const BuildParams& p, const std::uint8_t* deleted = nullptr,
             const Progress& progress = {});

// The search_cpu of one query with k = 1 over the nodes that `exclude`
// (n flags) leaves in (excluded ones are neither listed nor expanded),
// started from `entries`: the nearest node found, or -1 when no entry was
// left in; *distance its distance.
std::int64_t search_within(const Graph& g, const float* vectors, int dim, Metric metric, const float* query,
                           int ef, const std::vector<std::uint32_t>& entries, const std::uint8_t* exclude,
                           double* distance);

// The kNN graph on the CPU (device < 0) or a GPU (knn_graph.cpp says which
// way for which n). n x kdeg ids, rows in (distance, id) order, self
// excluded, completed with pseudo-random nodes when a row came back short
// (so rows are full whenever n - 1 >= kdeg).
std::vector<std::uint32_t> knn_graph(const float* vectors, std::int64_t n, int kdeg, const BuildParams& p,
                                     int device, const Progress& progress);

// Largest n for which the kNN graph is exact: on the CPU, on a GPU.
constexpr std::int64_t kExactKnnMaxN = 20000;
constexpr std::int64_t kExactKnnGpuMaxN = 250000;

// The GPU's two ways (knn_graph_gpu.cu), rows written into knn (n x kdeg,
// kNoNode-filled): exact, and `lists` k-means lists each searched exactly
// among its `probes` nearest lists' nodes.
void knn_exact_gpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, int device,
                   const Progress& progress, std::vector<std::uint32_t>& knn);
void knn_lists_gpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, int device,
                   const Progress& progress, std::vector<std::uint32_t>& knn, int lists, int probes);
constexpr int kListProbes = 24;
inline int list_count(std::int64_t n) {
  return int(std::max<std::int64_t>(1, std::int64_t(std::sqrt(double(n)))));
}

// Tests only: DeviceGraph's searches of up to 16 queries take clusters of cl
// CTAs (1, 4 or 8; 4 and 8 only where the device has them), 0 the device's
// choice (search_cuda.cu).
void force_search_team_for_tests(int cl);

// The nodes of each of `lists` lists (list_of: a node's list), ascending in
// each: list l's are member[start[l] .. start[l + 1]).
inline void list_members(const std::vector<std::int32_t>& list_of, int lists,
                         std::vector<std::int64_t>& start, std::vector<std::int64_t>& member) {
  start.assign(lists + 1, 0);
  for (std::int32_t l : list_of) ++start[l + 1];
  for (int l = 0; l < lists; ++l) start[l + 1] += start[l];
  std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
  member.resize(list_of.size());
  for (std::size_t i = 0; i < list_of.size(); ++i) member[fill[list_of[i]]++] = std::int64_t(i);
}

// sample_n rows of v (n x dim) evenly strided (row i * n / sample_n): the
// k-means samples of the kNN graphs' lists.
inline std::vector<float> strided_sample(const float* v, std::int64_t n, int dim, std::int64_t sample_n) {
  std::vector<float> sample(std::size_t(sample_n) * dim);
  for (std::int64_t i = 0; i < sample_n; ++i)
    std::copy_n(v + (i * n / sample_n) * dim, dim, &sample[i * dim]);
  return sample;
}

// Writes row x of the kNN graph from a search's result row (k ids, self and
// padding included): self dropped, at most kdeg kept, kNoNode after.
inline void take_knn_row(std::int64_t x, const std::int64_t* ids, int k, int kdeg, std::uint32_t* out) {
  int used = 0;
  for (int j = 0; j < k && used < kdeg; ++j)
    if (ids[j] >= 0 && ids[j] != x) out[used++] = std::uint32_t(ids[j]);
  for (; used < kdeg; ++used) out[used] = kNoNode;
}

// Scratch of the prune, reused across calls by one thread.
struct PruneScratch {
  std::vector<std::uint32_t> keys;
  std::vector<int> ranks, count, order;
};

// The prune with kept candidates in priority order (detours, rank); the
// public prune_list is this followed by a sort into rank order. Returns the
// number kept.
int prune_priority(const std::uint32_t* candidates, int m, const std::uint32_t* candidate_rows, int row_len,
                   int degree, std::uint32_t* out, PruneScratch& scratch);

// The same for node x of a kNN graph (n x kdeg, kNoNode-padded rows): its
// row's candidates, their rows read in place.
int prune_knn_row(const std::uint32_t* knn, int kdeg, std::int64_t x, int degree, std::uint32_t* out,
                  PruneScratch& scratch);

}  // namespace gknn::graph
