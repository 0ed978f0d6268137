// CpuGraphServer (gknn/graph.h): GraphServer's ring protocol served on the
// CPU. Requests written by hand as RingLayout says are answered as
// search_cpu answers them (rows mapped through row_ids) or refused
// unsearched as the kernel refuses them; every slot of a ring at once.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "gknn/graph.h"
#include "tests/graph_data.h"
#include "tests/graph_ring.h"

namespace gknn::graph {
namespace {

constexpr int kDim = 24;

using test::Ring;

struct Fixture {
  std::int64_t n;
  std::vector<float> base, queries;
  Graph g;
  std::vector<std::int64_t> row_ids;
  Fixture(std::int64_t rows, std::int64_t nq, Metric m) : n(rows) {
    const std::vector<float> all = test::clustered(rows + nq, kDim, 50, 0.35f, 9);
    base.assign(all.begin(), all.begin() + rows * kDim);
    queries.assign(all.begin() + rows * kDim, all.end());
    BuildParams p;
    p.dim = kDim;
    p.metric = m;
    p.degree = 24;
    p.seed = 42;
    g = build_cpu(base.data(), rows, p);
    row_ids.resize(std::size_t(rows));
    for (std::int64_t i = 0; i < rows; ++i) row_ids[std::size_t(i)] = 1000000 + 7 * i;
  }
};

TEST(GraphServeCpu, AnswersAsSearchCpuAndRefusesAsTheKernel) {
  for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    SCOPED_TRACE(int(m));
    const Fixture f(2000, 100, m);
    const Ring ring(8, 32, 16, 5, f.row_ids.data());
    SearchParams sp;
    sp.k = 16;
    sp.seed = 3;
    CpuGraphServer srv(f.g, f.base.data(), kDim, m, ring.spec, sp);
    SearchParams c = sp;
    c.ef = 20;
    c.k = 10;
    std::vector<std::int64_t> ci(100 * 10);
    std::vector<double> cd(ci.size());
    search_cpu(f.g, f.base.data(), kDim, m, f.queries.data(), 100, c, ci.data(), cd.data());
    const test::RingTally t = test::ask_with_refusals(ring, srv, f.queries.data(), 100, kDim, ci.data(),
                                                      cd.data(), f.row_ids.data());
    EXPECT_EQ(t.unanswered, 0);
    EXPECT_EQ(t.wrong_status, 0);
    EXPECT_EQ(t.refused, 50);
    EXPECT_EQ(t.differ, 0);
  }
}

// The GPU service's ring: 64 slots, a request in every one at once from its
// own thread, several rounds: every answer search_cpu's.
TEST(GraphServeCpu, EverySlotAtOnce) {
  const Fixture f(3000, 256, Metric::L2);
  const Ring ring(64, kDim, 10, 1, f.row_ids.data());
  SearchParams sp;
  sp.k = 10;
  sp.seed = 3;
  CpuGraphServer srv(f.g, f.base.data(), kDim, Metric::L2, ring.spec, sp);
  SearchParams c = sp;
  c.ef = 16;
  std::vector<std::int64_t> ci(256 * 10);
  std::vector<double> cd(ci.size());
  search_cpu(f.g, f.base.data(), kDim, Metric::L2, f.queries.data(), 256, c, ci.data(), cd.data());
  std::vector<int> bad(64, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < 64; ++t)
    pool.emplace_back([&, t] {
      for (int q = t; q < 256; q += 64) {
        if (ring.request(srv, t, f.queries.data() + q * kDim, kDim, 16, 10, 1) != 0) {
          ++bad[std::size_t(t)];
          continue;
        }
        for (int i = 0; i < 10; ++i) {
          const std::int64_t node = ci[std::size_t(q * 10 + i)];
          bad[std::size_t(t)] += ring.id(t, i) != (node < 0 ? -1 : f.row_ids[std::size_t(node)]);
        }
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(bad[std::size_t(t)], 0) << t;
}

TEST(GraphServeCpu, RefusesRingsItCannotServe) {
  const Fixture f(500, 1, Metric::L2);
  SearchParams sp;
  sp.k = 10;
  const Ring narrow(4, kDim - 1, 10, 1, nullptr);  // slots too small for the queries
  EXPECT_THROW(CpuGraphServer(f.g, f.base.data(), kDim, Metric::L2, narrow.spec, sp), Error);
  const Ring wide(RingLayout::kMaxRingSlots + 1, kDim, 10, 1, nullptr);
  EXPECT_THROW(CpuGraphServer(f.g, f.base.data(), kDim, Metric::L2, wide.spec, sp), Error);
}

}  // namespace
}  // namespace gknn::graph
