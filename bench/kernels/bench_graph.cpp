// The gpu_graph core (issue 15): build time and search recall / QPS.
//
//   gknn_bench_graph [n=1000000] [dim=128] [degree=32] [file.fvecs] [cpu|profile|quick|width|threads]
//
// Data: a clustered synthetic set (1,000 Gaussian centres, noise 0.35 of
// the centres' spread) or the first n vectors of an .fvecs file; 1,000
// queries from the same distribution (the file's last 1,000 rows held out).
// Builds with build_gpu on device 0 (phase times from the progress
// callback), or also build_cpu when "cpu" is given; ground truth with the
// exact GPU kNN; then DeviceGraph::search per ef, search width (nodes
// expanded per step: 1, 2, 4, 8) and batch size (1, 8, 64, 1000 queries
// per call): recall@10, queries per second, and the median latency of one
// query alone (batch 1); and search_cpu
// at the same ef on 200 queries (recall only), the CPU path's check. Also:
// the recall of the build's initial kNN graph (knn_graph, internal) on
// 1,000 sampled nodes against their exact kNN, and the GPU search's recall
// without the graph's entries (the seeded sample alone). "profile": after
// the build, only single-query searches (ef 16 and 64, the default width)
// between cudaProfilerStart/Stop, for `ncu --profile-from-start off`, with
// the host's time per call. "quick": the search table at ef 16, 20, 22, 24
// and 32, the default width only (a before/after of the search kernel). "width":
// ef 16, 20, 24 and 32 at widths 4, 8 and 16 (which width reaches a recall at
// the least latency where the graph's degree is high). After
// the table, the floor under a call measured in the same run
// (launch_floor.cu: an empty kernel launched and waited for as a call is).
// "threads": the GPU service's shape (its executor threads each searching a
// small batch at once): calls of 1, 2 and 4 queries at ef 16 and 20 from 1,
// 2, 4 and 8 host threads together for 2 s each, total queries per second and
// the mean time of one call (a before/after of a call's host work), with the
// CTAs per query the device chooses and with clusters of 4 and 8 forced (a
// cluster of 8 per query fills an H200's 132 SMs at 16 queries in flight,
// whatever the number of calls they come in).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cuda_profiler_api.h>

#include "gknn/graph.h"
#include "gknn/knn.h"
#include "graph/common.h"
#include "launch_floor.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<float> clustered(std::int64_t n, int dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  constexpr int kCentres = 1000;
  std::vector<float> c(std::size_t(kCentres) * dim), x(std::size_t(n) * dim);
  std::mt19937_64 crng(42);
  for (float& v : c) v = g(crng);
  std::uniform_int_distribution<int> pick(0, kCentres - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const int k = pick(rng);
    for (int d = 0; d < dim; ++d) x[i * dim + d] = c[std::size_t(k) * dim + d] + 0.35f * g(rng);
  }
  return x;
}

bool read_fvecs(const char* path, std::int64_t n, int& dim, std::vector<float>& out) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  std::int32_t d = 0;
  std::vector<float> row;
  while (std::int64_t(out.size()) < n * std::max(dim, 1) && std::fread(&d, 4, 1, f) == 1) {
    if (!dim) dim = d;
    row.resize(d);
    if (std::fread(row.data(), 4, d, f) != std::size_t(d)) break;
    out.insert(out.end(), row.begin(), row.end());
  }
  std::fclose(f);
  return dim > 0;
}

double recall(const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& got, int k,
              std::int64_t nq) {
  std::int64_t hits = 0;
  for (std::int64_t q = 0; q < nq; ++q) {
    std::set<std::int64_t> t(truth.begin() + q * k, truth.begin() + (q + 1) * k);
    for (int j = 0; j < k; ++j) hits += t.count(got[q * k + j]);
  }
  return double(hits) / double(nq * k);
}

