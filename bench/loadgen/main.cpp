// gknn-loadgen: N concurrent libpq clients run one prepared kNN statement
// with query vectors from an fvecs file, for a fixed time or query count,
// and report QPS, latency percentiles and recall@k against ground truth.
// Works against any PostgreSQL server with a pgvector-compatible `vector`
// type (gknn or pgvector): the query vector travels in the binary format
// both share.
#include <libpq-fe.h>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "../common/vecfile.h"
#include "metrics.h"
#include "options.h"
#include "report.h"

namespace gknn_loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using gknn_bench::FloatMatrix;
using gknn_bench::IntMatrix;

struct Workload {
  std::vector<std::string> params;  // each query in the vector type's binary format
  FloatMatrix queries, gt_dist;
  IntMatrix gt;
  bool has_gt = false;
};

// pgvector's binary format (vector_recv): int16 dim, int16 unused, float4s,
// all in network byte order.
std::string vector_binary(const float* v, int dim) {
  std::string out(4 + 4 * static_cast<std::size_t>(dim), '\0');
  const std::uint16_t head[2] = {htons(static_cast<std::uint16_t>(dim)), 0};
  std::memcpy(out.data(), head, sizeof head);
  for (int i = 0; i < dim; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    bits = htonl(bits);
    std::memcpy(out.data() + 4 + 4 * i, &bits, 4);
  }
  return out;
}

Workload load_workload(const Options& o) {
  Workload w;
  w.queries = gknn_bench::read_fvecs(o.queries_path, o.query_limit);
  for (std::int64_t i = 0; i < w.queries.rows; ++i)
    w.params.push_back(vector_binary(w.queries.row(i), w.queries.dim));
  if (!o.gt_path.empty()) {
    w.gt = gknn_bench::read_ivecs(o.gt_path, w.queries.rows);
    w.gt_dist = gknn_bench::read_fvecs(o.gt_dist_path, w.queries.rows);
    if (w.gt.rows < w.queries.rows || w.gt_dist.rows < w.queries.rows || w.gt.dim != w.gt_dist.dim)
      throw std::runtime_error("ground truth does not cover every query (or ids and distances disagree)");
    if (w.gt.dim < o.k) throw std::runtime_error("ground truth has fewer than k neighbours per query");
    w.has_gt = true;
  }
  if (w.queries.rows == 0) throw std::runtime_error(o.queries_path + ": no queries");
  return w;
}

// All clients start measuring together, once every one has connected,
// prepared and warmed up.
class StartLine {
 public:
  explicit StartLine(int parties) : waiting_(parties) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--waiting_ == 0) {
      start_ = Clock::now();
      cv_.notify_all();
    } else {
      cv_.wait(lock, [this] { return waiting_ == 0; });
    }
  }
  Clock::time_point start() const { return start_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_;
  Clock::time_point start_;
};

struct Shared {
  const Options* opts;
  const Workload* work;
  std::atomic<std::int64_t> next{0};    // next measured query number (cycles over the vectors)
  std::atomic<std::int64_t> warmed{0};  // the same for warm-up queries
  StartLine start_line;
  Shared(const Options* o, const Workload* w) : opts(o), work(w), start_line(o->clients) {}
};

struct ClientStats {
  std::vector<double> latencies_ms;
  std::vector<double> recalls;
  std::int64_t errors = 0;
  std::string first_error;
  Clock::time_point finished;
  void error(const std::string& e) {
    if (errors++ == 0) first_error = e;
  }
};

// True when r is a success of the expected kind; otherwise records the error.
bool ok(PGresult* r, ExecStatusType expected, ClientStats& stats) {
  const bool good = PQresultStatus(r) == expected;
  if (!good) stats.error(PQresultErrorMessage(r));
  PQclear(r);
  return good;
}

// Connects, applies the settings and prepares the statement; null on failure
// (with the reason in stats).
PGconn* open_client(const Options& o, ClientStats& stats) {
  PGconn* conn = PQconnectdb(conninfo(o).c_str());
  bool good = PQstatus(conn) == CONNECTION_OK;
  if (!good) stats.error(PQerrorMessage(conn));
  for (const auto& [name, value] : o.settings) {
    const char* params[] = {name.c_str(), value.c_str()};
    good = good && ok(PQexecParams(conn, "SELECT pg_catalog.set_config($1, $2, false)", 2, nullptr, params,
                                   nullptr, nullptr, 0),
                      PGRES_TUPLES_OK, stats);
  }
  good = good && ok(PQprepare(conn, "knn", query_sql(o).c_str(), 1, nullptr), PGRES_COMMAND_OK, stats);
  if (good) return conn;
  PQfinish(conn);
  return nullptr;
}

