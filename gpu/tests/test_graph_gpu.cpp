// The graph on the GPU (gknn/graph.h): DeviceGraph::search against
// search_cpu (same rows, same bits), from several threads at once, and
// build_gpu against the CPU build's recall floors. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "gknn/graph.h"
#include "graph/common.h"
#include "tests/gpu_env.h"
#include "tests/graph_data.h"
#include "tests/graph_ring.h"

namespace gknn::graph {
namespace {

constexpr int kDim = 24;

struct Data {
  std::vector<float> base, queries;
};

Data make_data(std::int64_t n, std::int64_t nq, int dim, unsigned seed) {
  std::vector<float> all = test::clustered(n + nq, dim, 50, 0.35f, seed);
  Data d;
  d.base.assign(all.begin(), all.begin() + n * dim);
  d.queries.assign(all.begin() + n * dim, all.end());
  return d;
}

BuildParams params(int degree, Metric metric = Metric::L2) {
  BuildParams p;
  p.dim = kDim;
  p.metric = metric;
  p.degree = degree;
  p.seed = 42;
  return p;
}

void expect_same(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                 const std::vector<double>& da, const std::vector<double>& db) {
  ASSERT_EQ(a.size(), b.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i] == b[i] && (da[i] == db[i] || (std::isnan(da[i]) && std::isnan(db[i])));
    differ += !same;
  }
  EXPECT_EQ(differ, 0u) << "of " << a.size();
}

// Ten answers a query, a list of ef, the sample's seed, skip flags or none.
SearchParams ten_answers(int ef, std::uint64_t seed, const std::uint8_t* skip = nullptr) {
  SearchParams sp;
  sp.k = 10;
  sp.ef = ef;
  sp.seed = seed;
  sp.skip = skip;
  return sp;
}

// The answers (k a query) search_cpu and dg.search give nq queries,
// expected the same.
struct Answers {
  std::vector<std::int64_t> cpu, gpu;
};
Answers expect_search_equals_cpu(const Graph& g, const DeviceGraph& dg, const float* base, int dim, Metric m,
                                 const float* queries, std::int64_t nq, const SearchParams& sp) {
  Answers a{std::vector<std::int64_t>(nq * sp.k), std::vector<std::int64_t>(nq * sp.k)};
  std::vector<double> cd(a.cpu.size()), gd(a.cpu.size());
  search_cpu(g, base, dim, m, queries, nq, sp, a.cpu.data(), cd.data());
  dg.search(queries, nq, sp, a.gpu.data(), gd.data());
  expect_same(a.cpu, a.gpu, cd, gd);
  return a;
}

TEST(GraphGpu, SearchEqualsCpuSearch) {
  GKNN_NEED_GPU();
  const Data d = make_data(4000, 300, kDim, 1);
  for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    SCOPED_TRACE(int(m));
    const Graph g = build_cpu(d.base.data(), 4000, params(24, m));
    const DeviceGraph dg(g, d.base.data(), kDim, m, 0);
    std::vector<std::uint8_t> skip(4000, 0);
    for (int i = 0; i < 4000; i += 3) skip[i] = 1;
    for (int ef : {10, 32, 64, 200}) {
      for (const std::uint8_t* sk : {(const std::uint8_t*)nullptr, (const std::uint8_t*)skip.data()}) {
        const SearchParams sp = ten_answers(ef, 7, sk);
        const Answers a = expect_search_equals_cpu(g, dg, d.base.data(), kDim, m, d.queries.data(), 300, sp);
        if (!sk) {
          const auto truth = test::exact_ids(d.base, d.queries, kDim, 10, m);
          EXPECT_NEAR(test::recall(truth, a.gpu, 10), test::recall(truth, a.cpu, 10), 0.01);
        }
      }
    }
  }
}

