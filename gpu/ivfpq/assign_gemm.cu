// Nearest-centroid assignment through a GEMM (the Faiss paper's k-means
// assignment), with the reference's answer (assign_gpu.h).
//
// For row x and centroid c the GEMM gives dot = x.c in float, and the proxy
// p(c) = fl(|c|^2 - 2 dot) ranks centroids as the true squared distance
// X + p(c) does (X = |x|^2). The reference ranks by d(c) =
// l2_squared_distance(c, x) in float. Per row, with C = max |c| of the group:
//   |p(c) - p_true(c)| <= E       the GEMM (any float summation order over
//                                 dim terms: g_K |x||c|), |c|^2 and the proxy's
//                                 own rounding, all bounded through C
//   |d(c) - d_true(c)| <= g_R d_true(c) + tiny    the reference's 8 lanes
// so lo(c) <= d(c) <= hi(c) with lo, hi monotone in p(c). The reference's
// winner w has d(w) <= d(c*) <= hi(c*) = U for c* of least proxy, so
// lo(w) <= U, which is p(w) <= T for one threshold T per row: every
// centroid with p(c) <= T is a candidate. Candidates get the reference
// distance and meet under nearer(), as in the direct kernel. Rows the bound
// cannot handle (NaN or infinite values, distances near float overflow)
// get T = infinity or NaN: every centroid is a candidate, the direct scan.
//
// The proxies are float and each costs one FMA and a compare; the
// reference distance of a candidate is summed by 8 threads, lane l of the
// reference's 8 lanes each, combined in the reference's tree: the same bits.
#include <cmath>

#include "gknn/error.h"
#include "ivfpq/arith.h"
#include "ivfpq/assign_gpu.h"
#include "runtime/cublas_loader.h"
#include "runtime/cuda_check.h"
#include "runtime/gemm.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kRowsPerBlock = 8;                             // a warp per row
constexpr std::int64_t kTileFloats = std::int64_t(1) << 26;  // GEMM output per tile: 256 MB

struct Bounds {
  double g_gemm;  // relative error of a float dot product over dim terms
  double g_ref;   // relative error of l2_squared_distance over dim
  double g_dbl;   // relative error of a double sum of dim float products (X, |c|^2)
  double tiny;    // absolute room for float underflow
};

Bounds bounds_for(int dim, double input_rounding) {
  const double u = 0x1p-24;
  return {(dim + 2) * u * 1.01 + input_rounding, (dim + 8) * u * 1.01, (dim + 2) * 0x1p-52,
          (dim + 8) * 0x1p-148};
}

// |c|^2 per centroid (float, rounded from double) and the largest |c|^2 of
// each group (double bits: non-negative doubles order as integers, NaN last).
__global__ void centroid_norms(const float* c, std::int64_t count, int k, int dim, float* cn2,
                               unsigned long long* group_max) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    double acc = 0;
    for (int d = 0; d < dim; ++d) acc += double(c[i * dim + d]) * c[i * dim + d];
    cn2[i] = float(acc);
    atomicMax(group_max + i / k, static_cast<unsigned long long>(__double_as_longlong(acc)));
  }
}

__device__ inline double clamp_low(double t) { return t < 0 ? 0.0 : t; }  // NaN stays NaN

struct CertifyArgs {
  const float* dots;  // rows x k: dots[i * k + c] = x_i . c
  std::int64_t rows;
  const float* x;  // row i of the group: x + i * ld
  std::int64_t ld;
  const float* centroids;  // the group's k x dim
  const float* cn2;        // the group's |c|^2
  const unsigned long long* max_cn2;
  int k, dim;
  Bounds b;
  std::int32_t* out;
};

// The candidate threshold T of a row (see the top of the file).
__device__ double threshold(const Bounds& b, double X, double C2, float p_min) {
  const double u = 0x1p-24, xn = sqrt(X), C = sqrt(C2);
  const double E =
      (2.0 * b.g_gemm * xn * C + u * (2.0 * C2 + 2.0 * xn * C) + b.g_dbl * C2) * (1 + 1e-3) + b.tiny;
  const double x_lo = X * (1 - b.g_dbl), x_hi = X * (1 + b.g_dbl);
  double U = clamp_low(x_hi + p_min + E) * (1 + b.g_ref) + b.tiny;
  if (U > 3.0e38) return INFINITY;  // the reference's float sum might overflow
  const double T = (U + b.tiny) / (1 - b.g_ref) - x_lo + E;
  return T + 0x1p-50 * (U / (1 - b.g_ref) + x_lo + E) + b.tiny;  // this arithmetic's own rounding
}

// l2_squared_distance(cv, xv, dim) by the 8 threads of a group (lane l of
// the reference's lanes each); the group's first thread gets the sum. All
// 32 threads of the warp call it.
__device__ float group_l2(const float* cv, const float* xv, int dim, bool active) {
  const int l = threadIdx.x % 8;
  float acc = 0.0f;
  if (active)
    for (int i = l; i < dim; i += 8) {
      const float d = cv[i] - xv[i];
      acc += d * d;
    }
  // ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)), as combine_lanes.
  acc += __shfl_down_sync(0xffffffffu, acc, 4, 8);
  acc += __shfl_down_sync(0xffffffffu, acc, 1, 8);
  acc += __shfl_down_sync(0xffffffffu, acc, 2, 8);
  return acc;
}