// Recall of the build's initial kNN graph (the GPU's, as build_gpu makes
// it) on 1,000 evenly spaced nodes against their exact kNN (self left out).
void knn_graph_recall(const float* base, std::int64_t n, const gknn::graph::BuildParams& p) {
  const int kdeg = gknn::graph::effective_intermediate_degree(p, n);
  const auto t0 = Clock::now();
  const std::vector<std::uint32_t> knn = gknn::graph::knn_graph(base, n, kdeg, p, 0, {});
  const double took = since(t0);
  const std::int64_t ns = std::min<std::int64_t>(n, 1000);
  std::vector<float> sample(std::size_t(ns) * p.dim);
  std::vector<std::int64_t> rows(ns);
  for (std::int64_t i = 0; i < ns; ++i) {
    rows[i] = i * n / ns;
    std::copy_n(base + rows[i] * p.dim, p.dim, sample.data() + i * p.dim);
  }
  gknn::KnnRequest r;
  r.base = base;
  r.n = n;
  r.queries = sample.data();
  r.nq = ns;
  r.dim = p.dim;
  r.k = kdeg + 1;
  std::vector<std::int64_t> ids(std::size_t(ns) * r.k);
  std::vector<double> d(ids.size());
  gknn::exact_knn_gpu(r, 0, ids.data(), d.data());
  std::int64_t hits = 0, first = 0;
  for (std::int64_t i = 0; i < ns; ++i) {
    std::set<std::int64_t> truth;
    for (int j = 0; j < r.k && int(truth.size()) < kdeg; ++j)
      if (ids[i * r.k + j] != rows[i]) truth.insert(ids[i * r.k + j]);
    const std::uint32_t* row = knn.data() + rows[i] * kdeg;
    for (int j = 0; j < kdeg; ++j) hits += truth.count(row[j]);
    std::int64_t nearest = -1;
    for (int j = 0; j < r.k && nearest < 0; ++j)
      if (ids[i * r.k + j] != rows[i]) nearest = ids[i * r.k + j];
    first += row[0] == nearest;
  }
  std::printf("kNN graph (%.2f s): recall@%d %.4f on %lld nodes, nearest neighbour first %.4f\n", took, kdeg,
              double(hits) / double(ns * kdeg), (long long)ns, double(first) / double(ns));
}

}  // namespace

// Single queries only, the profiled ones between cudaProfilerStart/Stop.
int profile_single_queries(const gknn::graph::Graph& g, const float* base, const float* queries, int dim,
                           int k) {
  const gknn::graph::DeviceGraph dg(g, base, dim, gknn::Metric::L2, 0);
  std::vector<std::int64_t> ids(k);
  std::vector<double> dist(k);
  gknn::graph::SearchParams sp;
  sp.k = k;
  for (int i = 0; i < 20; ++i) dg.search(queries + i * dim, 1, sp, ids.data(), dist.data());  // warm-up
  cudaProfilerStart();
  for (int ef : {16, 64}) {
    sp.ef = ef;
    for (int i = 20; i < 23; ++i) {
      const auto t = Clock::now();
      dg.search(queries + i * dim, 1, sp, ids.data(), dist.data());
      std::printf("profile: ef %d width %d query %d: %.3f ms\n", ef, sp.width, i, since(t) * 1e3);
    }
  }
  cudaProfilerStop();
  return 0;
}

// Calls of `batch` queries from `threads` host threads at once for `secs`.
void concurrent_calls(const gknn::graph::DeviceGraph& dg, const float* queries, std::int64_t nq, int dim,
                      int k, int ef, int batch, int threads, double secs, int team = 0) {
  gknn::graph::force_search_team_for_tests(team);
  std::atomic<std::int64_t> calls{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  std::vector<double> busy(threads, 0.0);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      gknn::graph::SearchParams sp;
      sp.k = k;
      sp.ef = ef;
      std::vector<std::int64_t> ids(std::size_t(batch) * k);
      std::vector<double> dist(std::size_t(batch) * k);
      for (std::int64_t i = t * 37; !stop.load(std::memory_order_relaxed); i += batch) {
        const std::int64_t q = i % (nq - batch);
        const auto c = Clock::now();
        dg.search(queries + q * dim, batch, sp, ids.data(), dist.data());
        busy[t] += since(c);
        calls.fetch_add(1, std::memory_order_relaxed);
      }
    });
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  stop = true;
  for (auto& th : pool) th.join();
  const double wall = since(t0), n = double(calls.load());
  double all = 0;
  for (double b : busy) all += b;
  std::printf("| %d | %d | %d | %d | %.0f | %.3f |\n", ef, batch, threads, team, n * batch / wall,
              all / n * 1e3);
}

int threaded_calls(const gknn::graph::Graph& g, const float* base, const float* queries, std::int64_t nq,
                   int dim, int k) {
  const gknn::graph::DeviceGraph dg(g, base, dim, gknn::Metric::L2, 0);
  concurrent_calls(dg, queries, nq, dim, k, 20, 1, 1, 0.5);  // warm-up
  std::printf(
      "\n| ef | batch | threads | CTAs per query (0: the device's choice) | queries/s | ms per call |\n"
      "|---:|---:|---:|---:|---:|---:|\n");
  for (int ef : {16, 20})
    for (int batch : {1, 2, 4})
      for (int threads : {1, 2, 4, 8})
        for (int team : {0, 4, 8}) concurrent_calls(dg, queries, nq, dim, k, ef, batch, threads, 1.0, team);
  gknn::graph::force_search_team_for_tests(0);
  return 0;
}