// Several nodes expanded per step: still the CPU's rows and bits, for
// widths whose rows fit one merge and for ones merged in pieces (16 rows of
// 24 > the 256 threads of a small batch, and > the 128 of a large one).
TEST(GraphGpu, WiderStepsEqualCpuSearch) {
  GKNN_NEED_GPU();
  const Data d = make_data(4000, 300, kDim, 5);
  const Graph g = build_cpu(d.base.data(), 4000, params(24));
  const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
  std::vector<std::uint8_t> skip(4000, 0);
  for (int i = 0; i < 4000; i += 5) skip[i] = 1;
  for (int width : {2, 4, 7, 8, kMaxWidth})
    for (std::int64_t nq : {1, 50, 300})
      for (int ef : {16, 32, 33, 64, 300})
        for (const std::uint8_t* sk : {(const std::uint8_t*)nullptr, (const std::uint8_t*)skip.data()}) {
          SCOPED_TRACE(::testing::Message() << "width " << width << " nq " << nq << " ef " << ef);
          SearchParams sp = ten_answers(ef, 3, sk);
          sp.width = width;
          expect_search_equals_cpu(g, dg, d.base.data(), kDim, Metric::L2, d.queries.data(), nq, sp);
        }
  SearchParams bad;
  bad.width = kMaxWidth + 1;
  std::vector<std::int64_t> ids(10);
  std::vector<double> dist(10);
  EXPECT_THROW(dg.search(d.queries.data(), 1, bad, ids.data(), dist.data()), Error);
}

// Calls of up to 16 queries, where each query may take a cluster of CTAs
// (sm_90) that score a step's rows together: the CPU's rows and bits in
// every metric, with and without skip flags, for rows staged in one chunk
// and in several (dim 301: not a multiple of four, copied a float at a time).
TEST(GraphGpu, SmallCallsEqualCpuSearch) {
  GKNN_NEED_GPU();
  const std::int64_t n = 3000;
  for (int dim : {64, 301}) {
    const Data d = make_data(n, 16, dim, 8);
    for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
      BuildParams p = params(16, m);
      p.dim = dim;
      const Graph g = build_cpu(d.base.data(), n, p);
      const DeviceGraph dg(g, d.base.data(), dim, m, 0);
      std::vector<std::uint8_t> skip(n, 0);
      for (std::int64_t i = 0; i < n; i += 4) skip[i] = 1;
      for (int team : {0, 1, 4, 8})
        for (std::int64_t nq : {1, 5, 16})
          for (int ef : {10, 64, 300})
            for (const std::uint8_t* sk : {(const std::uint8_t*)nullptr, (const std::uint8_t*)skip.data()}) {
              SCOPED_TRACE(::testing::Message() << "dim " << dim << " metric " << int(m) << " team " << team
                                                << " nq " << nq << " ef " << ef << (sk ? " skip" : ""));
              force_search_team_for_tests(team);
              const SearchParams sp = ten_answers(ef, 11, sk);
              expect_search_equals_cpu(g, dg, d.base.data(), dim, m, d.queries.data(), nq, sp);
              force_search_team_for_tests(0);
            }
    }
  }
}

// Entry samples of more than one batch: scored at once and merged by halves
// where two a thread hold them (571 and 1,000 entries for calls of 16
// queries' 512 threads, clusters or one CTA; 256 for 300 queries' 128) and
// the list fits a batch (ef 600 does not), else in batches (1,334): the
// CPU's rows and bits, with deleted nodes (skipped, rows emptied; the host
// leaves them out of the sample) and without skip flags.
TEST(GraphGpu, EntrySamplesOfTwoBatchesEqualCpuSearch) {
  GKNN_NEED_GPU();
  const std::int64_t n = 4000;
  const Data d = make_data(n, 300, kDim, 13);
  Graph built = build_cpu(d.base.data(), n, params(16));
  std::vector<std::uint8_t> skip(n, 0);
  for (std::int64_t i = 1; i < n; i += 6) {  // deleted: skipped, its row empty
    skip[i] = 1;
    std::fill_n(built.edges.begin() + i * built.degree, built.degree, kNoNode);
  }
  for (int every : {7, 4, 3}) {
    Graph g = built;
    g.entries.clear();
    for (std::int64_t i = 0; i < n; i += every) g.entries.push_back(std::uint32_t(i));
    const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
    for (int team : {0, 1})
      for (std::int64_t nq : {1, 16, 300})
        for (int ef : {10, 64, 600})
          for (const std::uint8_t* sk : {(const std::uint8_t*)nullptr, (const std::uint8_t*)skip.data()}) {
            SCOPED_TRACE(::testing::Message() << "entries " << g.entries.size() << " team " << team << " nq "
                                              << nq << " ef " << ef << (sk ? " skip" : ""));
            force_search_team_for_tests(team);
            const SearchParams sp = ten_answers(ef, 5, sk);
            expect_search_equals_cpu(g, dg, d.base.data(), kDim, Metric::L2, d.queries.data(), nq, sp);
            force_search_team_for_tests(0);
          }
  }
}

