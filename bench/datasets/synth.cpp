// gknn-synth: clustered Gaussian mixtures of any size, deterministic from a
// seed, written as fvecs (base and queries drawn from the same mixture).
//
// Every block of rows has its own random stream, seeded by (seed, file,
// block), so the file is the same for any thread count. The generator is
// SplitMix64 plus Box-Muller with libm's log / sqrt / cos, not
// std::normal_distribution (implementation-defined): the same bytes on every
// glibc x86-64 machine.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/vecfile.h"

namespace {

struct Args {
  std::int64_t n = 1000000, nq = 10000;
  int dim = 128, clusters = 1000, threads = 0;
  std::uint64_t seed = 42;
  double center_spread = 4.0;  // standard deviation of the cluster centres
  std::string base, queries;
};

const char kUsage[] =
    "usage: gknn-synth --base B.fvecs --queries Q.fvecs [--n 1000000] [--nq 10000] [--dim 128]\n"
    "         [--clusters 1000] [--seed 42] [--center-spread 4.0] [--threads T]\n";

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(f + ": missing value");
    const std::string v = argv[i + 1];
    if (f == "--n")
      a.n = std::stoll(v);
    else if (f == "--nq")
      a.nq = std::stoll(v);
    else if (f == "--dim")
      a.dim = std::stoi(v);
    else if (f == "--clusters")
      a.clusters = std::stoi(v);
    else if (f == "--seed")
      a.seed = std::stoull(v);
    else if (f == "--center-spread")
      a.center_spread = std::stod(v);
    else if (f == "--threads")
      a.threads = std::stoi(v);
    else if (f == "--base")
      a.base = v;
    else if (f == "--queries")
      a.queries = v;
    else
      throw std::invalid_argument("unknown option " + f);
  }
  if (a.base.empty() || a.queries.empty() || a.n < 1 || a.nq < 0 || a.dim < 1 || a.clusters < 1)
    throw std::invalid_argument("--base and --queries are required; sizes must be positive");
  return a;
}

// SplitMix64: tiny, fast, and the same everywhere.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return ((next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

Rng stream(std::uint64_t seed, std::uint64_t file, std::uint64_t block) {
  Rng r{seed ^ (file * 0xd1b54a32d192ed03ULL)};
  r.s ^= Rng{block * 0x2545f4914f6cdd1dULL + 1}.next();
  return r;
}

// Centres and per-cluster spreads (0.5 .. 1.5): clusters of different sizes
// and densities, like real embeddings.
struct Mixture {
  int dim;
  std::vector<float> centers;
  std::vector<double> sigma;
  Mixture(const Args& a) : dim(a.dim) {
    Rng r = stream(a.seed, 0, 0);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(a.clusters) * a.dim; ++i)
      centers.push_back(static_cast<float>(r.normal() * a.center_spread));
    for (int c = 0; c < a.clusters; ++c) sigma.push_back(0.5 + r.uniform());
  }
  void draw(Rng& r, float* out) const {
    const auto c = static_cast<std::int64_t>(r.next() % sigma.size());
    for (int d = 0; d < dim; ++d) out[d] = static_cast<float>(centers[c * dim + d] + sigma[c] * r.normal());
  }
};

constexpr std::int64_t kBlock = 65536;

// Rows of one file, generated block-parallel and written in order.
void generate(const Mixture& mix, const Args& a, std::uint64_t file, std::int64_t rows,
              const std::string& path) {
  gknn_bench::VecsWriter out(path);
  const int threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<float>> buf(threads, std::vector<float>(kBlock * a.dim));
  for (std::int64_t first_block = 0; first_block * kBlock < rows; first_block += threads) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const std::int64_t b = first_block + t, start = b * kBlock;
        Rng r = stream(a.seed, file, static_cast<std::uint64_t>(b));
        for (std::int64_t i = start; i < std::min(rows, start + kBlock); ++i)
          mix.draw(r, &buf[t][(i - start) * a.dim]);
      });
    for (auto& th : pool) th.join();
    for (int t = 0; t < threads; ++t) {
      const std::int64_t start = (first_block + t) * kBlock;
      for (std::int64_t i = start; i < std::min(rows, start + kBlock); ++i)
        out.write_row(&buf[t][(i - start) * a.dim], a.dim);
    }
    std::cerr << "\rsynth: " << path << " " << std::min(rows, (first_block + threads) * kBlock) << " / "
              << rows << std::flush;
  }
  std::cerr << "\n";
  out.close();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const Mixture mix(a);
    generate(mix, a, 1, a.n, a.base);
    generate(mix, a, 2, a.nq, a.queries);
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "gknn-synth: " << e.what() << "\n" << kUsage;
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "gknn-synth: " << e.what() << "\n";
    return 1;
  }
}