// Single queries from T host
// threads at once, closed loop, through GraphServer (a kernel that stays on
// the GPU, one cluster a thread's slot) beside T threads calling
// DeviceGraph::search with one query each (and 4 threads with 4 each, the
// GPU service's 4 executors at 16 clients). Each GraphServer first answers
// the first 1,000 queries, compared with one-query calls (ids and distance
// bits).
void served_calls(const gknn::graph::DeviceGraph& dg, const float* queries, std::int64_t nq, int dim, int k,
                  const gknn::graph::SearchParams& sp, const std::vector<std::int64_t>& rid,
                  const std::vector<double>& rd, int threads, int team, double secs, int slots = 0) {
  std::int64_t mismatches = 0, calls = 0;
  std::vector<double> lat;
  double wall = 0;
  int chosen = team;  // the server's (team 0: the device's choice)
  try {
    gknn::graph::GraphServer srv(dg, std::max(slots, threads), team, sp);
    chosen = srv.team();
    std::vector<std::thread> pool;
    std::vector<std::int64_t> bad(threads, 0), done(threads, 0);
    std::vector<std::vector<double>> times(threads);
    std::atomic<bool> stop{false}, go{false};
    std::atomic<int> failed{0}, checked{0};
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<std::int64_t> ids(k);
        std::vector<double> d(k);
        try {
          for (std::int64_t q = t; q < nq; q += threads) {
            srv.search(t, queries + q * dim, sp.ef, k, ids.data(), d.data());
            if (std::memcmp(ids.data(), &rid[q * k], sizeof(std::int64_t) * k) != 0 ||
                std::memcmp(d.data(), &rd[q * k], sizeof(double) * k) != 0)
              ++bad[t];
          }
          checked.fetch_add(1);
          while (!go.load()) {
          }
          while (!stop.load(std::memory_order_relaxed)) {
            const std::int64_t q = (t * 37 + done[t] * threads) % nq;
            const auto c = Clock::now();
            srv.search(t, queries + q * dim, sp.ef, k, ids.data(), d.data());
            times[t].push_back(since(c));
            ++done[t];
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "served search failed: %s\n", e.what());
          failed = 1;
          checked.fetch_add(1);
        }
      });
    while (checked.load() < threads) std::this_thread::yield();  // the checks (not timed)
    const auto t0 = Clock::now();
    go = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    stop = true;
    for (auto& th : pool) th.join();
    wall = since(t0);
    if (failed) {
      std::printf("| %d | served | %d | %d | failed | | |\n", sp.ef, threads, team);
      return;
    }
    for (int t = 0; t < threads; ++t) {
      mismatches += bad[t];
      calls += done[t];
      lat.insert(lat.end(), times[t].begin(), times[t].end());
    }
  } catch (const std::exception& e) {
    std::printf("| %d | served | %d | %d | not run: %s | | |\n", sp.ef, threads, team, e.what());
    return;
  }
  std::nth_element(lat.begin(), lat.begin() + lat.size() / 2, lat.end());
  std::printf("| %d | served of %d slots | %d | %d | %.0f | %.3f | %lld |\n", sp.ef, std::max(slots, threads),
              threads, chosen, double(calls) / wall, lat.empty() ? 0.0 : lat[lat.size() / 2] * 1e3,
              (long long)mismatches);
  std::fflush(stdout);
}

int serve_calls(const gknn::graph::Graph& g, const float* base, const float* queries, std::int64_t nq,
                int dim, int k) {
  const gknn::graph::DeviceGraph dg(g, base, dim, gknn::Metric::L2, 0);
  concurrent_calls(dg, queries, nq, dim, k, 16, 1, 1, 0.5);  // warm-up
  std::printf(
      "\nserved: | ef | mode | threads | CTAs per query | queries/s | p50 ms a query | answers unlike a "
      "call's |\n"
      "called (concurrent_calls): | ef | batch | threads | CTAs per query | queries/s | ms per call |\n");
  for (int ef : {12, 16}) {
    gknn::graph::SearchParams sp;
    sp.k = k;
    sp.ef = ef;
    std::vector<std::int64_t> rid(std::size_t(nq) * k);
    std::vector<double> rd(std::size_t(nq) * k);
    for (std::int64_t q = 0; q < nq; ++q) dg.search(queries + q * dim, 1, sp, &rid[q * k], &rd[q * k]);
    std::printf(
        "\n| ef | batch | threads | CTAs per query | queries/s | ms per call "
        "|\n|---:|---:|---:|---:|---:|---:|\n");
    for (auto [threads, batch] : {std::pair{1, 1}, {4, 1}, {16, 1}, {4, 4}})
      concurrent_calls(dg, queries, nq, dim, k, ef, batch, threads, 1.0);
    std::printf(
        "\n| ef | mode | threads | CTAs per query | queries/s | p50 ms | unlike "
        "|\n|---:|---|---:|---:|---:|---:|---:|\n");
    for (int team : {8, 4, 1})
      for (int threads : {1, 4, 16}) served_calls(dg, queries, nq, dim, k, sp, rid, rd, threads, team, 1.0);
  }
  return 0;
}

