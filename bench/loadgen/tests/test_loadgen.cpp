// Unit tests of gknn-loadgen's measurements and command line: no server needed.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "../metrics.h"
#include "../options.h"
#include "../report.h"

namespace gknn_loadgen {
namespace {

// Ground truth for one query: ids 10, 11, ... at distances 1, 2, 3, ...
struct Truth {
  std::vector<std::int32_t> ids;
  std::vector<float> dist;
  explicit Truth(std::vector<float> d) : dist(std::move(d)) {
    for (std::size_t i = 0; i < dist.size(); ++i) ids.push_back(static_cast<std::int32_t>(10 + i));
  }
  double recall(const std::vector<std::int64_t>& result, int k) const {
    return recall_at_k(result, ids.data(), dist.data(), static_cast<int>(ids.size()), k);
  }
};

TEST(Recall, ExactResultInAnyOrderIsOne) {
  Truth t({1, 2, 3, 4, 5, 6});
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 12}, 3), 1.0);
  EXPECT_DOUBLE_EQ(t.recall({12, 10, 11}, 3), 1.0);
}

TEST(Recall, CountsOnlyTrueTopK) {
  Truth t({1, 2, 3, 4, 5, 6});
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 13}, 3), 2.0 / 3);  // 13 is the 4th neighbour
  EXPECT_DOUBLE_EQ(t.recall({99, 98, 97}, 3), 0.0);
}

TEST(Recall, ShortResultAndDuplicatesAreMisses) {
  Truth t({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(t.recall({10}, 2), 0.5);
  EXPECT_DOUBLE_EQ(t.recall({10, 10}, 2), 0.5);
  EXPECT_DOUBLE_EQ(t.recall({}, 2), 0.0);
}

TEST(Recall, TieAtKthPlaceMayBeBrokenEitherWay) {
  // 3rd, 4th and 5th neighbours are equally far: any of them completes the top 3.
  Truth t({1, 2, 3, 3, 3, 4});
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 14}, 3), 1.0);
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 13}, 3), 1.0);
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 15}, 3), 2.0 / 3);  // distance 4: a miss
  // Ties inside the top k do not let extra rows count twice.
  EXPECT_DOUBLE_EQ(t.recall({10, 11, 12, 13, 14}, 3), 1.0);
}

TEST(Recall, NanDistancesFallBackToPositions) {
  Truth t({NAN, NAN, NAN});
  EXPECT_DOUBLE_EQ(t.recall({10, 11}, 2), 1.0);
  EXPECT_DOUBLE_EQ(t.recall({12}, 2), 0.0);
}

TEST(Recall, KLargerThanTruthIsClamped) {
  Truth t({1, 2});
  EXPECT_DOUBLE_EQ(t.recall({10, 11}, 5), 1.0);
}