// Ties and NaN distances through every path of a call (clusters and the
// mapped queries and answers for small calls, the entry kernel and one CTA
// a query for 40): 300 copies of one row, 100 zero rows, a zero query (every
// cosine distance NaN: rows by id) and a query equal to the copied row (300
// distances tied at 0). The entry sample (256 of 3,000) goes through the
// batch's own bound and the shuffle sort.
TEST(GraphGpu, TiesAndNaNEqualCpuSearch) {
  GKNN_NEED_GPU();
  const std::int64_t n = 3000, nq = 40;
  const int dim = 64;
  Data d = make_data(n, nq, dim, 9);
  for (int i = 1; i <= 300; ++i) std::copy_n(&d.base[0], dim, &d.base[std::size_t(i) * 7 * dim]);
  for (int i = 0; i < 100; ++i) std::fill_n(&d.base[std::size_t(i * 7 + 3) * dim], dim, 0.0f);
  std::fill_n(&d.queries[0], dim, 0.0f);
  std::copy_n(&d.base[0], dim, &d.queries[dim]);
  for (Metric m : {Metric::L2, Metric::Cosine}) {
    BuildParams p = params(16, m);
    p.dim = dim;
    const Graph g = build_cpu(d.base.data(), n, p);
    const DeviceGraph dg(g, d.base.data(), dim, m, 0);
    for (int team : {0, 1, 8})
      for (auto [first, count] :
           {std::pair<std::int64_t, std::int64_t>{0, 1}, {1, 1}, {0, 2}, {0, 16}, {0, nq}})
        for (int ef : {10, 40}) {
          SCOPED_TRACE(::testing::Message() << "metric " << int(m) << " team " << team << " queries " << first
                                            << "+" << count << " ef " << ef);
          force_search_team_for_tests(team);
          const SearchParams sp = ten_answers(ef, 5);
          expect_search_equals_cpu(g, dg, d.base.data(), dim, m, d.queries.data() + first * dim, count, sp);
          force_search_team_for_tests(0);
        }
  }
}

