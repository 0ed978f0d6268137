// The graph's maintenance rules on hand-made lists (gknn/graph.h): the
// ordering of candidates, CAGRA's rank-based prune, the reverse edge of an
// insert, the candidates of a repair.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gknn/graph.h"

namespace gknn::graph {
namespace {

constexpr std::uint32_t N = kNoNode;

TEST(GraphRules, OrderCandidatesSortsDedupsAndDropsOwner) {
  std::uint32_t ids[] = {5, 3, 9, 3, 7, 2, N};
  double d[] = {0.5, 0.2, NAN, 0.1, 0.2, 0.5, 0.0};
  const int m = order_candidates(7, ids, d, 7);
  ASSERT_EQ(m, 4);  // 7 is the owner, N is no node, 3 repeats
  EXPECT_EQ(ids[0], 3u);
  EXPECT_EQ(d[0], 0.1);   // the better of 3's two distances
  EXPECT_EQ(ids[1], 2u);  // ties by id
  EXPECT_EQ(ids[2], 5u);
  EXPECT_EQ(ids[3], 9u);  // NaN last
  EXPECT_TRUE(std::isnan(d[3]));
}

TEST(GraphRules, PruneDropsTheMostDetouredCandidates) {
  // Owner's candidates 10, 11, 12, 13 (ranks 0..3). 10's row reaches 12 at
  // rank 0 and 13 at rank 1; 11's row reaches 13 at rank 0.
  const std::uint32_t cand[] = {10, 11, 12, 13};
  const std::uint32_t rows[] = {12, 13, N, N,  //
                                13, N,  N, N,  //
                                N,  N,  N, N,  //
                                N,  N,  N, N};
  std::uint32_t out[2];
  // Detours: 12 via 10 (max(0,0) < 2): 1; 13 via 10 (max(0,1) < 3) and via
  // 11 (max(1,0) < 3): 2; 10 and 11 none. Keep 10, 11.
  EXPECT_EQ(prune_list(cand, 4, rows, 4, 2, out), 2);
  EXPECT_EQ(out[0], 10u);
  EXPECT_EQ(out[1], 11u);
  std::uint32_t three[4];
  EXPECT_EQ(prune_list(cand, 4, rows, 4, 4, three), 4);  // room for all: rank order
  EXPECT_EQ(std::vector<std::uint32_t>(three, three + 4), (std::vector<std::uint32_t>{10, 11, 12, 13}));
  std::uint32_t pad[6];
  EXPECT_EQ(prune_list(cand, 2, rows, 4, 6, pad), 2);  // fewer candidates than degree: padded
  EXPECT_EQ(pad[2], N);
  EXPECT_EQ(pad[5], N);
}

TEST(GraphRules, PruneIgnoresRanksAtOrBeyondTheTarget) {
  // 10's row holds 12 at rank 3: max(0, 3) >= 2, no detour for 12.
  const std::uint32_t cand[] = {10, 11, 12};
  const std::uint32_t rows[] = {1, 2, 3, 12,  //
                                N, N, N, N,   //
                                N, N, N, N};
  std::uint32_t out[2];
  prune_list(cand, 3, rows, 4, 2, out);
  EXPECT_EQ(out[0], 10u);
  EXPECT_EQ(out[1], 11u);  // 12 has no detour, but 11 (rank 1) comes first
  const std::uint32_t rows2[] = {12, N, N, N, N, N, N, N, N, N, N, N};
  prune_list(cand, 3, rows2, 4, 2, out);
  EXPECT_EQ(out[1], 11u);  // 12 detoured via 10: dropped
  const std::uint32_t rows3[] = {11, N, N, N, N, N, N, N, N, N, N, N};
  prune_list(cand, 3, rows3, 4, 2, out);
  EXPECT_EQ(out[0], 10u);  // 11 detoured via 10 (max(0,0) < 1): 12 kept instead
  EXPECT_EQ(out[1], 12u);
}

TEST(GraphRules, ReverseEdgeFillsAFreeSlotInOrder) {
  std::uint32_t row[4] = {1, 2, N, N};
  double rd[4] = {0.1, 0.3, 0, 0};
  EXPECT_TRUE(add_reverse_edge(row, rd, 4, 0, 7, 0.2, nullptr, 0));
  EXPECT_EQ(row[1], 7u);
  EXPECT_EQ(row[2], 2u);
  EXPECT_EQ(rd[1], 0.2);
  EXPECT_FALSE(add_reverse_edge(row, rd, 4, 0, 7, 0.2, nullptr, 0));  // already there
  EXPECT_FALSE(add_reverse_edge(row, rd, 4, 0, 0, 0.0, nullptr, 0));  // the owner itself
  EXPECT_TRUE(add_reverse_edge(row, rd, 4, 0, 8, 0.3, nullptr, 0));   // tie with 2 at 0.3: by id
  EXPECT_EQ(row[3], 8u);
}

TEST(GraphRules, ReverseEdgeIntoAFullRowReplacesWhatItDetours) {
  std::uint32_t row[4] = {1, 2, 3, 4};
  double rd[4] = {0.1, 0.2, 0.3, 0.4};
  const std::uint32_t xrow_none[] = {9, N};
  // Full, nothing detoured, no force: unchanged.
  EXPECT_FALSE(add_reverse_edge(row, rd, 4, 0, 7, 0.15, xrow_none, 2));
  // x reaches 3 and 1: the farthest detoured entry farther than x (3) goes.
  const std::uint32_t xrow[] = {1, 3, N, N};
  EXPECT_TRUE(add_reverse_edge(row, rd, 4, 0, 7, 0.15, xrow, 4));
  EXPECT_EQ(std::vector<std::uint32_t>(row, row + 4), (std::vector<std::uint32_t>{1, 7, 2, 4}));
  // Forced: the farthest entry goes even when x is farther than everything.
  EXPECT_TRUE(add_reverse_edge(row, rd, 4, 0, 8, 0.9, xrow_none, 2, true));
  EXPECT_EQ(std::vector<std::uint32_t>(row, row + 4), (std::vector<std::uint32_t>{1, 7, 2, 8}));
  EXPECT_EQ(rd[3], 0.9);
}

TEST(GraphRules, RepairCandidatesReachThroughDeletedNeighbours) {
  const int d = 2;
  const std::uint32_t row[] = {1, 2};          // 2 is deleted
  const std::uint32_t rows_of_row[] = {0, 5,   // row of 1: the owner, 5
                                       6, 1};  // row of 2: 6, 1
  std::set<std::uint32_t> dead{2};
  auto deleted = [&](std::uint32_t id) { return dead.count(id) > 0; };
  auto c = repair_candidates(0, row, d, rows_of_row, deleted);
  // live entries (1), deleted entries' rows (6; 1 again), then (fewer than
  // 2 * degree) the live entries' rows (the owner no, 5).
  EXPECT_EQ(c, (std::vector<std::uint32_t>{1, 6, 5}));
  dead = {2, 6};
  c = repair_candidates(0, row, d, rows_of_row, deleted);
  EXPECT_EQ(c, (std::vector<std::uint32_t>{1, 5}));  // too few: live entries' rows too
  dead = {};
  c = repair_candidates(0, row, d, rows_of_row, deleted);
  EXPECT_EQ(c, (std::vector<std::uint32_t>{1, 2}));  // nothing deleted: the row
}

}  // namespace
}  // namespace gknn::graph
