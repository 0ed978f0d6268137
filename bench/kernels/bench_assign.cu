// k-means assignment on the GPU (issue 5): the direct kernel against the
// GEMM with certified re-check, on the shapes an index build assigns, every
// result checked equal to the other path (and, on a slice, to the CPU).
//
//   gknn_bench_assign [results.md]
//
// Rows come from a Gaussian mixture; centroids are rows of it (as after
// k-means++ seeding), so each row has near neighbours among them. Times are
// per nearest() call with the rows already on the GPU (k-means' situation),
// the best of 3 after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "gknn/runtime.h"
#include "ivfpq/assign.h"
#include "runtime/cublas_loader.h"
#include "runtime/gemm.h"

namespace {

using Clock = std::chrono::steady_clock;
using gknn::ivfpq::AssignPath;

struct Shape {
  const char* what;
  std::int64_t n;
  int dim, k, groups;
};

std::vector<float> mixture(std::int64_t n, int width, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> spread(0.0f, 4.0f), noise(0.0f, 1.0f);
  std::vector<float> centres(1000 * std::size_t(width));
  for (float& c : centres) c = spread(rng);
  std::vector<float> x(n * width);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (rng() % 1000) * width;
    for (int d = 0; d < width; ++d) x[i * width + d] = c[d] + noise(rng);
  }
  return x;
}

double best_ms(gknn::ivfpq::Assigner& a, const std::vector<float>& cents, const Shape& s,
               std::vector<std::int32_t>& out) {
  a.nearest(cents.data(), s.k, s.dim, s.groups, out.data());  // warm-up
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t = Clock::now();
    a.nearest(cents.data(), s.k, s.dim, s.groups, out.data());
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  return best;
}