// GraphServer's answers are the
// CPU search's (rows and bits) for every metric, ef and k asked per
// request, from several threads at once, and after its kernel's lifetime
// ended between two requests (keep_alive launches it again).
TEST(GraphGpu, ResidentServerEqualsCpuSearch) {
  GKNN_NEED_GPU();
  const Data d = make_data(4000, 200, kDim, 5);
  for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    SCOPED_TRACE(int(m));
    const Graph g = build_cpu(d.base.data(), 4000, params(24, m));
    const DeviceGraph dg(g, d.base.data(), kDim, m, 0);
    for (int team : {4, 6, 1}) {
      SCOPED_TRACE(team);
      SearchParams sp;
      sp.k = 16;  // the most a request asks
      sp.seed = 3;
      std::unique_ptr<GraphServer> srv;
      try {
        srv = std::make_unique<GraphServer>(dg, 4, team, sp);
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
        continue;  // no clusters on this device
      }
      for (const auto& [ef_asked, k_asked] : {std::pair{10, 10}, {33, 5}, {64, 16}}) {
        const int ef = ef_asked, k = k_asked;  // named for the threads' lambda
        SCOPED_TRACE(ef);
        SearchParams c = sp;
        c.ef = ef;
        c.k = k;
        std::vector<std::int64_t> ci(200 * k), gi(200 * k);
        std::vector<double> cd(ci.size()), gd(ci.size());
        search_cpu(g, d.base.data(), kDim, m, d.queries.data(), 200, c, ci.data(), cd.data());
        std::vector<std::thread> pool;
        for (int t = 0; t < 4; ++t)
          pool.emplace_back([&, t] {
            for (int q = t; q < 200; q += 4) {
              srv->search(t, d.queries.data() + q * kDim, ef, k, gi.data() + q * k, gd.data() + q * k);
              if (q == t) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past its lifetime
            }
          });
        for (auto& th : pool) th.join();
        expect_same(ci, gi, cd, gd);
      }
    }
  }
}

// The GPU service's ring: 64 slots over 16 clusters (slot s by cluster
// s % 16, its slots in turn), a request in every slot at once: each waits
// behind up to 3 others in its cluster and is answered as the CPU search
// answers it; the device's team is one it has (6, 4 or 1).
TEST(GraphGpu, ResidentServerSlotsShareClusters) {
  GKNN_NEED_GPU();
  const Data d = make_data(4000, 256, kDim, 7);
  const Graph g = build_cpu(d.base.data(), 4000, params(24, Metric::L2));
  const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
  SearchParams sp;
  sp.k = 10;
  sp.seed = 3;
  GraphServer srv(dg, 64, 0, sp);
  EXPECT_TRUE(srv.team() == 6 || srv.team() == 4 || srv.team() == 1) << srv.team();
  EXPECT_EQ(serving_clusters(64), 16);
  SearchParams c = sp;
  c.ef = 20;
  std::vector<std::int64_t> ci(256 * 10), gi(256 * 10);
  std::vector<double> cd(ci.size()), gd(ci.size());
  search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 256, c, ci.data(), cd.data());
  std::vector<std::thread> pool;
  for (int t = 0; t < 64; ++t)
    pool.emplace_back([&, t] {
      for (int q = t; q < 256; q += 64)
        srv.search(t, d.queries.data() + q * kDim, 20, 10, gi.data() + q * 10, gd.data() + q * 10);
    });
  for (auto& th : pool) th.join();
  expect_same(ci, gi, cd, gd);
}

// A GraphServer over a ring of
// the caller's (registered host memory, slots wider than the graph's
// queries) answers requests written by hand as RingLayout says, with rows
// mapped through row_ids; a request of another epoch, or with a k or a list
// the kernel has no room for, is refused unsearched.
TEST(GraphGpu, ResidentServerRingOfTheCallers) {
  GKNN_NEED_GPU();
  constexpr std::int64_t n = 3000;
  const Data d = make_data(n, 100, kDim, 9);
  const Graph g = build_cpu(d.base.data(), n, params(24));
  const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
  std::vector<std::int64_t> row_ids(n);
  for (std::int64_t i = 0; i < n; ++i) row_ids[i] = 1000000 + 7 * i;
  const test::Ring ring(8, 32, 16, 5, row_ids.data());
  ASSERT_EQ(
      cudaHostRegister(ring.memory.get(), ring.bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
      cudaSuccess);
  SearchParams sp;
  sp.k = 16;
  sp.seed = 3;
  for (int team : {0, 4, 6, 1}) {
    SCOPED_TRACE(team);
    std::unique_ptr<GraphServer> srv;
    try {
      srv = std::make_unique<GraphServer>(dg, ring.spec, team, sp);
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      continue;  // no clusters on this device
    }
    SearchParams c = sp;
    c.ef = 20;
    c.k = 10;
    std::vector<std::int64_t> ci(100 * 10);
    std::vector<double> cd(ci.size());
    search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 100, c, ci.data(), cd.data());
    const test::RingTally t = test::ask_with_refusals(ring, *srv, d.queries.data(), 100, kDim, ci.data(),
                                                      cd.data(), row_ids.data());
    EXPECT_EQ(t.unanswered, 0);
    EXPECT_EQ(t.wrong_status, 0);
    EXPECT_EQ(t.refused, 50);
    EXPECT_EQ(t.differ, 0);
  }
  ASSERT_EQ(cudaHostUnregister(ring.memory.get()), cudaSuccess);
}

