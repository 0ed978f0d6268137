// gknn-groundtruth: exact top-K neighbours of every query with gknn's own
// exact search (the GPU when one is usable, else the CPU reference), written
// as ivecs ids + fvecs distances. A GPU result is checked against the CPU
// reference on a sample of queries, bit for bit (gknn's contract), and the
// tool fails if any differ.
//
// The base is read in chunks and the per-chunk top-K merged, so it need not
// fit in memory at once (100M x 96 does not on a 24 GiB machine).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "../common/vecfile.h"
#include "gknn/knn.h"
#include "gknn/runtime.h"

namespace {

using gknn_bench::FloatMatrix;

struct Args {
  std::string base, queries, ids_out, dist_out, report, device = "auto";
  gknn::Metric metric = gknn::Metric::L2;
  int k = 100, threads = 0;
  std::int64_t query_limit = -1, chunk_rows = 0, check = 100;
};

const char kUsage[] =
    "usage: gknn-groundtruth --base B.fvecs --queries Q.fvecs --metric l2|ip|cosine|l1\n"
    "         --ids OUT.ivecs --dist OUT.fvecs [--k 100] [--query-limit N] [--device auto|gpu|cpu]\n"
    "         [--check N (GPU rows checked against the CPU, 100)] [--threads T] [--chunk-rows R]\n"
    "         [--report R.json]\n";

gknn::Metric parse_metric(const std::string& m) {
  if (m == "l2") return gknn::Metric::L2;
  if (m == "ip") return gknn::Metric::InnerProduct;
  if (m == "cosine") return gknn::Metric::Cosine;
  if (m == "l1") return gknn::Metric::L1;
  throw std::invalid_argument("--metric: l2, ip, cosine or l1, not '" + m + "'");
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(f + ": missing value");
    const std::string v = argv[i + 1];
    if (f == "--base")
      a.base = v;
    else if (f == "--queries")
      a.queries = v;
    else if (f == "--ids")
      a.ids_out = v;
    else if (f == "--dist")
      a.dist_out = v;
    else if (f == "--report")
      a.report = v;
    else if (f == "--device")
      a.device = v;
    else if (f == "--metric")
      a.metric = parse_metric(v);
    else if (f == "--k")
      a.k = std::stoi(v);
    else if (f == "--threads")
      a.threads = std::stoi(v);
    else if (f == "--query-limit")
      a.query_limit = std::stoll(v);
    else if (f == "--chunk-rows")
      a.chunk_rows = std::stoll(v);
    else if (f == "--check")
      a.check = std::stoll(v);
    else
      throw std::invalid_argument("unknown option " + f);
  }
  if (a.base.empty() || a.queries.empty() || a.ids_out.empty() || a.dist_out.empty() || a.k < 1)
    throw std::invalid_argument("--base, --queries, --ids and --dist are required, --k >= 1");
  if (a.device != "auto" && a.device != "gpu" && a.device != "cpu")
    throw std::invalid_argument("--device: auto, gpu or cpu");
  return a;
}

// Running top-K of every query: ids and distances, each row in gknn's order.
struct TopK {
  std::int64_t nq;
  int k;
  std::vector<std::int64_t> ids;
  std::vector<double> dist;
  TopK(std::int64_t nq_, int k_)
      : nq(nq_), k(k_), ids(nq_ * k_, -1), dist(nq_ * k_, gknn::canonical_score(NAN)) {}

  // Merges a chunk's top-K (ids local to the chunk, offset to global ids).
  void merge(const std::vector<std::int64_t>& cids, const std::vector<double>& cdist, std::int64_t offset) {
    std::vector<std::int64_t> mi(k);
    std::vector<double> md(k);
    for (std::int64_t q = 0; q < nq; ++q) {
      std::int64_t* ri = &ids[q * k];
      double* rd = &dist[q * k];
      int a = 0, b = 0;
      for (int j = 0; j < k; ++j) {
        const std::int64_t bid = cids[q * k + b] < 0 ? -1 : cids[q * k + b] + offset;
        // Padding (-1) sorts after every real row.
        const bool take_a = bid < 0 || (ri[a] >= 0 && gknn::score_less(rd[a], ri[a], cdist[q * k + b], bid));
        if (take_a)
          mi[j] = ri[a], md[j] = rd[a], ++a;
        else
          mi[j] = bid, md[j] = cdist[q * k + b], ++b;
      }
      std::copy(mi.begin(), mi.end(), ri);
      std::copy(md.begin(), md.end(), rd);
    }
  }
};

// The CPU reference over query slices in parallel (it is single-threaded).
void knn_cpu_threads(const gknn::KnnRequest& req, int threads, std::int64_t* ids, double* dist) {
  std::vector<std::thread> pool;
  const std::int64_t per = (req.nq + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const std::int64_t first = t * per, count = std::min(per, req.nq - first);
    if (count <= 0) break;
    pool.emplace_back([=] {
      gknn::KnnRequest part = req;
      part.queries = req.queries + first * req.dim;
      part.nq = count;
      gknn::exact_knn_cpu(part, ids + first * req.k, dist + first * req.k);
    });
  }
  for (auto& th : pool) th.join();
}

