// The graph search's steps, simulated on the CPU (no GPU needed): the
// GPU kernel runs search_cpu's algorithm with the same results, so what
// its steps are made of can be counted here and read against the kernel's
// phase profile (graph-kernel-phases-H200-*.md).
//
//   gknn_bench_graph_steps [n=20000] [file.fvecs] [queries.fvecs] [medoids...]
//
// Builds a degree-32 graph with build_cpu over the first n rows of the file
// (default: bench/data/fashion-mnist/base.fvecs, as the bench's dataset step
// leaves it), takes the first 1,000 query rows (default: query.fvecs beside
// it), computes their exact top 10, and searches at width 8 (the default)
// and ef 10, 12, 16, 20, 32 the way the kernel does: the entry sample
// (entry_points) scored and its ef best kept, then per step the `width`
// best unexpanded nodes' rows offered as one batch. Per ef: steps a query,
// fresh candidates a step, how many the merge gets after the drop
// (drop_hopeless: those before a full list's last entry; with the batch's
// own bound too, each 32-candidate warp's j-th least), the share of steps
// where that is over 32, how many enter the list, and recall@10. Then the
// same with the entry sample replaced by k-means medoids (each cluster's
// row nearest its centroid, 8 Lloyd iterations) for each count given
// (e.g. 64 128 256), and with the sample cut to that count. Also, for the
// entry sample, the same counts by step (the first step after the sample
// merges the most: what the merge must be fast at).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../common/vecfile.h"
#include "gknn/graph.h"
#include "gknn/knn.h"
#include "graph/common.h"