TEST(GraphGpu, SmallGraphsAndPadding) {
  GKNN_NEED_GPU();
  for (std::int64_t n : {1, 2, 7, 9}) {
    const Data d = make_data(n, 4, kDim, 2);
    const Graph g = build_cpu(d.base.data(), n, params(8));
    const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
    expect_search_equals_cpu(g, dg, d.base.data(), kDim, Metric::L2, d.queries.data(), 4, SearchParams{});
  }
  Graph empty;
  empty.degree = 8;
  const DeviceGraph dg(empty, nullptr, kDim, Metric::L2, 0);
  std::vector<float> q(kDim, 1.0f);
  std::vector<std::int64_t> ids(10);
  std::vector<double> dist(10);
  dg.search(q.data(), 1, SearchParams{}, ids.data(), dist.data());
  EXPECT_EQ(ids[0], -1);
  SearchParams big;
  big.ef = kMaxDeviceEf + 1;
  EXPECT_THROW(dg.search(q.data(), 1, big, ids.data(), dist.data()), Error);
}

TEST(GraphGpu, SeveralThreadsAtOnce) {
  GKNN_NEED_GPU();
  const Data d = make_data(3000, 256, kDim, 3);
  const Graph g = build_cpu(d.base.data(), 3000, params(16));
  const DeviceGraph dg(g, d.base.data(), kDim, Metric::L2, 0);
  SearchParams sp;
  sp.k = 10;
  sp.ef = 48;
  std::vector<std::int64_t> ci(256 * 10);
  std::vector<double> cd(ci.size());
  search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 256, sp, ci.data(), cd.data());
  // 8 threads' calls of 8 queries outnumber the GPU's clusters of 8: calls
  // then take clusters of 4 beside the others' 8 (team_size), the same rows.
  constexpr int kThreads = 8;
  std::vector<std::vector<std::int64_t>> gi(kThreads, std::vector<std::int64_t>(ci.size()));
  std::vector<std::vector<double>> gd(kThreads, std::vector<double>(ci.size()));
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)  // batches of 1, 8, 64 and the rest, over and over
        for (std::int64_t q = 0; q < 256;) {
          const std::int64_t b = std::min<std::int64_t>(256 - q, q < 1 ? 1 : q < 9 ? 8 : 64);
          dg.search(d.queries.data() + q * kDim, b, sp, gi[t].data() + q * 10, gd[t].data() + q * 10);
          q += b;
        }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) expect_same(ci, gi[t], cd, gd[t]);
}

TEST(GraphGpu, BuildReachesTheCpuBuildsFloorsAndIsDeterministic) {
  GKNN_NEED_GPU();
  const Data d = make_data(4000, 200, kDim, 4);
  for (Metric m : {Metric::L2, Metric::Cosine}) {
    const Graph a = build_gpu(d.base.data(), 4000, params(24, m), 0);
    const Graph b = build_gpu(d.base.data(), 4000, params(24, m), 0);
    validate(a);
    check_row_order(a, d.base.data(), kDim, m);
    EXPECT_EQ(a.edges, b.edges);
    EXPECT_GE(test::graph_recall(a, d.base, d.queries, kDim, m, 10, 64), 0.97);
  }
  // Past the GPU's exact limit: the kNN graph from the lists search.
  const std::int64_t n = kExactKnnGpuMaxN + 500;
  constexpr int dim = 8;
  std::vector<float> x = test::clustered(n + 200, dim, 50, 0.35f, 5);
  std::vector<float> base(x.begin(), x.begin() + n * dim), q(x.begin() + n * dim, x.end());
  BuildParams p = params(16);
  p.dim = dim;
  const Graph g = build_gpu(base.data(), n, p, 0);
  const Graph g2 = build_gpu(base.data(), n, p, 0);
  validate(g);
  EXPECT_EQ(g.edges, g2.edges);
  EXPECT_GE(test::graph_recall(g, base, q, dim, Metric::L2, 10, 64), 0.95);
}

