#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace gknn_loadgen {
namespace {

const char kUsage[] =
    "usage: gknn-loadgen --queries Q.fvecs [options]\n"
    "server (default: libpq's environment, PGHOST/PGPORT/PGUSER/PGDATABASE):\n"
    "  --host H --port P --dbname D --user U   or  --conninfo 'libpq string'\n"
    "query:\n"
    "  --table T (items) --id-column C (id) --column C (emb) --op OP (<->) --k K (10)\n"
    "  --sql 'SELECT ... $1 ...'   a statement of your own; $1 is the query vector\n"
    "  --set NAME=VALUE            SET on every connection (repeatable)\n"
    "data:\n"
    "  --queries Q.fvecs  --gt G.ivecs --gt-dist D.fvecs (recall@k)  --query-limit N\n"
    "load:\n"
    "  --clients N (1)  --duration S (10) | --count N (total queries)  --warmup S (0)\n"
    "output:\n"
    "  --json PATH  --label TEXT  --quiet\n";

long long to_int(const std::string& flag, const std::string& v, long long lo) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < lo)
    throw std::invalid_argument(flag + ": expected an integer >= " + std::to_string(lo) + ", got '" + v +
                                "'");
  return x;
}

double to_seconds(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= 0))
    throw std::invalid_argument(flag + ": expected seconds >= 0, got '" + v + "'");
  return x;
}

std::pair<std::string, std::string> to_setting(const std::string& v) {
  const auto eq = v.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::invalid_argument("--set: expected NAME=VALUE, got '" + v + "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

// Applies one flag with its value; false when the flag is unknown.
bool apply(Options& o, const std::string& f, const std::string& v) {
  std::string* text[] = {&o.host,         &o.port,      &o.dbname,       &o.user,  &o.conninfo,
                         &o.table,        &o.id_column, &o.column,       &o.op,    &o.sql,
                         &o.queries_path, &o.gt_path,   &o.gt_dist_path, &o.label, &o.json_path};
  const char* names[] = {"--host",    "--port",      "--dbname",  "--user",  "--conninfo",
                         "--table",   "--id-column", "--column",  "--op",    "--sql",
                         "--queries", "--gt",        "--gt-dist", "--label", "--json"};
  for (std::size_t i = 0; i < sizeof names / sizeof *names; ++i)
    if (f == names[i]) return *text[i] = v, true;
  if (f == "--k") return o.k = static_cast<int>(to_int(f, v, 1)), true;
  if (f == "--clients") return o.clients = static_cast<int>(to_int(f, v, 1)), true;
  if (f == "--count") return o.count = to_int(f, v, 1), true;
  if (f == "--query-limit") return o.query_limit = to_int(f, v, 1), true;
  if (f == "--duration") return o.duration_s = to_seconds(f, v), true;
  if (f == "--warmup") return o.warmup_s = to_seconds(f, v), true;
  if (f == "--set") return o.settings.push_back(to_setting(v)), true;
  return false;
}

void check(const Options& o) {
  if (o.queries_path.empty()) throw std::invalid_argument("--queries is required");
  if (o.gt_path.empty() != o.gt_dist_path.empty())
    throw std::invalid_argument("--gt and --gt-dist go together");
  if (o.count == 0 && o.duration_s <= 0) throw std::invalid_argument("give --duration > 0 or --count");
  if (!o.sql.empty() && o.sql.find("$1") == std::string::npos)
    throw std::invalid_argument("--sql must use $1 (the query vector)");
}

}  // namespace

const char* usage() { return kUsage; }

Options parse_args(int argc, const char* const* argv, bool* help) {
  Options o;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "--help" || flag == "-h") {
      *help = true;
      return o;
    }
    if (flag == "--quiet") {
      o.quiet = true;
      continue;
    }
    const auto eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {  // --flag=value
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw std::invalid_argument(flag + ": missing value");
    }
    if (!apply(o, flag, value)) throw std::invalid_argument("unknown option " + flag);
  }
  check(o);
  return o;
}

std::string query_sql(const Options& o) {
  if (!o.sql.empty()) return o.sql;
  return "SELECT " + o.id_column + " FROM " + o.table + " ORDER BY " + o.column + " " + o.op + " $1 LIMIT " +
         std::to_string(o.k);
}

namespace {
std::string quoted(const std::string& v) {
  std::string q = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') q += '\\';
    q += c;
  }
  return q + "'";
}
}  // namespace

std::string conninfo(const Options& o) {
  std::string s = o.conninfo;
  const std::pair<const char*, const std::string*> parts[] = {
      {"host", &o.host}, {"port", &o.port}, {"dbname", &o.dbname}, {"user", &o.user}};
  for (const auto& [key, value] : parts)
    if (!value->empty()) s += std::string(s.empty() ? "" : " ") + key + "=" + quoted(*value);
  // With no flags libpq takes everything from the environment (PGHOST, ...).
  return (s.empty() ? "" : s + " ") + "application_name=gknn-loadgen";
}

}  // namespace gknn_loadgen
