// The graph's CPU build and search (gknn/graph.h): recall against exact
// search on clustered data, determinism, awkward sizes, cancellation, and
// recall after inserts and after deletions repaired.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "gknn/graph.h"
#include "tests/graph_data.h"

namespace gknn::graph {
namespace {

using test::clustered;
using test::graph_recall;

constexpr int kDim = 24;

struct Data {
  std::vector<float> base, queries;
};

// n base rows and nq queries from one clustered distribution.
Data make_data(std::int64_t n, std::int64_t nq, int dim, unsigned seed) {
  std::vector<float> all = clustered(n + nq, dim, 50, 0.35f, seed);
  Data d;
  d.base.assign(all.begin(), all.begin() + n * dim);
  d.queries.assign(all.begin() + n * dim, all.end());
  return d;
}

BuildParams params(int degree, Metric metric = Metric::L2, int dim = kDim) {
  BuildParams p;
  p.dim = dim;
  p.metric = metric;
  p.degree = degree;
  p.seed = 42;
  return p;
}

TEST(GraphBuildCpu, ReachesRecallFloorsOnClusteredData) {
  const Data d = make_data(3000, 200, kDim, 1);
  for (Metric m : {Metric::L2, Metric::InnerProduct, Metric::Cosine}) {
    const Graph g = build_cpu(d.base.data(), 3000, params(24, m));
    validate(g);
    check_row_order(g, d.base.data(), kDim, m);
    const double r64 = graph_recall(g, d.base, d.queries, kDim, m, 10, 64);
    const double r16 = graph_recall(g, d.base, d.queries, kDim, m, 10, 16);
    SCOPED_TRACE(int(m));
    EXPECT_GE(r64, 0.97);
    EXPECT_GE(r64, r16);
  }
}

TEST(GraphBuildCpu, ApproximateKnnPathAboveTheExactLimit) {
  // Just past kExactKnnMaxN (the IVF-PQ kNN graph), in 8 dimensions: the
  // CPU IVF-PQ search of every node is this file's costliest step (CI runs
  // it under AddressSanitizer too).
  const std::int64_t n = 20000 + 500;
  constexpr int dim = 8;
  const Data d = make_data(n, 200, dim, 2);
  const Graph g = build_cpu(d.base.data(), n, params(16, Metric::L2, dim));
  validate(g);
  check_row_order(g, d.base.data(), dim, Metric::L2);
  EXPECT_GE(graph_recall(g, d.base, d.queries, dim, Metric::L2, 10, 64), 0.95);
}

TEST(GraphBuildCpu, SameSeedSameGraph) {
  const Data d = make_data(3000, 0, kDim, 3);
  const Graph a = build_cpu(d.base.data(), 3000, params(16));
  const Graph b = build_cpu(d.base.data(), 3000, params(16));
  EXPECT_EQ(a.edges, b.edges);
}

TEST(GraphBuildCpu, AwkwardSizes) {
  const int degree = 8;
  for (std::int64_t n : {0, 1, 2, degree - 1, degree, degree + 1, 3 * degree}) {
    SCOPED_TRACE(n);
    const Data d = make_data(n, 5, kDim, 4);
    const Graph g = build_cpu(d.base.data(), n, params(degree));
    validate(g);
    EXPECT_EQ(g.n, n);
    for (std::int64_t i = 0; i < n; ++i) {  // every other node is an edge while they fit
      int used = 0;
      while (used < degree && g.row(i)[used] != kNoNode) ++used;
      EXPECT_EQ(used, std::min<std::int64_t>(degree, n - 1));
    }
    std::vector<std::int64_t> ids(5 * 10);
    std::vector<double> dist(5 * 10);
    SearchParams sp;
    search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 5, sp, ids.data(), dist.data());
    for (int q = 0; q < 5; ++q)
      for (int j = 0; j < 10; ++j) {
        if (j < std::min<std::int64_t>(n, 10)) {  // small graphs are searched exhaustively
          EXPECT_GE(ids[q * 10 + j], 0);
        } else {
          EXPECT_EQ(ids[q * 10 + j], -1);
          EXPECT_TRUE(std::isnan(dist[q * 10 + j]));
        }
      }
  }
}

TEST(GraphBuildCpu, DuplicatesAndZeroVectorsUnderCosine) {
  const int n = 300;
  std::vector<float> x = clustered(n, kDim, 5, 0.2f, 5);
  for (int i = 0; i < 100; ++i) std::memcpy(&x[i * kDim], &x[0], kDim * sizeof(float));  // duplicates
  for (int i = 100; i < 120; ++i) std::fill(x.begin() + i * kDim, x.begin() + (i + 1) * kDim, 0.0f);
  const Graph g = build_cpu(x.data(), n, params(8, Metric::Cosine));
  validate(g);
  check_row_order(g, x.data(), kDim, Metric::Cosine);
  std::vector<std::int64_t> ids(20);
  std::vector<double> dist(20);
  SearchParams sp;
  sp.k = 20;
  search_cpu(g, x.data(), kDim, Metric::Cosine, x.data(), 1, sp, ids.data(), dist.data());
  for (int j = 0; j < 20; ++j) {
    EXPECT_LT(ids[j], 100);  // the duplicates of row 0 first, distance ~0, by id
    if (j) {
      EXPECT_LT(ids[j - 1], ids[j]);
    }
  }
  // A zero query: every distance NaN, still k rows, by id.
  std::vector<float> zero(kDim, 0.0f);
  search_cpu(g, x.data(), kDim, Metric::Cosine, zero.data(), 1, sp, ids.data(), dist.data());
  for (int j = 0; j < 20; ++j) {
    EXPECT_GE(ids[j], 0);
    EXPECT_TRUE(std::isnan(dist[j]));
  }
}

TEST(GraphBuildCpu, ProgressPhasesAndCancellation) {
  const Data d = make_data(2000, 0, kDim, 6);
  std::vector<std::string> phases;
  build_cpu(d.base.data(), 2000, params(16), [&](const char* phase, std::int64_t done, std::int64_t total) {
    EXPECT_LE(done, total);
    if (phases.empty() || phases.back() != phase) phases.push_back(phase);
    return true;
  });
  EXPECT_EQ(phases, (std::vector<std::string>{kPhaseKnn, kPhasePrune, kPhaseReverse, kPhaseConnect}));
  for (const char* stop_in : {kPhaseKnn, kPhasePrune, kPhaseReverse, kPhaseConnect}) {
    try {
      build_cpu(d.base.data(), 2000, params(16), [&](const char* phase, std::int64_t, std::int64_t) {
        return std::strcmp(phase, stop_in) != 0;
      });
      ADD_FAILURE() << "not cancelled in " << stop_in;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Cancelled);
    }
  }
}