// Runs query number n; returns false on an error (recorded in stats).
bool run_query(PGconn* conn, const Workload& w, std::int64_t n, std::int64_t k, ClientStats& stats,
               bool record) {
  const std::int64_t q = n % w.queries.rows;
  const char* values[] = {w.params[q].data()};
  const int lengths[] = {static_cast<int>(w.params[q].size())};
  const int formats[] = {1};
  const auto t0 = Clock::now();
  PGresult* r = PQexecPrepared(conn, "knn", 1, values, lengths, formats, 0);
  const auto t1 = Clock::now();
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    stats.error(PQresultErrorMessage(r));
    PQclear(r);
    return false;
  }
  if (record) {
    stats.latencies_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (w.has_gt) {
      std::vector<std::int64_t> ids(PQntuples(r));
      for (int i = 0; i < PQntuples(r); ++i) ids[i] = std::strtoll(PQgetvalue(r, i, 0), nullptr, 10);
      stats.recalls.push_back(recall_at_k(ids, w.gt.row(q), w.gt_dist.row(q), w.gt.dim, static_cast<int>(k)));
    }
  }
  PQclear(r);
  return true;
}

void client_main(Shared& s, ClientStats& stats) {
  const Options& o = *s.opts;
  PGconn* conn = open_client(o, stats);
  // Warm-up queries are spread over the vectors too, but not recorded.
  for (auto end = Clock::now() + std::chrono::duration<double>(o.warmup_s); conn && Clock::now() < end;)
    if (!run_query(conn, *s.work, s.warmed++, o.k, stats, false)) break;
  s.start_line.arrive_and_wait();
  const auto deadline = s.start_line.start() + std::chrono::duration<double>(o.duration_s);
  // A client stops at its first error: the run is reported as failed.
  for (bool good = conn != nullptr; good;) {
    const std::int64_t n = s.next++;
    if (o.count ? n >= o.count : Clock::now() >= deadline) break;
    good = run_query(conn, *s.work, n, o.k, stats, true);
  }
  stats.finished = Clock::now();
  if (conn) PQfinish(conn);
}

RunResult merge(const Options& o, const Workload& w, const std::vector<ClientStats>& clients,
                Clock::time_point start) {
  RunResult r;
  std::vector<double> latencies, recalls;
  Clock::time_point end = start;
  for (const ClientStats& c : clients) {
    latencies.insert(latencies.end(), c.latencies_ms.begin(), c.latencies_ms.end());
    recalls.insert(recalls.end(), c.recalls.begin(), c.recalls.end());
    r.errors += c.errors;
    if (r.first_error.empty()) r.first_error = c.first_error;
    end = std::max(end, c.finished);
  }
  r.queries = static_cast<std::int64_t>(latencies.size());
  r.elapsed_s = std::chrono::duration<double>(end - start).count();
  r.qps = r.elapsed_s > 0 ? r.queries / r.elapsed_s : 0;
  r.latency = summarize_latencies(std::move(latencies));
  r.distinct_queries = w.queries.rows;
  r.has_recall = w.has_gt && !recalls.empty();
  if (r.has_recall) {
    double sum = 0;
    for (double x : recalls) sum += x;
    r.recall_mean = sum / recalls.size();
    r.recall_min = *std::min_element(recalls.begin(), recalls.end());
  }
  (void)o;
  return r;
}

int run(const Options& o) {
  const Workload work = load_workload(o);
  Shared shared(&o, &work);
  std::vector<ClientStats> stats(o.clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) threads.emplace_back(client_main, std::ref(shared), std::ref(stats[i]));
  for (auto& t : threads) t.join();
  const RunResult r = merge(o, work, stats, shared.start_line.start());
  if (!o.json_path.empty()) {
    std::ofstream(o.json_path) << to_json(o, r) << "\n";
  }
  if (!o.quiet) std::cout << to_table(o, r);
  if (r.errors) std::cerr << "gknn-loadgen: " << r.errors << " errors; first: " << r.first_error;
  return r.errors ? 2 : 0;
}

}  // namespace
}  // namespace gknn_loadgen

int main(int argc, char** argv) {
  try {
    bool help = false;
    const auto opts = gknn_loadgen::parse_args(argc, argv, &help);
    if (help) {
      std::cout << gknn_loadgen::usage();
      return 0;
    }
    return gknn_loadgen::run(opts);
  } catch (const std::invalid_argument& e) {
    std::cerr << "gknn-loadgen: " << e.what() << "\n" << gknn_loadgen::usage();
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "gknn-loadgen: " << e.what() << "\n";
    return 1;
  }
}