// Lone and 16 queries at once with the server's other slots idle (16
// slots) and without (slots = threads), then 16-64 threads on the GPU
// service's 64 slots.
int serve_idle(const gknn::graph::Graph& g, const float* base, const float* queries, std::int64_t nq, int dim,
               int k, int ef) {
  const gknn::graph::DeviceGraph dg(g, base, dim, gknn::Metric::L2, 0);
  concurrent_calls(dg, queries, nq, dim, k, 16, 1, 1, 0.5);  // warm-up
  gknn::graph::SearchParams sp;
  sp.k = k;
  sp.ef = ef;
  std::vector<std::int64_t> rid(std::size_t(nq) * k);
  std::vector<double> rd(std::size_t(nq) * k);
  for (std::int64_t q = 0; q < nq; ++q) dg.search(queries + q * dim, 1, sp, &rid[q * k], &rd[q * k]);
  std::printf("\n| ef | mode | threads | CTAs per query | queries/s | p50 ms | unlike |\n");
  for (int team : {4, 6, 1})
    for (int slots : {0, 16})
      for (int threads : {1, 16})
        served_calls(dg, queries, nq, dim, k, sp, rid, rd, threads, team, 0.5, slots);
  // The GPU service's ring: 64 slots over 16 clusters of the device's choice
  // (threads past 16 wait behind another's search in their cluster).
  for (int threads : {16, 32, 64}) served_calls(dg, queries, nq, dim, k, sp, rid, rd, threads, 0, 0.5, 64);
  return 0;
}