// prune_gpu keeps the CPU prune's edges in its order, row for row: full
// rows, rows cut short (empty slots after some candidates, as rows that came
// back short are before complete_rows), rows with a repeated id (the first
// rank counts), kNN degrees that are and are not multiples of a warp, and
// the widest kNN rows.
TEST(GraphGpu, PruneEqualsCpu) {
  GKNN_NEED_GPU();
  for (auto [n, kdeg] : {std::pair<std::int64_t, int>{3000, 64},
                         {2000, 40},
                         {1500, 100},
                         {700, 255},
                         {700, kMaxIntermediateDegree}}) {
    SCOPED_TRACE(kdeg);
    const Data d = make_data(n, 0, kDim, 7);
    std::vector<std::uint32_t> knn(std::size_t(n) * kdeg, kNoNode);
    knn_exact_gpu(d.base.data(), n, kdeg, params(16), 0, {}, knn);
    for (std::int64_t x = 0; x < n; x += 5)  // every fifth row cut after x % kdeg candidates
      std::fill(knn.begin() + x * kdeg + x % kdeg, knn.begin() + (x + 1) * kdeg, kNoNode);
    for (std::int64_t x = 1; x < n; x += 7)  // every seventh row repeats its first candidate further on
      knn[x * kdeg + kdeg / 2] = knn[x * kdeg];
    for (int degree : {2, 16, 32, 128}) {
      std::vector<std::uint32_t> cpu(std::size_t(n) * degree), gpu(cpu.size());
      PruneScratch scratch;
      for (std::int64_t x = 0; x < n; ++x)
        prune_knn_row(knn.data(), kdeg, x, degree, &cpu[x * degree], scratch);
      prune_gpu(knn, n, kdeg, degree, 0, gpu.data());
      EXPECT_EQ(gpu, cpu) << "degree " << degree;
    }
  }
}

// The lists search (knn_graph_gpu.cu) with every list probed is the exact
// graph, row for row, in every metric (the gathered candidates map back to
// their ids); with fewer probes its rows are still in (distance, id) order,
// nearly all of the exact rows, and the same on a second run.
TEST(GraphGpu, ListsKnnGraph) {
  GKNN_NEED_GPU();
  const std::int64_t n = 6000;
  const int kdeg = 32;
  const Data d = make_data(n, 0, kDim, 6);
  for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    SCOPED_TRACE(int(m));
    const BuildParams p = params(16, m);
    std::vector<std::uint32_t> exact(std::size_t(n) * kdeg, kNoNode), all(exact), some(exact), again(exact);
    knn_exact_gpu(d.base.data(), n, kdeg, p, 0, {}, exact);
    knn_lists_gpu(d.base.data(), n, kdeg, p, 0, {}, all, 7, 7);
    EXPECT_EQ(all, exact);
    knn_lists_gpu(d.base.data(), n, kdeg, p, 0, {}, some, 40, 8);
    knn_lists_gpu(d.base.data(), n, kdeg, p, 0, {}, again, 40, 8);
    EXPECT_EQ(some, again);
    std::int64_t found = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t* r = &some[i * kdeg];
      const std::uint32_t* e = &exact[i * kdeg];
      for (int j = 1; j < kdeg && r[j] != kNoNode; ++j) {
        const double a = distance(m, &d.base[r[j - 1] * kDim], &d.base[i * kDim], kDim);
        const double b = distance(m, &d.base[r[j] * kDim], &d.base[i * kDim], kDim);
        ASSERT_TRUE(score_less(canonical_score(a), r[j - 1], canonical_score(b), r[j])) << i;
      }
      for (int j = 0; j < kdeg; ++j) found += std::find(r, r + kdeg, e[j]) != r + kdeg;
    }
    EXPECT_GE(double(found) / double(n * kdeg), 0.9);
  }
  // One list: every node's candidates are every node.
  std::vector<std::uint32_t> exact(std::size_t(n) * kdeg, kNoNode), one(exact);
  knn_exact_gpu(d.base.data(), n, kdeg, params(16), 0, {}, exact);
  knn_lists_gpu(d.base.data(), n, kdeg, params(16), 0, {}, one, 1, 1);
  EXPECT_EQ(one, exact);
}

