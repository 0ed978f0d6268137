// The exact search of a resident gpu_ivfpq image, whole (search_exact) and
// pruned by list bounds (search_exact_pruned, Pruning::Always), side by side per call of 1 to
// 32 queries, k 10: milliseconds per call, the pruned call's share of the
// distances, and whether the two agree (they must, bit for bit).
//
//   gknn_bench_exact_pruned [n=1000000] [dim=128] [lists=1024] [base.fvecs queries.fvecs]
//
// Without files the data is a Gaussian mixture of 1000 clusters (as
// gknn-synth makes synthetic-1m); with files, their first n rows and
// queries (the experiments' cached fvecs). The first pruned call, which
// makes the bounds, is timed apart.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_image.h"
#include "gknn/ivfpq.h"
#include "gknn/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<float> mixture(std::int64_t n, int dim, unsigned seed) {
  std::mt19937 crng(42), rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  constexpr int kCentres = 1000;
  std::vector<float> centres(std::size_t(kCentres) * dim), x(std::size_t(n) * dim);
  for (float& c : centres) c = 4.0f * g(crng);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (rng() % kCentres) * dim;
    for (int d = 0; d < dim; ++d) x[i * dim + d] = c[d] + g(rng);
  }
  return x;
}

// Up to max_rows rows of an fvecs file (each row: int32 dim, dim floats).
std::vector<float> read_fvecs(const std::string& path, std::int64_t max_rows, int& dim) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<float> x;
  std::int32_t d = 0;
  for (std::int64_t r = 0; r < max_rows && in.read(reinterpret_cast<char*>(&d), 4); ++r) {
    dim = d;
    const std::size_t at = x.size();
    x.resize(at + d);
    in.read(reinterpret_cast<char*>(x.data() + at), std::streamsize(sizeof(float)) * d);
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  int dim = argc > 2 ? std::atoi(argv[2]) : 128;
  const int lists = argc > 3 ? std::atoi(argv[3]) : 1024;
  if (gknn::list_devices().empty()) {
    std::fprintf(stderr, "no GPU\n");
    return 2;
  }
  std::vector<float> base, queries;
  if (argc > 5) {
    base = read_fvecs(argv[4], n, dim);
    queries = read_fvecs(argv[5], 1000, dim);
    n = std::int64_t(base.size()) / dim;
  } else {
    base = mixture(n, dim, 7);
    queries = mixture(1000, dim, 8);
  }
  const std::int64_t nq_all = std::int64_t(queries.size()) / dim;
  auto t = Clock::now();
  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = lists, p.m = dim % 32 == 0 ? 32 : dim % 16 == 0 ? 16 : 1, p.nbits = 8;
  const gknn::ivfpq::Image image = bench_image(base, p, 100000);
  const gknn::ivfpq::DeviceImage img(image, 0);
  std::printf("image %lld x %d, %d lists: built in %.1f s (%s)\n", (long long)n, dim, lists,
              ms_since(t) / 1e3, argc > 5 ? argv[4] : "Gaussian mixture, 1000 clusters");
  const int k = 10;
  std::vector<std::int64_t> ids(32 * k), ids2(32 * k);
  std::vector<double> dist(32 * k), dist2(32 * k);
  std::int64_t computed = 0;
  t = Clock::now();
  img.search_exact_pruned(queries.data(), 1, k, ids.data(), dist.data(), nullptr,
                          gknn::ivfpq::Pruning::Always);
  std::printf("first pruned call (makes the bounds): %.2f ms\n", ms_since(t));
  std::printf("| queries a call | whole ms | pruned ms | whole / pruned | distances computed | equal |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (std::int64_t b : {1, 2, 4, 8, 16, 32}) {
    // Agreement and the share computed over every query, b at a time.
    bool equal = true;
    std::int64_t counted = 0, calls = 0;
    for (std::int64_t q0 = 0; q0 + b <= nq_all; q0 += b, ++calls) {
      const float* q = queries.data() + q0 * dim;
      img.search_exact(q, b, k, ids.data(), dist.data());
      img.search_exact_pruned(q, b, k, ids2.data(), dist2.data(), &computed, gknn::ivfpq::Pruning::Always);
      counted += computed;
      equal = equal && std::equal(ids.begin(), ids.begin() + b * k, ids2.begin()) &&
              std::memcmp(dist.data(), dist2.data(), sizeof(double) * b * k) == 0;
    }
    // Time per call, the two interleaved in rounds of 0.2 s each.
    double whole = 0, pruned = 0;
    std::int64_t whole_calls = 0, pruned_calls = 0;
    for (int round = 0; round < 3; ++round) {
      for (int which = 0; which < 2; ++which) {
        std::int64_t c = 0;
        t = Clock::now();
        while (ms_since(t) < 200) {
          const float* q = queries.data() + (c * b % (nq_all - b + 1)) * dim;
          if (which == 0)
            img.search_exact(q, b, k, ids.data(), dist.data());
          else
            img.search_exact_pruned(q, b, k, ids2.data(), dist2.data(), nullptr,
                                    gknn::ivfpq::Pruning::Always);
          ++c;
        }
        (which == 0 ? whole : pruned) += ms_since(t);
        (which == 0 ? whole_calls : pruned_calls) += c;
      }
    }
    whole /= double(whole_calls), pruned /= double(pruned_calls);
    std::printf("| %lld | %.3f | %.3f | %.2fx | %.2f %% | %s |\n", (long long)b, whole, pruned,
                whole / pruned, 100.0 * double(counted) / double(calls * b * n), equal ? "yes" : "NO");
    std::fflush(stdout);
  }
  return 0;
}
