// gknn-loadgen's results: one run's numbers, as JSON and as a table.
#pragma once

#include <cstdint>
#include <string>

#include "metrics.h"
#include "options.h"

namespace gknn_loadgen {

struct RunResult {
  std::int64_t queries = 0;  // completed in the measured window
  std::int64_t errors = 0;
  std::string first_error;
  double elapsed_s = 0;
  double qps = 0;
  LatencySummary latency;
  bool has_recall = false;
  double recall_mean = 0, recall_min = 0;
  std::int64_t distinct_queries = 0;  // query vectors available
};

// One JSON object (no trailing newline).
std::string to_json(const Options& o, const RunResult& r);
// A short human table: a header line and one row.
std::string to_table(const Options& o, const RunResult& r);
// JSON string literal of s, quotes included.
std::string json_string(const std::string& s);

}  // namespace gknn_loadgen
