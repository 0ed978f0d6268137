// gknn-load: an fvecs file into a PostgreSQL table (id int, emb vector) by
// binary COPY, with a progress bar. Row i of the file gets id i, which is
// what the ground truth files refer to. The table must exist; the load is
// one transaction, so an interrupted load leaves nothing behind.
#include <libpq-fe.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "../common/vecfile.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string base, table, columns = "id, emb", conninfo;
  std::int64_t limit = -1;
  bool truncate = false;
};

const char kUsage[] =
    "usage: gknn-load --base B.fvecs --table T [--columns 'id, emb'] [--limit N] [--truncate]\n"
    "         [--conninfo 'libpq string']   (default: PGHOST, PGPORT, PGUSER, PGDATABASE)\n";

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--truncate") {
      a.truncate = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(f + ": missing value");
    const std::string v = argv[++i];
    if (f == "--base")
      a.base = v;
    else if (f == "--table")
      a.table = v;
    else if (f == "--columns")
      a.columns = v;
    else if (f == "--conninfo")
      a.conninfo = v;
    else if (f == "--limit")
      a.limit = std::stoll(v);
    else
      throw std::invalid_argument("unknown option " + f);
  }
  if (a.base.empty() || a.table.empty()) throw std::invalid_argument("--base and --table are required");
  return a;
}

void put_u16(std::string& out, std::uint16_t v) {
  v = htons(v);
  out.append(reinterpret_cast<const char*>(&v), 2);
}
void put_u32(std::string& out, std::uint32_t v) {
  v = htonl(v);
  out.append(reinterpret_cast<const char*>(&v), 4);
}

// One COPY BINARY tuple: (int4 id, vector emb); the vector in pgvector's
// binary format (int16 dim, int16 unused, float4s), which gknn shares.
void append_tuple(std::string& out, std::int32_t id, const float* v, int dim) {
  put_u16(out, 2);
  put_u32(out, 4);
  put_u32(out, static_cast<std::uint32_t>(id));
  put_u32(out, 4 + 4 * static_cast<std::uint32_t>(dim));
  put_u16(out, static_cast<std::uint16_t>(dim));
  put_u16(out, 0);
  for (int i = 0; i < dim; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    put_u32(out, bits);
  }
}

// A progress bar on a terminal; a line per 10% otherwise (logs).
class Progress {
 public:
  explicit Progress(std::int64_t total) : total_(total), tty_(isatty(STDERR_FILENO)), start_(Clock::now()) {}
  void update(std::int64_t done, bool final = false) {
    const auto now = Clock::now();
    const int tenth = static_cast<int>(10 * done / std::max<std::int64_t>(total_, 1));
    if (done == last_done_) {  // shown already; a terminal's bar still needs its line end
      if (final && tty_) std::fputc('\n', stderr);
      return;
    }
    if (!final && (tty_ ? now - last_ < std::chrono::milliseconds(200) : tenth == last_tenth_)) return;
    last_done_ = done;
    last_ = now;
    last_tenth_ = tenth;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double rate = s > 0 ? done / s : 0;
    const int width = 30, filled = static_cast<int>(width * done / std::max<std::int64_t>(total_, 1));
    std::fprintf(stderr, "%s[%s%s] %lld/%lld rows %5.1f%% %8.0f rows/s eta %4.0f s%s", tty_ ? "\r" : "",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_),
                 100.0 * done / std::max<std::int64_t>(total_, 1), rate,
                 rate > 0 ? (total_ - done) / rate : 0.0, tty_ && !final ? "" : "\n");
  }

 private:
  std::int64_t total_;
  bool tty_;
  Clock::time_point start_, last_;
  int last_tenth_ = -1;
  std::int64_t last_done_ = -1;
};

void exec_ok(PGconn* c, const std::string& sql, ExecStatusType want) {
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == want;
  const std::string err = PQresultErrorMessage(r);
  PQclear(r);
  if (!ok) throw std::runtime_error(sql + ": " + err);
}

void copy_rows(PGconn* c, const Args& a) {
  std::int64_t rows = 0;
  int dim = 0;
  gknn_bench::vecs_shape(a.base, sizeof(float), &rows, &dim);
  if (a.limit >= 0) rows = std::min(rows, a.limit);
  std::FILE* f = std::fopen(a.base.c_str(), "rb");
  if (!f) throw std::runtime_error(a.base + ": cannot open");
  std::string buf("PGCOPY\n\377\r\n\0", 11);
  put_u32(buf, 0);  // flags
  put_u32(buf, 0);  // header extension length
  std::vector<float> row(dim);
  Progress progress(rows);
  for (std::int64_t i = 0; i < rows; ++i) {
    std::int32_t d = 0;
    if (std::fread(&d, 4, 1, f) != 1 || d != dim ||
        std::fread(row.data(), 4, dim, f) != static_cast<size_t>(dim))
      throw std::runtime_error(a.base + ": bad row " + std::to_string(i));
    append_tuple(buf, static_cast<std::int32_t>(i), row.data(), dim);
    if (buf.size() >= (1 << 20) || i + 1 == rows) {
      if (i + 1 == rows) put_u16(buf, 0xffff);  // trailer
      if (PQputCopyData(c, buf.data(), static_cast<int>(buf.size())) != 1)
        throw std::runtime_error(std::string("COPY: ") + PQerrorMessage(c));
      buf.clear();
      progress.update(i + 1);
    }
  }
  std::fclose(f);
  if (rows == 0) put_u16(buf, 0xffff), PQputCopyData(c, buf.data(), static_cast<int>(buf.size()));
  progress.update(rows, true);
  if (PQputCopyEnd(c, nullptr) != 1) throw std::runtime_error(std::string("COPY: ") + PQerrorMessage(c));
  PGresult* r = PQgetResult(c);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string err = PQresultErrorMessage(r);
  PQclear(r);
  if (!ok) throw std::runtime_error("COPY: " + err);
}

int run(const Args& a) {
  PGconn* c =
      PQconnectdb((a.conninfo.empty() ? "" : a.conninfo + " ").append("application_name=gknn-load").c_str());
  try {
    if (PQstatus(c) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c));
    exec_ok(c, "BEGIN", PGRES_COMMAND_OK);
    if (a.truncate) exec_ok(c, "TRUNCATE " + a.table, PGRES_COMMAND_OK);
    exec_ok(c, "COPY " + a.table + " (" + a.columns + ") FROM STDIN (FORMAT binary)", PGRES_COPY_IN);
    copy_rows(c, a);
    exec_ok(c, "COMMIT", PGRES_COMMAND_OK);
  } catch (...) {
    PQfinish(c);
    throw;
  }
  PQfinish(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::cerr << "gknn-load: " << e.what() << "\n" << kUsage;
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "gknn-load: " << e.what() << "\n";
    return 1;
  }
}
