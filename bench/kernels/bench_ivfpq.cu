// IVF-PQ in the core library, on the GPU host (issue 5): training and
// encoding time on the GPU and the CPU, then recall@10 and query throughput
// over probes and refine, against exact GPU search of the same queries.
//
//   gknn_bench_ivfpq [n=1000000] [dim=128] [lists=1024] [m=32] [nbits=8] [results.md]
//
// Data: a clustered Gaussian mixture (1000 centres, fixed seed), 1000
// queries from the same mixture. "refine r" fetches r x 10 candidates by PQ
// distance and re-ranks them by exact distance (on the host, as the index
// scan does from the heap), so recall@10 counts exact top-10 ids found.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gknn/ivfpq.h"
#include "gknn/knn.h"
#include "gknn/runtime.h"
#include "bench_common.cuh"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<float> mixture(std::int64_t n, int dim, std::uint64_t seed, const std::vector<float>& centres) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const std::int64_t k = std::int64_t(centres.size()) / dim;
  std::vector<float> x(n * dim);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (rng() % k) * dim;
    for (int d = 0; d < dim; ++d) x[i * dim + d] = c[d] + noise(rng);
  }
  return x;
}

// Exact distances of the candidates, best 10 kept (ties by id).
std::vector<std::int64_t> rerank(const float* q, const float* base, int dim, const std::int64_t* cand, int n,
                                 int k) {
  std::vector<std::pair<double, std::int64_t>> v;
  for (int i = 0; i < n; ++i)
    if (cand[i] >= 0) v.emplace_back(gknn::distance(gknn::Metric::L2, q, base + cand[i] * dim, dim), cand[i]);
  std::sort(v.begin(), v.end());
  std::vector<std::int64_t> out;
  for (int i = 0; i < k && i < int(v.size()); ++i) out.push_back(v[i].second);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int dim = argc > 2 ? std::atoi(argv[2]) : 128;
  const int lists = argc > 3 ? std::atoi(argv[3]) : 1024;
  const int m = argc > 4 ? std::atoi(argv[4]) : 32;
  const int nbits = argc > 5 ? std::atoi(argv[5]) : 8;
  const char* md = argc > 6 ? argv[6] : nullptr;
  const std::int64_t nq = 1000, train_n = std::min<std::int64_t>(n, std::int64_t(lists) * 64);
  const int k = 10;
  auto devices = gknn::list_devices();
  if (devices.empty()) {
    std::fprintf(stderr, "no GPU\n");
    return 1;
  }

  std::mt19937_64 rng(7);
  std::normal_distribution<float> spread(0.0f, 4.0f);
  std::vector<float> centres(1000 * dim);
  for (float& c : centres) c = spread(rng);
  const std::vector<float> base = mixture(n, dim, 1, centres), queries = mixture(nq, dim, 2, centres);

  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = lists, p.m = m, p.nbits = nbits;
  auto t = Clock::now();
  gknn::ivfpq::Quantizer q = gknn::ivfpq::train(p, base.data(), train_n, 0);
  const double train_s = seconds_since(t);
  gknn::ivfpq::Image image;
  std::vector<std::int32_t> list_of(n);
  std::vector<std::uint8_t> codes(n * gknn::ivfpq::code_size(p));
  t = Clock::now();
  gknn::ivfpq::encode(q, base.data(), n, 0, list_of.data(), codes.data());
  const double encode_s = seconds_since(t);
  // The CPU build of the same format, on a slice (the reference, rows split over threads).
  const std::int64_t cpu_n = std::min<std::int64_t>(n, 20000);
  t = Clock::now();
  gknn::ivfpq::encode(q, base.data(), cpu_n, gknn::ivfpq::kCpu, list_of.data(), codes.data());
  const double cpu_encode_rate = cpu_n / seconds_since(t);

  // Lists laid out as the index pages hold them.
  image.quantizer = q;
  const int cs = gknn::ivfpq::code_size(p);
  image.offsets.assign(q.params.lists + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) ++image.offsets[list_of[i] + 1];
  for (int l = 0; l < q.params.lists; ++l) image.offsets[l + 1] += image.offsets[l];
  image.codes.resize(n * cs);
  image.ids.resize(n);
  std::vector<std::int64_t> fill(image.offsets.begin(), image.offsets.end() - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = fill[list_of[i]]++;
    std::copy_n(codes.data() + i * cs, cs, image.codes.data() + at * cs);
    image.ids[at] = i;
  }
  t = Clock::now();
  gknn::ivfpq::DeviceImage dev(image, 0);
  const double upload_s = seconds_since(t);

  // Ground truth and the exact GPU baseline.
  gknn::KnnRequest req;
  req.base = base.data(), req.n = n, req.queries = queries.data(), req.nq = nq, req.dim = dim, req.k = k;
  std::vector<std::int64_t> truth(nq * k);
  std::vector<double> truth_d(nq * k);
  gknn::exact_knn_gpu(req, 0, truth.data(), truth_d.data());
  t = Clock::now();
  gknn::exact_knn_gpu(req, 0, truth.data(), truth_d.data());
  const double exact_s = seconds_since(t);
  req.nq = 1;
  t = Clock::now();
  for (int i = 0; i < 20; ++i) gknn::exact_knn_gpu(req, 0, truth.data(), truth_d.data());
  const double exact_one_ms = seconds_since(t) / 20 * 1e3;
  req.nq = nq;
  gknn::exact_knn_gpu(req, 0, truth.data(), truth_d.data());

  std::string report;
  char line[512];
  std::snprintf(line, sizeof line,
                "# IVF-PQ in the core library (%s, %s)\n\nn = %lld, dim = %d, lists = %d, m = %d, nbits = %d, "
                "training sample %lld, 10 Lloyd iterations, 1000 queries, k = 10.\n\n"
                "| step | time |\n|---|---:|\n| train (GPU) | %.2f s |\n| encode all (GPU) | %.2f s |\n"
                "| encode (CPU reference) | %.0f rows/s |\n| upload image | %.3f s |\n"
                "| exact GPU search, 1000 queries | %.1f ms |\n| exact GPU search, 1 query | %.2f ms |\n\n",
                devices[0].name.c_str(), today().c_str(), (long long)n, dim, lists, m, nbits, (long long)train_n,
                train_s, encode_s, cpu_encode_rate, upload_s, exact_s * 1e3, exact_one_ms);
  report += line;
  report +=
      "| probes | refine | recall@10 | batch QPS | vs exact batch | 1-query ms |\n"
      "|---:|---:|---:|---:|---:|---:|\n";
  for (int probes : {1, 4, 16, 64}) {
    for (int refine : {1, 4, 16}) {
      gknn::ivfpq::SearchParams sp;
      sp.k = k * refine, sp.probes = probes;
      std::vector<std::int64_t> ids(nq * sp.k);
      std::vector<float> dist(nq * sp.k);
      dev.search(queries.data(), nq, sp, ids.data(), dist.data());  // warm-up
      t = Clock::now();
      dev.search(queries.data(), nq, sp, ids.data(), dist.data());
      const double batch_s = seconds_since(t);
      t = Clock::now();
      for (int i = 0; i < 20; ++i) dev.search(queries.data() + i * dim, 1, sp, ids.data(), dist.data());
      const double one_ms = seconds_since(t) / 20 * 1e3;
      dev.search(queries.data(), nq, sp, ids.data(), dist.data());
      std::int64_t hits = 0;
      for (std::int64_t i = 0; i < nq; ++i) {
        auto best = rerank(queries.data() + i * dim, base.data(), dim, ids.data() + i * sp.k, sp.k, k);
        for (std::int64_t id : best)
          hits += std::count(truth.begin() + i * k, truth.begin() + (i + 1) * k, id);
      }
      std::snprintf(line, sizeof line, "| %d | %d | %.3f | %.0f | %.1fx | %.2f |\n", probes, refine,
                    double(hits) / (nq * k), nq / batch_s, exact_s / batch_s, one_ms);
      report += line;
    }
  }
  publish(report, md);
  return 0;
}