namespace {

using gknn::graph::Graph;
using Scored = std::pair<double, std::uint32_t>;  // (distance, id): pair order is score_less without NaNs

double l2(const float* a, const float* b, int dim) { return gknn::graph::dist(gknn::Metric::L2, a, b, dim); }

// The medoids' assignment split over two threads (the figures do not depend on it).
template <typename F>
void halves(long n, F f) {
  std::thread t(f, 0, n / 2);
  f(n / 2, n);
  t.join();
}

struct Counts {
  double steps = 0, offered = 0, kept_list = 0, kept_own = 0, over32 = 0, over32_own = 0, entering = 0,
         hits = 0;
  // By step (the last slot takes the later ones): steps taken, fresh, kept by each bound, entering.
  static constexpr int kSteps = 6;
  double at[kSteps][6] = {};
  int first_step = 0;  // steps before this query's first
};

// drop_hopeless's bounds over a batch in slot order (warps of 32, 512
// threads): `list`, a full list's last entry; `own`, that tightened by the
// batch's own where it has one (the greatest of the warps' j-th least);
// `least`, by a tighter one tried on paper (the ef-th least of the warps'
// j least). A candidate at or before a bound is kept.
struct Bounds {
  Scored list, own, least;
};

Bounds drop_bounds(const std::vector<Scored>& list, const std::vector<Scored>& batch, int ef) {
  Scored bound{INFINITY, gknn::graph::kNoNode};
  if (int(list.size()) >= ef) bound = list.back();
  const Bounds none{bound, bound, bound};
  const int nb = int(batch.size()), warps = 512 / 32, filled = std::max(1, std::min(warps, nb / 32));
  const int j = (ef + filled - 1) / filled;
  if (nb <= 32 || nb < ef || j > 32) return none;
  const int covering = std::min(warps, (nb - j) / 32 + 1);
  Scored greatest{-INFINITY, 0};
  std::vector<Scored> least;  // every covering warp's j least
  for (int w = 0; w < covering; ++w) {
    std::vector<Scored> v(batch.begin() + 32 * w, batch.begin() + std::min(nb, 32 * w + 32));
    if (int(v.size()) < j) return none;
    std::sort(v.begin(), v.end());
    greatest = std::max(greatest, v[std::size_t(j - 1)]);
    least.insert(least.end(), v.begin(), v.begin() + j);
  }
  if (covering * j < ef) return none;
  std::nth_element(least.begin(), least.begin() + (ef - 1), least.end());
  return {bound, std::min(bound, greatest), std::min(bound, least[std::size_t(ef - 1)])};
}

void search(const Graph& g, const float* base, int dim, const float* q,
            const std::vector<std::uint32_t>& entries, int ef, const std::int64_t* truth, Counts* c) {
  constexpr int kWidth = 8;
  c->first_step = int(c->steps);
  std::unordered_set<std::uint32_t> visited, expanded;
  std::vector<Scored> list, batch;
  for (std::uint32_t e : entries)
    if (visited.insert(e).second) batch.push_back({l2(base + std::int64_t(e) * dim, q, dim), e});
  std::sort(batch.begin(), batch.end());
  list.assign(batch.begin(), batch.begin() + std::min<std::size_t>(batch.size(), std::size_t(ef)));
  for (;;) {
    std::vector<std::uint32_t> picks;
    for (const Scored& s : list)
      if (int(picks.size()) < kWidth && expanded.insert(s.second).second) picks.push_back(s.second);
    if (picks.empty()) break;
    batch.clear();
    for (std::uint32_t p : picks)
      for (int s = 0; s < g.degree && g.row(p)[s] != gknn::graph::kNoNode; ++s)
        if (visited.insert(g.row(p)[s]).second)
          batch.push_back({l2(base + std::int64_t(g.row(p)[s]) * dim, q, dim), g.row(p)[s]});
    const Bounds b = drop_bounds(list, batch, ef);
    int kl = 0, ko = 0, kt = 0;
    for (const Scored& s : batch) kl += !(b.list < s), ko += !(b.own < s), kt += !(b.least < s);
    std::vector<Scored> merged = list;
    merged.insert(merged.end(), batch.begin(), batch.end());
    std::sort(merged.begin(), merged.end());
    merged.resize(std::min<std::size_t>(merged.size(), std::size_t(ef)));
    int entering = 0;
    for (const Scored& s : batch) entering += std::binary_search(merged.begin(), merged.end(), s);
    list = merged;
    double* at = c->at[std::min(int(c->steps) - c->first_step, Counts::kSteps - 1)];
    at[0] += 1, at[1] += double(batch.size()), at[2] += kl, at[3] += ko, at[4] += entering, at[5] += kt;
    c->steps += 1, c->offered += double(batch.size()), c->kept_list += kl, c->kept_own += ko;
    c->over32 += kl > 32, c->over32_own += ko > 32, c->entering += entering;
  }
  for (int i = 0; i < 10 && i < int(list.size()); ++i)
    c->hits += double(std::count(truth, truth + 10, std::int64_t(list[std::size_t(i)].second)));
}

void report(const char* label, const Graph& g, const std::vector<float>& base, int dim,
            const std::vector<float>& queries, long nq, const std::vector<std::uint32_t>& entries,
            const std::vector<std::int64_t>& truth, std::vector<std::string>* by_step = nullptr) {
  for (int ef : {10, 12, 16, 20, 32}) {
    Counts c;
    for (long q = 0; q < nq; ++q)
      search(g, base.data(), dim, queries.data() + q * dim, entries, ef, truth.data() + q * 10, &c);
    std::printf("| %s | %d | %.2f | %.1f | %.1f (%.0f %%) | %.1f (%.0f %%) | %.1f | %.4f |\n", label, ef,
                c.steps / double(nq), c.offered / c.steps, c.kept_list / c.steps, 100 * c.over32 / c.steps,
                c.kept_own / c.steps, 100 * c.over32_own / c.steps, c.entering / c.steps,
                c.hits / (10.0 * nq));
    for (int i = 0; by_step && i < Counts::kSteps; ++i) {
      const double* a = c.at[i];
      if (a[0] == 0) break;
      char line[200];
      std::snprintf(line, sizeof line, "| %d | %s%d | %.0f %% | %.1f | %.1f | %.1f | %.1f | %.1f |", ef,
                    i + 1 == Counts::kSteps ? ">= " : "", i + 1, 100 * a[0] / double(nq), a[1] / a[0],
                    a[2] / a[0], a[3] / a[0], a[5] / a[0], a[4] / a[0]);
      by_step->push_back(line);
    }
  }
}

std::vector<std::uint32_t> medoids(const std::vector<float>& base, long n, int dim, int k) {
  std::mt19937_64 rng(1);
  std::vector<float> centre(std::size_t(k) * dim);
  for (int i = 0; i < k; ++i) {
    const long r = long(rng() % std::uint64_t(n));
    std::copy(base.begin() + r * dim, base.begin() + (r + 1) * dim, centre.begin() + long(i) * dim);
  }
  std::vector<int> of(n);
  for (int it = 0; it < 8; ++it) {
    halves(n, [&](long b, long e) {
      for (long i = b; i < e; ++i) {
        double best = INFINITY;
        for (int j = 0; j < k; ++j) {
          const double d = l2(&base[i * dim], &centre[std::size_t(j) * dim], dim);
          if (d < best) best = d, of[i] = j;
        }
      }
    });
    std::vector<double> sum(std::size_t(k) * dim, 0.0);
    std::vector<long> count(k, 0);
    for (long i = 0; i < n; ++i) {
      ++count[of[i]];
      for (int x = 0; x < dim; ++x) sum[std::size_t(of[i]) * dim + x] += base[i * dim + x];
    }
    for (int j = 0; j < k; ++j)
      for (int x = 0; x < dim && count[j]; ++x)
        centre[std::size_t(j) * dim + x] = float(sum[std::size_t(j) * dim + x] / double(count[j]));
  }
  std::vector<std::pair<double, long>> nearest(k, {INFINITY, -1});
  for (long i = 0; i < n; ++i)
    nearest[of[i]] =
        std::min(nearest[of[i]], {l2(&base[i * dim], &centre[std::size_t(of[i]) * dim], dim), i});
  std::vector<std::uint32_t> out;
  for (const auto& m : nearest)
    if (m.second >= 0) out.push_back(std::uint32_t(m.second));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const long want = argc > 1 ? std::atol(argv[1]) : 20000;
  const std::string file = argc > 2 ? argv[2] : "bench/data/fashion-mnist/base.fvecs";
  const std::string qfile = argc > 3 ? argv[3] : file.substr(0, file.find_last_of('/') + 1) + "query.fvecs";
  gknn_bench::FloatMatrix b, qm;
  try {
    b = gknn_bench::read_fvecs(file, want);
    qm = gknn_bench::read_fvecs(qfile, 1000);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  const std::vector<float>& base = b.data;
  const std::vector<float>& queries = qm.data;
  const int dim = b.dim;
  const long n = long(b.rows), nq = long(qm.rows);
  if (n < 2 || qm.dim != dim) {
    std::fprintf(stderr, "need rows and queries of one dimension\n");
    return 1;
  }
  gknn::KnnRequest r;
  r.base = base.data(), r.n = n, r.queries = queries.data(), r.nq = nq, r.dim = dim, r.k = 10;
  std::vector<std::int64_t> truth(std::size_t(nq) * 10);
  std::vector<double> truth_d(truth.size());
  gknn::exact_knn_cpu(r, truth.data(), truth_d.data());
  gknn::graph::BuildParams bp;
  bp.dim = dim;
  bp.degree = 32;
  const Graph g = gknn::graph::build_cpu(base.data(), n, bp);
  std::printf("%ld rows x %d, %ld queries, degree 32, width 8, graph entries %zu, entry sample %d\n\n", n,
              dim, nq, g.entries.size(), gknn::graph::entry_samples(n));
  std::printf(
      "| starting points | ef | steps a query | fresh candidates a step | kept by the list's bound "
      "(steps over 32) | kept with the batch's own too | entering the list | recall@10 |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::vector<std::uint32_t> sample = gknn::graph::entry_points(g, 0, nullptr);
  std::vector<std::string> by_step;
  report("the entry sample", g, base, dim, queries, nq, sample, truth, &by_step);
  std::printf(
      "\nBy step, from the entry sample: the queries that take it, fresh candidates, kept by the list's "
      "bound, kept with the batch's own too, kept with the ef-th least of the warps' j least instead (a "
      "tighter bound, not in the kernel), entering the list.\n\n"
      "| ef | step | queries | fresh | kept by the list's bound | with the batch's own | with the warps' "
      "least | entering |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& line : by_step) std::printf("%s\n", line.c_str());
  std::printf("\n");
  for (int i = 4; i < argc; ++i) {
    const int k = std::atoi(argv[i]);
    const std::vector<std::uint32_t> m = medoids(base, n, dim, k);
    const std::vector<std::uint32_t> cut(sample.begin(),
                                         sample.begin() + std::min<std::size_t>(sample.size(), m.size()));
    const std::string a = std::to_string(m.size()) + " medoids",
                      b = "its first " + std::to_string(cut.size());
    report(a.c_str(), g, base, dim, queries, nq, m, truth);
    report(b.c_str(), g, base, dim, queries, nq, cut, truth);
  }
  return 0;
}