__global__ void __launch_bounds__(kRowsPerBlock * 32) certify_kernel(CertifyArgs a) {
  const std::int64_t i = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= a.rows) return;  // whole warps leave
  const float* xv = a.x + i * a.ld;
  double X = 0;
  for (int d = lane; d < a.dim; d += 32) X += double(xv[d]) * xv[d];
  for (int o = 16; o > 0; o >>= 1) X += __shfl_xor_sync(0xffffffffu, X, o);
  const float* dots = a.dots + i * a.k;
  auto proxy = [&](int c) { return __fmaf_rn(-2.0f, dots[c], a.cn2[c]); };

  float p_min = INFINITY;
  for (int c = lane; c < a.k; c += 32) p_min = fminf(p_min, proxy(c));  // fminf skips NaN
  for (int o = 16; o > 0; o >>= 1) p_min = fminf(p_min, __shfl_xor_sync(0xffffffffu, p_min, o));
  const double T = threshold(a.b, X, __longlong_as_double(static_cast<long long>(*a.max_cn2)), p_min);

  float best = 0.0f;
  int at = -1;
  for (int c0 = 0; c0 < a.k; c0 += 32) {
    const int c = c0 + lane;
    unsigned mask = __ballot_sync(0xffffffffu, c < a.k && !(double(proxy(c)) > T));  // NaN: a candidate
    while (mask) {  // four candidates at a time, one per group of 8 threads
      int mine = -1;
      for (int g = 0; g < 4 && mask; ++g, mask &= mask - 1)
        if (g == lane / 8) mine = c0 + __ffs(mask) - 1;
      const float d = group_l2(a.centroids + std::int64_t(mine < 0 ? 0 : mine) * a.dim, xv, a.dim, mine >= 0);
      if (lane % 8 == 0 && mine >= 0 && nearer(d, mine, best, at)) best = d, at = mine;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float od = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, at, o);
    if (nearer(od, oi, best, at)) best = od, at = oi;
  }
  if (lane == 0) a.out[i] = at;
}

// Where the GEMM beats the direct kernel (bench/kernels/bench_assign.cu on
// the H200: coarse shapes of dim 96..784 gain 3-4x, PQ sub-spaces of dim 4
// and 16 with 256 codewords 1.1-1.3x); smaller shapes are not measured.
bool gemm_pays(const Groups& s) { return s.dim >= 4 && s.k >= 64 && s.n >= 1024; }

}  // namespace

void nearest_gemm_gpu(const Gemm& gemm, int slot, const Groups& s, const float* x, const float* centroids,
                      std::int32_t* out, cudaStream_t stream) {
  if (s.n == 0) return;
  const std::int64_t tile = std::min<std::int64_t>(s.n, std::max<std::int64_t>(1, kTileFloats / s.k));
  const std::int64_t count = std::int64_t(s.groups) * s.k;
  AsyncBuffer<float> dots(std::size_t(tile) * s.k, stream), cn2(count, stream);
  AsyncBuffer<unsigned long long> max_cn2(s.groups, stream);
  GKNN_CUDA(cudaMemsetAsync(max_cn2.get(), 0, sizeof(unsigned long long) * s.groups, stream));
  centroid_norms<<<grid_for(count, 256), 256, 0, stream>>>(centroids, count, s.k, s.dim, cn2.get(),
                                                           max_cn2.get());
  GKNN_CUDA(cudaGetLastError());
  const Bounds b = bounds_for(s.dim, gemm.input_rounding());
  for (int g = 0; g < s.groups; ++g) {
    const float* cg = centroids + std::int64_t(g) * s.k * s.dim;
    for (std::int64_t r0 = 0; r0 < s.n; r0 += tile) {
      const std::int64_t rows = std::min(tile, s.n - r0);
      const float* xg = x + r0 * s.ld + std::int64_t(g) * s.dim;
      gemm.run(slot, stream, cg, s.k, s.dim, xg, int(rows), int(s.ld), s.dim, dots.get(), s.k);
      const CertifyArgs a{dots.get(),
                          rows,
                          xg,
                          s.ld,
                          cg,
                          cn2.get() + std::int64_t(g) * s.k,
                          max_cn2.get() + g,
                          s.k,
                          s.dim,
                          b,
                          out + std::int64_t(g) * s.n + r0};
      certify_kernel<<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
          a);
      GKNN_CUDA(cudaGetLastError());
    }
  }
}

// Forced, the GEMM must be there from the start; Auto loads cuBLAS (a large
// library) only once a call would take the GEMM.
DeviceAssign::DeviceAssign(AssignPath path) : path_(path) {
  if (path != AssignPath::Gemm) return;
  const char* why = "";
  const Cublas* blas = load_cublas(&why);
  if (!blas) throw Error(ErrorCode::NoDevice, std::string("GEMM assignment: ") + why);
  gemm_ = std::make_unique<Gemm>(blas, GemmPrecision::Fp32);
}

DeviceAssign::~DeviceAssign() = default;

void DeviceAssign::nearest(const Groups& s, const float* x, const float* centroids, std::int32_t* out,
                           cudaStream_t stream, int slot) {
  if (path_ == AssignPath::Auto && !gemm_ && gemm_pays(s))
    if (const Cublas* blas = load_cublas()) gemm_ = std::make_unique<Gemm>(blas, GemmPrecision::Fp32);
  const bool gemm = gemm_ && s.k > 0 && (path_ == AssignPath::Gemm || gemm_pays(s));
  if (gemm)
    nearest_gemm_gpu(*gemm_, slot, s, x, centroids, out, stream);
  else
    nearest_direct_gpu(s, x, centroids, out, stream);
}

}  // namespace gknn::ivfpq
