#include "report.h"

#include <cstdio>
#include <sstream>

namespace gknn_loadgen {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {
std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}
}  // namespace

std::string to_json(const Options& o, const RunResult& r) {
  std::ostringstream j;
  j << "{\"label\": " << json_string(o.label) << ", \"sql\": " << json_string(query_sql(o))
    << ", \"k\": " << o.k << ", \"clients\": " << o.clients << ", \"settings\": {";
  for (std::size_t i = 0; i < o.settings.size(); ++i)
    j << (i ? ", " : "") << json_string(o.settings[i].first) << ": " << json_string(o.settings[i].second);
  j << "}, \"queries\": " << r.queries << ", \"distinct_queries\": " << r.distinct_queries
    << ", \"errors\": " << r.errors << ", \"first_error\": " << json_string(r.first_error)
    << ", \"elapsed_s\": " << num(r.elapsed_s) << ", \"qps\": " << num(r.qps)
    << ", \"latency_ms\": {\"mean\": " << num(r.latency.mean_ms) << ", \"p50\": " << num(r.latency.p50_ms)
    << ", \"p95\": " << num(r.latency.p95_ms) << ", \"p99\": " << num(r.latency.p99_ms)
    << ", \"max\": " << num(r.latency.max_ms) << "}, \"recall\": ";
  if (r.has_recall)
    j << "{\"at_k\": " << o.k << ", \"mean\": " << num(r.recall_mean) << ", \"min\": " << num(r.recall_min)
      << "}";
  else
    j << "null";
  j << "}";
  return j.str();
}

std::string to_table(const Options& o, const RunResult& r) {
  char row[256];
  std::string recall = r.has_recall ? num(r.recall_mean) : "-";
  std::snprintf(row, sizeof row, "%-40s %7d %9lld %10.1f %9.2f %9.2f %9.2f %9s %6lld\n",
                o.label.empty() ? "-" : o.label.c_str(), o.clients, static_cast<long long>(r.queries), r.qps,
                r.latency.p50_ms, r.latency.p95_ms, r.latency.p99_ms, recall.c_str(),
                static_cast<long long>(r.errors));
  char recall_head[16];
  std::snprintf(recall_head, sizeof recall_head, "recall@%d", o.k);
  char head[256];
  std::snprintf(head, sizeof head, "%-40s %7s %9s %10s %9s %9s %9s %9s %6s\n", "label", "clients", "queries",
                "QPS", "p50 ms", "p95 ms", "p99 ms", recall_head, "errors");
  return std::string(head) + row;
}

}  // namespace gknn_loadgen