// The lists search over awkward data: 3,000 rows of only 20 distinct
// vectors (ties everywhere, lists left empty by the k-means) with every
// list probed is the exact graph (ties by id in both); lists of fewer nodes
// than k with one probe give rows cut short, kNoNode only at the end; cosine
// rows of very different norms are clustered by direction (>= 90 % of the
// exact rows); progress comes from the calling thread only, and a cancel
// from it ends the search with Error(Cancelled).
TEST(GraphGpu, ListsKnnGraphAwkwardInputs) {
  GKNN_NEED_GPU();
  const std::int64_t n = 3000;
  const int kdeg = 32;
  const Data d = make_data(20, 0, kDim, 9);
  std::vector<float> dup(std::size_t(n) * kDim);
  for (std::int64_t i = 0; i < n; ++i) std::copy_n(&d.base[(i % 20) * kDim], kDim, &dup[i * kDim]);
  std::vector<std::uint32_t> exact(std::size_t(n) * kdeg, kNoNode), all(exact), thin(exact);
  knn_exact_gpu(dup.data(), n, kdeg, params(16), 0, {}, exact);
  knn_lists_gpu(dup.data(), n, kdeg, params(16), 0, {}, all, 50, 50);
  EXPECT_EQ(all, exact);

  const Data c = make_data(n, 0, kDim, 10);
  knn_lists_gpu(c.base.data(), n, kdeg, params(16), 0, {}, thin, 600, 1);
  for (std::int64_t i = 0; i < n; ++i)
    for (int j = 1; j < kdeg; ++j)
      ASSERT_FALSE(thin[i * kdeg + j - 1] == kNoNode && thin[i * kdeg + j] != kNoNode) << i;

  std::vector<float> scaled = c.base;
  for (std::int64_t i = 0; i < n; ++i)
    for (int j = 0; j < kDim; ++j) scaled[i * kDim + j] *= float(1 + (i * 7919) % 97);
  std::vector<std::uint32_t> cexact(exact.size(), kNoNode), clists(exact.size(), kNoNode);
  knn_exact_gpu(scaled.data(), n, kdeg, params(16, Metric::Cosine), 0, {}, cexact);
  knn_lists_gpu(scaled.data(), n, kdeg, params(16, Metric::Cosine), 0, {}, clists, 40, 8);
  std::int64_t found = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t* row = &clists[i * kdeg];
    for (int j = 0; j < kdeg; ++j) found += std::find(row, row + kdeg, cexact[i * kdeg + j]) != row + kdeg;
  }
  EXPECT_GE(double(found) / double(n * kdeg), 0.9);

  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  bool elsewhere = false;
  std::vector<std::uint32_t> cancelled(exact.size(), kNoNode);
  const Progress stop_at_five = [&](const char*, std::int64_t, std::int64_t) {
    elsewhere |= std::this_thread::get_id() != caller;
    return ++calls < 5;
  };
  try {
    knn_lists_gpu(c.base.data(), n, kdeg, params(16), 0, stop_at_five, cancelled, 200, 4);
    ADD_FAILURE() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
  EXPECT_FALSE(elsewhere);
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace gknn::graph