TEST(GraphBuildCpu, RejectsBadParams) {
  const float x[kDim] = {};
  for (int degree : {0, 1, 3, 130}) EXPECT_THROW(build_cpu(x, 1, params(degree)), Error);
  BuildParams p = params(16);
  p.intermediate_degree = 8;  // below degree
  EXPECT_THROW(build_cpu(x, 1, p), Error);
  p = params(16, Metric::L1);
  EXPECT_THROW(build_cpu(x, 1, p), Error);
  EXPECT_THROW(build_cpu(nullptr, 5, params(16)), Error);
}

TEST(GraphSearchCpu, ExactDistancesOrderAndSkip) {
  const Data d = make_data(2000, 20, kDim, 7);
  const Graph g = build_cpu(d.base.data(), 2000, params(16));
  std::vector<std::uint8_t> skip(2000, 0);
  for (int i = 0; i < 2000; i += 2) skip[i] = 1;  // even ids never returned
  SearchParams sp;
  sp.k = 10;
  sp.ef = 48;
  sp.skip = skip.data();
  std::vector<std::int64_t> ids(20 * 10);
  std::vector<double> dist(20 * 10);
  search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 20, sp, ids.data(), dist.data());
  for (int q = 0; q < 20; ++q)
    for (int j = 0; j < 10; ++j) {
      const std::int64_t id = ids[q * 10 + j];
      ASSERT_GE(id, 0);
      EXPECT_EQ(id % 2, 1);
      const double exact = distance(Metric::L2, d.base.data() + id * kDim, d.queries.data() + q * kDim, kDim);
      EXPECT_EQ(dist[q * 10 + j], exact);  // bit for bit: the SQL operator's value
      if (j) {
        EXPECT_TRUE(score_less(dist[q * 10 + j - 1], ids[q * 10 + j - 1], dist[q * 10 + j], id));
      }
    }
  // ef < k is raised to k.
  sp.skip = nullptr;
  sp.ef = 2;
  search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 1, sp, ids.data(), dist.data());
  for (int j = 0; j < 10; ++j) EXPECT_GE(ids[j], 0);
}