int main(int argc, char** argv) {
  std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  int dim = argc > 2 ? std::atoi(argv[2]) : 128;
  const int degree = argc > 3 ? std::atoi(argv[3]) : 32;
  const char* file = argc > 4 && std::strcmp(argv[4], "-") != 0 ? argv[4] : nullptr;
  const bool with_cpu = argc > 5 && std::strcmp(argv[5], "cpu") == 0;
  const bool profile = argc > 5 && std::strcmp(argv[5], "profile") == 0;
  const bool quick = argc > 5 && std::strcmp(argv[5], "quick") == 0;
  const bool wide = argc > 5 && std::strcmp(argv[5], "width") == 0;
  const bool threads = argc > 5 && std::strcmp(argv[5], "threads") == 0;
  const bool serve = argc > 5 && std::strcmp(argv[5], "serve") == 0;
  constexpr std::int64_t nq = 1000;
  constexpr int k = 10;
  std::vector<float> all;
  if (file) {
    dim = 0;
    if (!read_fvecs(file, n + nq, dim, all)) return std::fprintf(stderr, "cannot read %s\n", file), 1;
    n = std::int64_t(all.size()) / dim - nq;
  } else {
    all = clustered(n + nq, dim, 7);
  }
  const float* base = all.data();
  const float* queries = all.data() + n * dim;
  gknn::graph::BuildParams p;
  p.dim = dim;
  p.degree = degree;
  p.seed = 1;
  std::printf("# gknn_bench_graph n=%lld dim=%d degree=%d intermediate=%d data=%s\n", (long long)n, dim,
              degree, gknn::graph::effective_intermediate_degree(p, n), file ? file : "clustered synthetic");
  const char* last = nullptr;
  Clock::time_point phase_start = Clock::now();
  auto progress = [&](const char* phase, std::int64_t, std::int64_t) {
    if (!last || std::strcmp(last, phase) != 0) {
      if (last) std::printf("#   %-24s %8.2f s\n", last, since(phase_start));
      last = phase;
      phase_start = Clock::now();
    }
    return true;
  };
  auto t0 = Clock::now();
  const gknn::graph::Graph g = gknn::graph::build_gpu(base, n, p, 0, progress);
  std::printf("#   %-24s %8.2f s\n", last, since(phase_start));
  std::printf("build_gpu: %.2f s, %zu entries\n", since(t0), g.entries.size());
  if (with_cpu) {
    last = nullptr;
    t0 = Clock::now();
    gknn::graph::build_cpu(base, n, p, progress);
    std::printf("#   %-24s %8.2f s\n", last, since(phase_start));
    std::printf("build_cpu: %.2f s\n", since(t0));
  }
  if (profile) return profile_single_queries(g, base, queries, dim, k);
  if (threads) return threaded_calls(g, base, queries, nq, dim, k);
  if (serve) return serve_calls(g, base, queries, nq, dim, k);
  if (argc > 5 && std::strcmp(argv[5], "idle") == 0)
    return serve_idle(g, base, queries, nq, dim, k, argc > 6 ? std::atoi(argv[6]) : 12);
  gknn::KnnRequest r;
  r.base = base;
  r.n = n;
  r.queries = queries;
  r.nq = nq;
  r.dim = dim;
  r.k = k;
  std::vector<std::int64_t> truth(nq * k), ids(nq * k);
  std::vector<double> td(nq * k), dist(nq * k);
  gknn::exact_knn_gpu(r, 0, truth.data(), td.data());
  knn_graph_recall(base, n, p);
  t0 = Clock::now();
  const gknn::graph::DeviceGraph dg(g, base, dim, gknn::Metric::L2, 0);
  gknn::graph::Graph bare = g;
  bare.entries.clear();
  const gknn::graph::DeviceGraph dg_bare(bare, base, dim, gknn::Metric::L2, 0);
  std::printf("DeviceGraph upload: %.3f s, %.1f MiB\n\n", since(t0), dg.bytes() / 1048576.0);
  std::printf(
      "| ef | width | recall@10 GPU | recall@10 CPU (200 q) | recall@10 GPU, no entries | p50 ms batch 1 | "
      "QPS "
      "batch 1 | QPS batch 8 | QPS batch 64 | QPS batch 1000 |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const std::vector<int> efs = quick  ? std::vector<int>{16, 20, 22, 24, 32}
                               : wide ? std::vector<int>{16, 20, 24, 32}
                                      : std::vector<int>{16, 32, 64, 128, 256, 512};
  const std::vector<int> widths = quick  ? std::vector<int>{gknn::graph::SearchParams{}.width}
                                  : wide ? std::vector<int>{4, 8, 16}
                                         : std::vector<int>{1, 2, 4, 8};
  for (int ef : efs)
    for (int width : widths) {
      gknn::graph::SearchParams sp;
      sp.k = k;
      sp.ef = ef;
      sp.width = width;
      dg.search(queries, nq, sp, ids.data(), dist.data());  // warm-up and recall
      const double rg = recall(truth, ids, k, nq);
      std::vector<std::int64_t> cids(200 * k);
      std::vector<double> cd(200 * k);
      gknn::graph::search_cpu(g, base, dim, gknn::Metric::L2, queries, 200, sp, cids.data(), cd.data());
      const double rc = recall(truth, cids, k, 200);
      dg_bare.search(queries, nq, sp, ids.data(), dist.data());
      const double rb = recall(truth, ids, k, nq);
      double qps[4];
      int bi = 0;
      std::vector<double> alone;
      for (std::int64_t batch : {1, 8, 64, 1000}) {
        const std::int64_t total = batch == 1 ? 200 : nq;
        t0 = Clock::now();
        for (std::int64_t q = 0; q < total; q += batch) {
          const auto t1 = Clock::now();
          dg.search(queries + q * dim, std::min(batch, total - q), sp, ids.data() + q * k,
                    dist.data() + q * k);
          if (batch == 1) alone.push_back(since(t1));
        }
        qps[bi++] = double(total) / since(t0);
      }
      std::nth_element(alone.begin(), alone.begin() + alone.size() / 2, alone.end());
      std::printf("| %d | %d | %.4f | %.4f | %.4f | %.3f | %.0f | %.0f | %.0f | %.0f |\n", ef, width, rg, rc,
                  rb, alone[alone.size() / 2] * 1e3, qps[0], qps[1], qps[2], qps[3]);
    }
  // The floor under those calls, same run: an empty kernel launched and
  // waited for as a call of 1 or 4 queries is (-1: not on this device).
  std::printf(
      "\nlaunch floor (empty kernel, all shared memory, answers to mapped memory, p50 ms): "
      "1 query %.4f, 4 queries %.4f in clusters of 8 CTAs; 1 query %.4f in one CTA\n",
      launch_floor_ms(1, true), launch_floor_ms(4, true), launch_floor_ms(1, false));
  return 0;
}