// Top-K of the given queries over the whole base, chunk by chunk.
TopK search(const Args& a, const FloatMatrix& queries, bool gpu, int threads) {
  std::int64_t n = 0;
  int dim = 0;
  gknn_bench::vecs_shape(a.base, sizeof(float), &n, &dim);
  if (dim != queries.dim) throw std::runtime_error("base and queries differ in dimension");
  // About 2 GiB of base at a time unless told otherwise.
  const std::int64_t chunk =
      a.chunk_rows > 0 ? a.chunk_rows : std::max<std::int64_t>(1, (2LL << 30) / (4 * dim));
  TopK top(queries.rows, a.k);
  std::vector<std::int64_t> cids(queries.rows * a.k);
  std::vector<double> cdist(queries.rows * a.k);
  for (std::int64_t first = 0; first < n; first += chunk) {
    const FloatMatrix base = gknn_bench::read_fvecs_range(a.base, first, chunk);
    gknn::KnnRequest req;
    req.base = base.data.data();
    req.n = base.rows;
    req.queries = queries.data.data();
    req.nq = queries.rows;
    req.dim = dim;
    req.k = a.k;
    req.metric = a.metric;
    if (gpu)
      gknn::exact_knn_gpu(req, 0, cids.data(), cdist.data());
    else
      knn_cpu_threads(req, threads, cids.data(), cdist.data());
    top.merge(cids, cdist, first);
    std::cerr << "\rgroundtruth: " << std::min(first + chunk, n) << " / " << n << " base rows" << std::flush;
  }
  std::cerr << "\n";
  return top;
}

// Queries spread evenly over the set, for the CPU check of a GPU result.
std::vector<std::int64_t> sample_rows(std::int64_t nq, std::int64_t count) {
  std::vector<std::int64_t> rows;
  count = std::min(count, nq);
  for (std::int64_t i = 0; i < count; ++i) rows.push_back(i * nq / count);
  return rows;
}

// Rows of the GPU result that differ from the CPU reference.
std::int64_t check_against_cpu(const Args& a, const FloatMatrix& queries, const TopK& gpu_top, int threads,
                               std::int64_t* checked) {
  const auto rows = sample_rows(queries.rows, a.check);
  FloatMatrix sample;
  sample.dim = queries.dim;
  sample.rows = static_cast<std::int64_t>(rows.size());
  for (std::int64_t r : rows)
    sample.data.insert(sample.data.end(), queries.row(r), queries.row(r) + queries.dim);
  const TopK cpu = search(a, sample, false, threads);
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int64_t g = rows[i] * a.k, c = static_cast<std::int64_t>(i) * a.k;
    bool same = std::equal(&cpu.ids[c], &cpu.ids[c] + a.k, &gpu_top.ids[g]) &&
                std::memcmp(&cpu.dist[c], &gpu_top.dist[g], a.k * sizeof(double)) == 0;
    bad += !same;
  }
  *checked = sample.rows;
  return bad;
}

void write_outputs(const Args& a, const TopK& top) {
  gknn_bench::VecsWriter ids(a.ids_out), dist(a.dist_out);
  std::vector<std::int32_t> irow(top.k);
  std::vector<float> drow(top.k);
  for (std::int64_t q = 0; q < top.nq; ++q) {
    for (int j = 0; j < top.k; ++j) {
      irow[j] = static_cast<std::int32_t>(top.ids[q * top.k + j]);
      drow[j] = static_cast<float>(top.dist[q * top.k + j]);
    }
    ids.write_row(irow.data(), top.k);
    dist.write_row(drow.data(), top.k);
  }
  ids.close();
  dist.close();
}

int run(const Args& a) {
  const FloatMatrix queries = gknn_bench::read_fvecs(a.queries, a.query_limit);
  const auto devices = gknn::list_devices();
  if (a.device == "gpu" && devices.empty()) throw std::runtime_error("--device gpu: no usable GPU");
  const bool gpu = a.device != "cpu" && !devices.empty();
  const int threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  const auto t0 = std::chrono::steady_clock::now();
  const TopK top = search(a, queries, gpu, threads);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::int64_t checked = 0, mismatches = 0;
  if (gpu && a.check > 0) mismatches = check_against_cpu(a, queries, top, threads, &checked);
  write_outputs(a, top);
  const std::string device = gpu ? devices[0].name : "cpu (" + std::to_string(threads) + " threads)";
  std::cerr << "groundtruth: " << queries.rows << " queries, top " << a.k << ", " << device << ", " << seconds
            << " s; checked against the CPU reference: " << checked << " queries, " << mismatches
            << " differ\n";
  if (!a.report.empty())
    std::ofstream(a.report) << "{\"device\": \"" << device << "\", \"queries\": " << queries.rows
                            << ", \"k\": " << a.k << ", \"seconds\": " << seconds
                            << ", \"cpu_checked_queries\": " << checked
                            << ", \"cpu_mismatches\": " << mismatches << "}\n";
  return mismatches ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::cerr << "gknn-groundtruth: " << e.what() << "\n" << kUsage;
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "gknn-groundtruth: " << e.what() << "\n";
    return 1;
  }
}