TEST(Percentile, NearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 50);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 95);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 99);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 100);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 50), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Percentile, SummaryOfUnsortedLatencies) {
  const LatencySummary s = summarize_latencies({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 3);
  EXPECT_DOUBLE_EQ(s.p50_ms, 3);
  EXPECT_DOUBLE_EQ(s.p99_ms, 5);
  EXPECT_DOUBLE_EQ(s.max_ms, 5);
  EXPECT_EQ(summarize_latencies({}).count, 0);
}

Options parse(std::vector<const char*> args, bool* help = nullptr) {
  args.insert(args.begin(), "gknn-loadgen");
  bool h = false;
  Options o = parse_args(static_cast<int>(args.size()), args.data(), &h);
  if (help) *help = h;
  return o;
}

TEST(Args, Defaults) {
  const Options o = parse({"--queries", "q.fvecs"});
  EXPECT_EQ(o.clients, 1);
  EXPECT_EQ(o.k, 10);
  EXPECT_DOUBLE_EQ(o.duration_s, 10);
  EXPECT_EQ(o.count, 0);
  EXPECT_EQ(query_sql(o), "SELECT id FROM items ORDER BY emb <-> $1 LIMIT 10");
  EXPECT_EQ(conninfo(o), "application_name=gknn-loadgen");
}

TEST(Args, AllFlagsBothSpellings) {
  const Options o = parse({"--queries=q.fvecs",
                           "--gt",
                           "g.ivecs",
                           "--gt-dist",
                           "d.fvecs",
                           "--clients",
                           "8",
                           "--count=500",
                           "--k",
                           "100",
                           "--table",
                           "glove",
                           "--op",
                           "<=>",
                           "--set",
                           "ivfflat.probes=4",
                           "--set",
                           "jit=off",
                           "--host",
                           "/tmp/sock",
                           "--port",
                           "5433",
                           "--dbname",
                           "bench",
                           "--user",
                           "o'neil",
                           "--label",
                           "hnsw",
                           "--quiet"});
  EXPECT_EQ(o.clients, 8);
  EXPECT_EQ(o.count, 500);
  EXPECT_TRUE(o.quiet);
  ASSERT_EQ(o.settings.size(), 2u);
  EXPECT_EQ(o.settings[0].first, "ivfflat.probes");
  EXPECT_EQ(o.settings[0].second, "4");
  EXPECT_EQ(query_sql(o), "SELECT id FROM glove ORDER BY emb <=> $1 LIMIT 100");
  EXPECT_EQ(conninfo(o),
            "host='/tmp/sock' port='5433' dbname='bench' user='o\\'neil' application_name=gknn-loadgen");
}

TEST(Args, CustomSql) {
  const Options o =
      parse({"--queries", "q", "--sql", "SELECT id FROM t WHERE c = 3 ORDER BY e <-> $1 LIMIT 5"});
  EXPECT_EQ(query_sql(o), "SELECT id FROM t WHERE c = 3 ORDER BY e <-> $1 LIMIT 5");
}

TEST(Args, Help) {
  bool help = false;
  parse({"--help"}, &help);
  EXPECT_TRUE(help);
}

TEST(Args, Rejected) {
  EXPECT_THROW(parse({}), std::invalid_argument);                                       // no --queries
  EXPECT_THROW(parse({"--queries", "q", "--bogus", "1"}), std::invalid_argument);       // unknown
  EXPECT_THROW(parse({"--queries", "q", "--clients", "0"}), std::invalid_argument);     // < 1
  EXPECT_THROW(parse({"--queries", "q", "--clients", "4x"}), std::invalid_argument);    // not a number
  EXPECT_THROW(parse({"--queries", "q", "--duration", "-1"}), std::invalid_argument);   // negative
  EXPECT_THROW(parse({"--queries", "q", "--set", "novalue"}), std::invalid_argument);   // NAME=VALUE
  EXPECT_THROW(parse({"--queries", "q", "--gt", "g.ivecs"}), std::invalid_argument);    // no --gt-dist
  EXPECT_THROW(parse({"--queries", "q", "--sql", "SELECT 1"}), std::invalid_argument);  // no $1
  EXPECT_THROW(parse({"--queries"}), std::invalid_argument);                            // missing value
  EXPECT_THROW(parse({"--queries", "q", "--duration", "0"}), std::invalid_argument);    // nothing to run
}

TEST(Report, JsonAndTable) {
  Options o = parse({"--queries", "q", "--label", "a\"b", "--set", "x=1"});
  RunResult r;
  r.queries = 10;
  r.qps = 5;
  r.has_recall = true;
  r.recall_mean = 0.5;
  r.recall_min = 0.25;
  const std::string j = to_json(o, r);
  EXPECT_NE(j.find("\"label\": \"a\\\"b\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"settings\": {\"x\": \"1\"}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"recall\": {\"at_k\": 10, \"mean\": 0.5, \"min\": 0.25}"), std::string::npos) << j;
  EXPECT_NE(to_table(o, r).find("recall@10"), std::string::npos);
  r.has_recall = false;
  EXPECT_NE(to_json(o, r).find("\"recall\": null"), std::string::npos);
  EXPECT_EQ(json_string("a\nb\\"), "\"a\\u000ab\\\\\"");
}

}  // namespace
}  // namespace gknn_loadgen
