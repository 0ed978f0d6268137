// Exact kNN benchmark (issue 3, 7d): base 1M x 128 float32 (a Gaussian
// mixture), 10000 queries, k = 100, L2.
//
//   gknn_bench_knn [n=1000000] [nq=10000] [results.md]
//   gknn_bench_knn sweep [results.md]   the chooser's measurement: the fused
//       kernel against the GEMM path over dimensions and query counts
//   gknn_bench_knn resident [results.md]   the same two over a base already
//       on the device (a resident image's exact search: no copy of the base
//       in the timing), k = 10, 1-128 queries
//
// Side by side in one run: gknn's exact_knn_gpu in each GEMM precision (the
// results must be identical: every mode re-ranks with exact float32
// distances), the host-to-device copy it includes, and the GEMM alone
// (cuBLAS, same shapes, fp32 and TF32). A sample of queries is checked
// against the CPU reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/knn.h"
#include "gknn/runtime.h"
#include "runtime/cublas_loader.h"
#include "runtime/cuda_check.h"
#include "bench_common.cuh"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Fn>
double median_ms(Fn fn, int reps) {
  std::vector<double> t;
  fn();  // warm-up
  for (int r = 0; r < reps; ++r) {
    double a = now_ms();
    fn();
    GKNN_CUDA(cudaDeviceSynchronize());
    t.push_back(now_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Gaussian mixture: 1000 centres (spread 4) drawn once, rows = a random
// centre + unit noise. One normal distribution serves centres and rows, so a
// caller drawing everything from one generator gets one reproducible stream.
struct Mixture {
  int dim;
  std::normal_distribution<float> g{0.0f, 1.0f};
  std::vector<float> centres;
  Mixture(int d, std::mt19937& rng) : dim(d), centres(1000 * d) {
    for (auto& c : centres) c = 4.0f * g(rng);
  }
  std::vector<float> rows(std::int64_t n, std::mt19937& rng) {
    std::vector<float> v(n * dim);
    for (std::int64_t r = 0; r < n; ++r) {
      const float* c = &centres[(rng() % 1000) * dim];
      for (int i = 0; i < dim; ++i) v[r * dim + i] = c[i] + g(rng);
    }
    return v;
  }
};

// One request over `base` (host or device memory, as the functions timed
// take it) for the `nq` rows of `queries`.
gknn::KnnRequest request(const float* base, std::int64_t n, const std::vector<float>& queries,
                         std::int64_t nq, int dim, int k) {
  gknn::KnnRequest req;
  req.base = base;
  req.n = n;
  req.queries = queries.data();
  req.nq = nq;
  req.dim = dim;
  req.k = k;
  return req;
}

// One contender's median time and its answer.
struct Timed {
  double ms;
  std::vector<std::int64_t> ids;
  std::vector<double> dist;
};
template <typename Fn>
Timed timed(const gknn::KnnRequest& req, Fn fn, int reps) {
  Timed t{0, std::vector<std::int64_t>(req.nq * req.k), std::vector<double>(req.nq * req.k)};
  t.ms = median_ms([&] { fn(req, t.ids.data(), t.dist.data()); }, reps);
  return t;
}
bool same(const Timed& a, const Timed& b) { return a.ids == b.ids && a.dist == b.dist; }

// The fused call against the GEMM call on one request: their median times
// over `reps` and whether both gave the same ids and distances.
struct Duel {
  double fused_ms, gemm_ms;
  bool same;
};
template <typename Fused, typename Gemm>
Duel duel(const gknn::KnnRequest& req, Fused fused, Gemm gemm, int reps) {
  const Timed a = timed(req, fused, reps), b = timed(req, gemm, reps);
  return {a.ms, b.ms, same(a, b)};
}

// Fused kernel vs GEMM path, 1M base vectors, k = 100, L2, for the public
// calls, which upload the base: both include the same host-to-device copy.
int sweep(const char* md, const std::string& device) {
  const std::int64_t n = 1000000;
  const int k = 100;
  std::string table =
      "| dim | nq | fused ms | gemm ms | fused / gemm | same ids |\n|---:|---:|---:|---:|---:|---|\n";
  char line[256];
  int mismatches = 0;
  for (int dim : {4, 8, 16, 32, 48, 64, 128}) {
    std::mt19937 rng(dim), centre_rng(123);
    Mixture mix(dim, centre_rng);
    const std::vector<float> base = mix.rows(n, rng);
    for (std::int64_t nq : {1, 100, 10000}) {
      const std::vector<float> queries = mix.rows(nq, rng);
      const Duel d = duel(
          request(base.data(), n, queries, nq, dim, k),
          [](const gknn::KnnRequest& r, std::int64_t* ids, double* dist) {
            gknn::exact_knn_gpu_fused(r, 0, ids, dist);
          },
          [](const gknn::KnnRequest& r, std::int64_t* ids, double* dist) {
            gknn::exact_knn_gpu_gemm(r, 0, ids, dist);
          },
          3);
      mismatches += !d.same;
      std::snprintf(line, sizeof line, "| %d | %lld | %.2f | %.2f | %.2f | %s |\n", dim, (long long)nq,
                    d.fused_ms, d.gemm_ms, d.fused_ms / d.gemm_ms, d.same ? "yes" : "NO");
      std::fputs(line, stderr);
      table += line;
    }
  }
  std::string report =
      "# Chooser: fused distance+select vs GEMM path, base 1M (Gaussian mixture), k = 100, L2\n\n"
      "- device: " +
      device + "\n- date: " + today() +
      "\n- command: gknn_bench_knn sweep\n- both include the base and query copy to the device\n"
      "- shapes whose ids or distances differ between the two: " +
      std::to_string(mismatches) + "\n\n" + table;
  publish(report, md);
  return mismatches ? 2 : 0;
}

// The exact kernels over a resident base (the service's exact search): the
// time of one call for 1-128 queries, the base on the device and the GEMM's
// base half made once (as a resident image keeps it). Where kScanMaxQueries
// comes from.
int resident(const char* md, const std::string& device) {
  const int k = 10;
  std::string table =
      "| n | dim | nq | scan ms | fused ms | gemm ms | scan / fused | scan / gemm | same ids "
      "|\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  char line[256];
  int mismatches = 0;
  for (auto [n, dim] : {std::pair<std::int64_t, int>{1000000, 128}, {60000, 784}}) {
    std::mt19937 rng(dim), centre_rng(123);
    Mixture mix(dim, centre_rng);
    const std::vector<float> base = mix.rows(n, rng);
    gknn::DeviceBuffer<float> d_base(n * dim);
    GKNN_CUDA(cudaMemcpy(d_base.get(), base.data(), sizeof(float) * n * dim, cudaMemcpyHostToDevice));
    const gknn::GemmBase prepared(d_base.get(), n, dim, gknn::Metric::L2, 0);
    for (std::int64_t nq : {1, 2, 4, 8, 12, 16, 24, 32, 64, 128}) {
      const std::vector<float> queries = mix.rows(nq, rng);
      const gknn::KnnRequest req = request(d_base.get(), n, queries, nq, dim, k);
      const Timed scan = timed(
          req,
          [](const gknn::KnnRequest& r, std::int64_t* ids, double* dist) {
            gknn::exact_knn_resident_scan(r, 0, ids, dist);
          },
          20);
      const Timed fused = timed(
          req,
          [](const gknn::KnnRequest& r, std::int64_t* ids, double* dist) {
            gknn::exact_knn_resident_fused(r, 0, ids, dist);
          },
          20);
      const Timed gemm = timed(
          req,
          [&](const gknn::KnnRequest& r, std::int64_t* ids, double* dist) {
            gknn::exact_knn_resident_gemm(r, 0, ids, dist, &prepared);
          },
          20);
      const bool all_same = same(scan, fused) && same(scan, gemm);
      mismatches += !all_same;
      std::snprintf(line, sizeof line, "| %lld | %d | %lld | %.3f | %.3f | %.3f | %.2f | %.2f | %s |\n",
                    (long long)n, dim, (long long)nq, scan.ms, fused.ms, gemm.ms, scan.ms / fused.ms,
                    scan.ms / gemm.ms, all_same ? "yes" : "NO");
      std::fputs(line, stderr);
      table += line;
    }
  }
  publish("# Exact kNN over a resident base: scan, fused and GEMM paths, k = 10, L2\n\n- device: " + device +
              "\n- date: " + today() + "\n- command: gknn_bench_knn resident\n- shapes that differ: " +
              std::to_string(mismatches) + "\n\n" + table,
          md);
  return mismatches ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sweep" || mode == "resident") {
    auto devices = gknn::list_devices();
    if (devices.empty() || !gknn::load_cublas()) {
      std::fprintf(stderr, "needs a GPU and libcublas\n");
      return 1;
    }
    const char* md = argc > 2 ? argv[2] : nullptr;
    return mode == "sweep" ? sweep(md, devices[0].name) : resident(md, devices[0].name);
  }
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const std::int64_t nq = argc > 2 ? std::atoll(argv[2]) : 10000;
  const char* md = argc > 3 ? argv[3] : nullptr;
  const int dim = 128, k = 100;
  auto devices = gknn::list_devices();
  const gknn::Cublas* blas = gknn::load_cublas();
  if (devices.empty() || !blas) {
    std::fprintf(stderr, "needs a GPU and libcublas\n");
    return 1;
  }
  std::mt19937 rng(123);
  Mixture mix(dim, rng);
  const std::vector<float> base = mix.rows(n, rng), queries = mix.rows(nq, rng);

  gknn::KnnRequest req;
  req.base = base.data();
  req.n = n;
  req.queries = queries.data();
  req.nq = nq;
  req.dim = dim;
  req.k = k;
  req.metric = gknn::Metric::L2;

  std::string table =
      "| mode | ms | vs GEMM alone (same precision) | ids equal to fp32 run |\n|---|---:|---:|---|\n";
  std::vector<std::int64_t> ref_ids(nq * k), ids(nq * k);
  std::vector<double> ref_d(nq * k), dist(nq * k);
  char line[256];

  // The copy every call makes (base and queries to the device).
  gknn::DeviceBuffer<float> d_base(n * dim), d_q(nq * dim);
  double h2d = median_ms(
      [&] {
        GKNN_CUDA(cudaMemcpy(d_base.get(), base.data(), 4 * n * dim, cudaMemcpyHostToDevice));
        GKNN_CUDA(cudaMemcpy(d_q.get(), queries.data(), 4 * nq * dim, cudaMemcpyHostToDevice));
      },
      3);

  // The GEMM alone: nq x n x 136 (the augmented dimension), fp32 and TF32,
  // in the tiles gknn uses (32768 base rows, all queries).
  cublasHandle_t h;
  blas->create(&h);
  const int dp = 136;
  const std::int64_t tile = 32768;
  gknn::DeviceBuffer<float> a(n * dp), b(nq * dp), c(nq * tile);
  GKNN_CUDA(cudaMemset(a.get(), 0, 4 * n * dp));
  GKNN_CUDA(cudaMemset(b.get(), 0, 4 * nq * dp));
  auto gemm_all = [&](cublasComputeType_t ct) {
    const float one = 1, zero = 0;
    for (std::int64_t b0 = 0; b0 < n; b0 += tile) {
      int cols = int(std::min(tile, n - b0));
      blas->gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, cols, int(nq), dp, &one, a.get() + b0 * dp, CUDA_R_32F, dp,
                    b.get(), CUDA_R_32F, dp, &zero, c.get(), CUDA_R_32F, int(tile), ct, CUBLAS_GEMM_DEFAULT);
    }
  };
  double gemm_fp32 = median_ms([&] { gemm_all(CUBLAS_COMPUTE_32F_PEDANTIC); }, 3);
  double gemm_tf32 = median_ms([&] { gemm_all(CUBLAS_COMPUTE_32F_FAST_TF32); }, 3);
  blas->destroy(h);

  int mismatched_modes = 0;
  for (auto p : {gknn::GemmPrecision::Fp32, gknn::GemmPrecision::Tf32, gknn::GemmPrecision::Bf16}) {
    req.precision = p;
    std::vector<std::int64_t>& out = p == gknn::GemmPrecision::Fp32 ? ref_ids : ids;
    std::vector<double>& od = p == gknn::GemmPrecision::Fp32 ? ref_d : dist;
    double ms = median_ms([&] { gknn::exact_knn_gpu(req, 0, out.data(), od.data()); }, 3);
    bool same = p == gknn::GemmPrecision::Fp32 || ids == ref_ids;
    if (!same) ++mismatched_modes;
    const char* name = p == gknn::GemmPrecision::Fp32   ? "fp32"
                       : p == gknn::GemmPrecision::Tf32 ? "tf32"
                                                        : "bf16";
    double alone = p == gknn::GemmPrecision::Fp32 ? gemm_fp32 : gemm_tf32;
    std::snprintf(line, sizeof line,
                  "| gknn %s (incl. %.1f ms copy) | %.1f | %.2fx (%.2fx without the copy) | %s |\n", name,
                  h2d, ms, ms / alone, (ms - h2d) / alone, same ? "yes" : "NO");
    table += line;
  }
  std::snprintf(line, sizeof line,
                "| cuBLAS GEMM alone fp32 | %.1f | 1 | |\n| cuBLAS GEMM alone TF32 | %.1f | 1 | |\n",
                gemm_fp32, gemm_tf32);
  table += line;

  // CPU reference on a sample of queries.
  const std::int64_t sample = std::min<std::int64_t>(nq, 16);
  gknn::KnnRequest cpu = req;
  cpu.nq = sample;
  std::vector<std::int64_t> cpu_ids(sample * k);
  std::vector<double> cpu_d(sample * k);
  gknn::exact_knn_cpu(cpu, cpu_ids.data(), cpu_d.data());
  int cpu_mismatch = 0;
  for (std::int64_t i = 0; i < sample * k; ++i)
    cpu_mismatch += cpu_ids[i] != ref_ids[i] || cpu_d[i] != ref_d[i];

  std::string report;
  std::snprintf(
      line, sizeof line,
      "# Exact kNN, base %lld x %d (Gaussian mixture), %lld queries, k = %d, L2\n\n- device: %s\n- date: %s\n"
      "- command: gknn_bench_knn %lld %lld\n- CPU reference on %lld queries: %d mismatching entries; "
      "precision modes differing from fp32: %d\n\n",
      (long long)n, dim, (long long)nq, k, devices[0].name.c_str(), today().c_str(), (long long)n,
      (long long)nq, (long long)sample, cpu_mismatch, mismatched_modes);
  report = line + table;
  publish(report, md);
  return cpu_mismatch || mismatched_modes ? 2 : 0;
}
