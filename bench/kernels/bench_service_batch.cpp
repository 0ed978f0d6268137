// What one GPU service round costs (issue 14): the core calls the service
// makes for a batch of requests, timed by batch size and by the number of
// host threads calling at once, on a Fashion-MNIST-shaped image (60,000 x
// 784, 256 lists, m 49; clustered synthetic data, so no dataset is needed).
//
//   gknn_bench_service_batch [n=60000] [dim=784] [lists=256] [m=49] [results.md] [profile]
//
// With "profile" it only makes three calls of each search with one query
// (after three warm-up calls), for a kernel profiler (ncu) to list the
// launches of one call and their durations.
//
// Rows: the PQ search (k 10), the refined search as a scan asks for it
// (probes 16, refine 16 x LIMIT 10: 160 candidates re-ranked, all returned)
// and the exact search (k 10), per batch size: mean milliseconds per call and
// queries per second; then the refined search (batches of 8) and the exact
// search (batches of 4) from 1, 2, 4 and 8 threads at once, total queries
// per second: what overlapping batches in the service can buy.
#include <cuda_profiler_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_image.h"
#include "gknn/ivfpq.h"
#include "gknn/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<float> mixture(std::int64_t n, int dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> centre(0.0f, 255.0f);
  constexpr int kCentres = 100;
  std::vector<float> centres(std::size_t(kCentres) * dim);
  std::mt19937_64 crng(42);
  for (float& c : centres) c = centre(crng);
  std::vector<float> x(std::size_t(n) * dim);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (rng() % kCentres) * dim;
    for (int d = 0; d < dim; ++d) x[i * dim + d] = c[d] + 20.0f * noise(rng);
  }
  return x;
}

enum class Kind { Pq, Refined, Exact };
const char* name(Kind k) {
  return k == Kind::Pq ? "PQ k 10" : k == Kind::Refined ? "refined 160" : "exact k 10";
}

// One call of `kind` over `nq` queries.
void call(const gknn::ivfpq::DeviceImage& img, Kind kind, const float* q, std::int64_t nq,
          std::vector<std::int64_t>& ids, std::vector<double>& dist, std::vector<float>& fdist) {
  gknn::ivfpq::SearchParams sp;
  sp.probes = 16;
  if (kind == Kind::Pq) {
    sp.k = 10;
    img.search(q, nq, sp, ids.data(), fdist.data());
  } else if (kind == Kind::Refined) {
    sp.k = 160;
    sp.refine = 1;
    img.search_refined(q, nq, sp, ids.data(), dist.data());
  } else {
    img.search_exact(q, nq, 10, ids.data(), dist.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 60000;
  const int dim = argc > 2 ? std::atoi(argv[2]) : 784;
  const int lists = argc > 3 ? std::atoi(argv[3]) : 256;
  const int m = argc > 4 ? std::atoi(argv[4]) : 49;
  const std::string out = argc > 5 ? argv[5] : "";
  const bool profile = argc > 6 && std::string(argv[6]) == "profile";
  if (gknn::list_devices().empty()) {
    std::fprintf(stderr, "no GPU\n");
    return 2;
  }
  const std::vector<float> base = mixture(n, dim, 7);
  const std::int64_t nq = 512;
  const std::vector<float> queries = mixture(nq, dim, 8);

  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = lists, p.m = m, p.nbits = 8;
  auto t = Clock::now();
  const gknn::ivfpq::Image image = bench_image(base, p, 50000);
  const gknn::ivfpq::DeviceImage img(image, 0);
  std::printf("image %lld x %d, %d lists, m %d: built in %.1f s\n", (long long)n, dim, lists, m,
              seconds_since(t));

  std::vector<std::int64_t> ids(nq * 160);
  std::vector<double> dist(nq * 160);
  std::vector<float> fdist(nq * 160);
  if (profile) {  // ncu --profile-from-start off: only the calls after warm-up
    for (Kind kind : {Kind::Pq, Kind::Refined, Kind::Exact})
      for (int i = 0; i < 3; ++i) call(img, kind, queries.data() + i * dim, 1, ids, dist, fdist);
    cudaProfilerStart();
    for (Kind kind : {Kind::Pq, Kind::Refined, Kind::Exact})
      for (int i = 3; i < 6; ++i) call(img, kind, queries.data() + i * dim, 1, ids, dist, fdist);
    cudaProfilerStop();
    return 0;
  }
  std::string table =
      "| search | batch | ms per call | queries/s |\n"
      "| --- | ---: | ---: | ---: |\n";
  for (Kind kind : {Kind::Pq, Kind::Refined, Kind::Exact}) {
    for (std::int64_t b : {1, 2, 4, 8, 16, 32, 64}) {
      for (int w = 0; w < 3; ++w) call(img, kind, queries.data(), b, ids, dist, fdist);
      int calls = 0;
      t = Clock::now();
      while (seconds_since(t) < 0.5) {
        call(img, kind, queries.data() + (calls * b % (nq - b)) * dim, b, ids, dist, fdist);
        ++calls;
      }
      const double s = seconds_since(t);
      char line[160];
      std::snprintf(line, sizeof line, "| %s | %lld | %.3f | %.0f |\n", name(kind), (long long)b,
                    1e3 * s / calls, calls * b / s);
      table += line;
      std::fputs(line, stdout);
      std::fflush(stdout);
    }
  }
  // Batches from several threads at once, as the service's executors run
  // them: refined batches of 8, exact batches of 4.
  for (Kind kind : {Kind::Refined, Kind::Exact}) {
    const std::int64_t b = kind == Kind::Exact ? 4 : 8;
    table += std::string("\n| ") + name(kind) + ", batches of " + std::to_string(b) +
             " | threads | queries/s |\n| --- | ---: | ---: |\n";
    for (int threads : {1, 2, 4, 8}) {
      std::atomic<long> done{0};
      std::vector<std::thread> pool;
      t = Clock::now();
      for (int i = 0; i < threads; ++i)
        pool.emplace_back([&, i] {
          std::vector<std::int64_t> tid(b * 160);
          std::vector<double> td(b * 160);
          std::vector<float> tf(b * 160);
          long calls = 0;
          while (seconds_since(t) < 1.0) {
            call(img, kind, queries.data() + ((i * 37 + calls * b) % (nq - b)) * dim, b, tid, td, tf);
            ++calls;
          }
          done += calls * b;
        });
      for (auto& th : pool) th.join();
      char line[160];
      std::snprintf(line, sizeof line, "| | %d | %.0f |\n", threads, done / seconds_since(t));
      table += line;
      std::fputs(line, stdout);
      std::fflush(stdout);
    }
  }
  if (!out.empty()) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f) {
      std::fprintf(f, "# Service batch costs: %lld x %d, %d lists, m %d\n\n%s", (long long)n, dim, lists, m,
                   table.c_str());
      std::fclose(f);
    }
  }
  return 0;
}
