// Command line of gknn-loadgen.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gknn_loadgen {

struct Options {
  // Server: empty values leave libpq to its defaults (PGHOST, PGPORT, ...).
  std::string host, port, dbname, user, conninfo;
  // The query: SELECT <id> FROM <table> ORDER BY <column> <op> $1 LIMIT <k>,
  // or a whole statement given with --sql (with $1 the query vector, binary).
  std::string table = "items", id_column = "id", column = "emb", op = "<->", sql;
  int k = 10;
  // Data: query vectors (fvecs) and, for recall, ground truth ids (ivecs)
  // and distances (fvecs) of the same queries.
  std::string queries_path, gt_path, gt_dist_path;
  std::int64_t query_limit = -1;  // use only the first N queries
  // Load: clients, and either a duration or a query count (count wins).
  int clients = 1;
  double duration_s = 10;
  std::int64_t count = 0;
  double warmup_s = 0;                                        // per client, before measuring, not reported
  std::vector<std::pair<std::string, std::string>> settings;  // SET name = value on every connection
  std::string label, json_path;
  bool quiet = false;
};

// Parses argv (argv[0] is skipped). Throws std::invalid_argument with a
// message for an unknown flag, a missing or malformed value, or an
// inconsistent combination. Sets *help when --help was given.
Options parse_args(int argc, const char* const* argv, bool* help);

const char* usage();

// The statement the clients prepare.
std::string query_sql(const Options& o);

// libpq's conninfo string for the server flags (values quoted for libpq).
std::string conninfo(const Options& o);

}  // namespace gknn_loadgen