// The cuBLAS GEMM alone (the dot products only, no bound, no re-check): what
// the GEMM path costs at least, in fp32 and in TF32.
double gemm_alone_ms(const std::vector<float>& x, const std::vector<float>& cents, const Shape& s,
                     gknn::GemmPrecision precision) {
  const std::int64_t width = std::int64_t(s.dim) * s.groups;
  const std::int64_t tile = std::min<std::int64_t>(s.n, std::max<std::int64_t>(1, (1 << 26) / s.k));
  const gknn::DeviceBuffer<float> d_x(x.size()), d_c(cents.size()), d_dots(tile * s.k);
  float *dx = d_x.get(), *dc = d_c.get(), *dots = d_dots.get();
  GKNN_CUDA(cudaMemcpy(dx, x.data(), sizeof(float) * x.size(), cudaMemcpyHostToDevice));
  GKNN_CUDA(cudaMemcpy(dc, cents.data(), sizeof(float) * cents.size(), cudaMemcpyHostToDevice));
  const gknn::Gemm gemm(gknn::load_cublas(), precision);
  double best = 1e30;
  for (int r = 0; r < 4; ++r) {
    GKNN_CUDA(cudaDeviceSynchronize());
    const auto t = Clock::now();
    for (int g = 0; g < s.groups; ++g)
      for (std::int64_t r0 = 0; r0 < s.n; r0 += tile)
        gemm.run(0, nullptr, dc + std::int64_t(g) * s.k * s.dim, s.k, s.dim, dx + r0 * width + g * s.dim,
                 int(std::min(tile, s.n - r0)), int(width), s.dim, dots, s.k);
    GKNN_CUDA(cudaDeviceSynchronize());
    if (r) best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const char* md = argc > 1 ? argv[1] : nullptr;
  auto devices = gknn::list_devices();
  if (devices.empty()) {
    std::fprintf(stderr, "no GPU\n");
    return 1;
  }
  const Shape shapes[] = {
      {"coarse, 1M x 128 sample, 1024 lists", 1000000, 128, 1024, 1},
      {"coarse, 262144 x 96 sample, 4096 lists", 262144, 96, 4096, 1},
      {"coarse, 1M x 128, 4096 lists (encode)", 1000000, 128, 4096, 1},
      {"coarse, 60000 x 784, 256 lists", 60000, 784, 256, 1},
      {"PQ, 262144 rows, m 32 x dsub 4, 256", 262144, 4, 256, 32},
      {"PQ, 60000 rows, m 49 x dsub 16, 256", 60000, 16, 256, 49},
      {"PQ, 262144 rows, m 8 x dsub 16, 256", 262144, 16, 256, 8},
  };
  std::string report;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "# k-means assignment on the GPU (%s, %s)\n\nms per call, rows resident; direct = the "
      "reference arithmetic for every pair; GEMM = cuBLAS fp32 proxy, certified re-check.\n\n"
      "| shape | direct ms | GEMM ms | speed-up | equal | equal to CPU (first 2000 rows) | cuBLAS fp32 alone "
      "| cuBLAS TF32 alone |\n|---|---:|---:|---:|---|---|---:|---:|\n",
      devices[0].name.c_str(), today().c_str());
  report += line;
  std::string setup_line;
  for (const Shape& s : shapes) {
    const std::int64_t width = std::int64_t(s.dim) * s.groups;
    const std::vector<float> x = mixture(s.n, int(width), 11);
    std::vector<float> cents(std::size_t(s.groups) * s.k * s.dim);
    std::mt19937_64 pick(5);
    for (int g = 0; g < s.groups; ++g)
      for (int c = 0; c < s.k; ++c) {
        const float* row = x.data() + (pick() % s.n) * width + std::int64_t(g) * s.dim;
        std::copy_n(row, s.dim, cents.begin() + (std::size_t(g) * s.k + c) * s.dim);
      }
    std::vector<std::int32_t> direct(s.n * s.groups), gemm(s.n * s.groups);
    gknn::ivfpq::Assigner a_direct(x.data(), s.n, width, 0, AssignPath::Direct);
    const double direct_ms = best_ms(a_direct, cents, s, direct);
    const auto setup = Clock::now();
    gknn::ivfpq::Assigner a_gemm(x.data(), s.n, width, 0, AssignPath::Gemm);
    const double setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - setup).count();
    if (&s == &shapes[0]) {  // the process's first cuBLAS load and handles, plus the rows' upload
      std::snprintf(line, sizeof line,
                    "GEMM path set-up, first in the process (cuBLAS load, 2 handles, %lld x %lld "
                    "rows uploaded): %.1f ms\n\n",
                    (long long)s.n, (long long)width, setup_ms);
      setup_line = line;
    }
    const double gemm_ms = best_ms(a_gemm, cents, s, gemm);
    const std::int64_t slice = std::min<std::int64_t>(s.n, 2000);
    std::vector<std::int32_t> cpu(slice * s.groups);
    gknn::ivfpq::nearest_cpu({slice, width, s.dim, s.k, s.groups}, x.data(), cents.data(), cpu.data());
    bool cpu_equal = true;
    for (int g = 0; g < s.groups; ++g)
      cpu_equal &= std::equal(cpu.begin() + g * slice, cpu.begin() + (g + 1) * slice, gemm.begin() + g * s.n);
    const double fp32_ms = gemm_alone_ms(x, cents, s, gknn::GemmPrecision::Fp32);
    const double tf32_ms = gemm_alone_ms(x, cents, s, gknn::GemmPrecision::Tf32);
    std::snprintf(line, sizeof line, "| %s | %.2f | %.2f | %.1fx | %s | %s | %.2f | %.2f |\n", s.what,
                  direct_ms, gemm_ms, direct_ms / gemm_ms, direct == gemm ? "yes" : "NO",
                  cpu_equal ? "yes" : "NO", fp32_ms, tf32_ms);
    report += line;
    std::fputs(line, stderr);
  }
  report += "\n" + setup_line;
  publish(report, md);
  return 0;
}