// Several nodes expanded per step: the same recall floors (a wider step
// looks at more nodes, never fewer); widths outside 1..kMaxWidth refused.
TEST(GraphSearchCpu, WiderStepsKeepRecall) {
  const Data d = make_data(3000, 200, kDim, 3);
  const Graph g = build_cpu(d.base.data(), 3000, params(24));
  const double r1 = graph_recall(g, d.base, d.queries, kDim, Metric::L2, 10, 64, 0, 1);
  for (int width : {2, 4, kMaxWidth}) {
    SCOPED_TRACE(width);
    const double r = graph_recall(g, d.base, d.queries, kDim, Metric::L2, 10, 64, 0, width);
    EXPECT_GE(r, 0.97);
    EXPECT_GE(r, r1 - 0.01);
  }
  SearchParams sp;
  std::vector<std::int64_t> ids(10);
  std::vector<double> dist(10);
  for (int width : {0, kMaxWidth + 1}) {
    sp.width = width;
    EXPECT_THROW(
        search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 1, sp, ids.data(), dist.data()),
        Error);
  }
}

TEST(GraphMaintenance, RecallAfterTwentyPercentInserts) {
  const std::int64_t n = 5000, n0 = 4000;
  const Data d = make_data(n, 200, kDim, 8);
  const BuildParams p = params(24);
  const Graph fresh = build_cpu(d.base.data(), n, p);
  Graph g = build_cpu(d.base.data(), n0, p);
  for (std::int64_t x = n0; x < n; ++x) insert_node(g, d.base.data(), kDim, Metric::L2, 64, 9);
  validate(g);
  check_row_order(g, d.base.data(), kDim, Metric::L2);
  const double rf = graph_recall(fresh, d.base, d.queries, kDim, Metric::L2, 10, 64);
  const double ri = graph_recall(g, d.base, d.queries, kDim, Metric::L2, 10, 64);
  EXPECT_GE(ri, rf - 0.02) << "fresh " << rf;
  // Every inserted node is found by a search for its own vector.
  std::vector<std::int64_t> ids(1);
  std::vector<double> dist(1);
  SearchParams sp;
  sp.k = 1;
  int found = 0;
  for (std::int64_t x = n0; x < n; ++x) {
    search_cpu(g, d.base.data(), kDim, Metric::L2, d.base.data() + x * kDim, 1, sp, ids.data(), dist.data());
    found += dist[0] == 0.0;
  }
  EXPECT_GE(found, (n - n0) * 99 / 100);
}

TEST(GraphMaintenance, RecallAfterDeletingAThirdAndRepairing) {
  const std::int64_t n = 6000;
  const Data d = make_data(n, 200, kDim, 10);
  const BuildParams p = params(24);
  Graph g = build_cpu(d.base.data(), n, p);
  std::vector<std::uint8_t> dead(n, 0);
  for (std::int64_t i = 0; i < n; ++i) dead[i] = test::mix_for_test(i) % 3 == 0;
  repair_deleted(g, d.base.data(), kDim, Metric::L2, dead.data());
  validate(g);
  for (std::int64_t i = 0; i < n; ++i)
    for (int s = 0; s < g.degree; ++s) {
      const std::uint32_t y = g.row(i)[s];
      if (y != kNoNode) {
        ASSERT_FALSE(dead[y]) << "row " << i << " still points at a deleted node";
      }
    }
  // Truth: exact search over the live rows, mapped back to node ids.
  std::vector<std::int64_t> live_id;
  for (std::int64_t i = 0; i < n; ++i)
    if (!dead[i]) live_id.push_back(i);
  const std::vector<float> live = test::live_rows(d.base, kDim, dead);
  std::vector<std::int64_t> truth = test::exact_ids(live, d.queries, kDim, 10, Metric::L2);
  for (auto& t : truth) t = live_id[t];
  SearchParams sp;
  sp.k = 10;
  sp.ef = 64;
  sp.skip = dead.data();  // entry points may be deleted nodes: traversed, never returned
  std::vector<std::int64_t> ids(200 * 10);
  std::vector<double> dist(ids.size());
  search_cpu(g, d.base.data(), kDim, Metric::L2, d.queries.data(), 200, sp, ids.data(), dist.data());
  const double repaired = test::recall(truth, ids, 10);
  const Graph fresh = build_cpu(live.data(), std::int64_t(live_id.size()), p);
  const double rf = graph_recall(fresh, live, d.queries, kDim, Metric::L2, 10, 64);
  EXPECT_GE(repaired, rf - 0.03) << "fresh " << rf;
}

}  // namespace
}  // namespace gknn::graph
