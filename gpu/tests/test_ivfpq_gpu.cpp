// IVF-PQ on the GPU against the CPU reference: training, encoding and
// search must be equal bit for bit (fp32 LUTs), not merely close.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gpu_env.h"
#include "ivfpq/assign.h"
#include "runtime/cublas_loader.h"
#include "ivfpq_data.h"

namespace {

using gknn::Metric;
using gknn::ivfpq::Params;

std::string metric_name(Metric m) {
  return m == Metric::L2 ? "L2" : m == Metric::InnerProduct ? "InnerProduct" : "Cosine";
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

struct TrainCase {
  std::int64_t n;
  int dim, m, nbits, lists;
  Metric metric;
};

void PrintTo(const TrainCase& c, std::ostream* os) {
  *os << c.n << "x" << c.dim << " m " << c.m << " nbits " << c.nbits << " lists " << c.lists << " "
      << metric_name(c.metric);
}

class IvfpqGpuTrain : public ::testing::TestWithParam<TrainCase> {};

// Awkward sizes. The GEMM path assigns where it pays (64+ centroids,
// 1024+ rows, dim 4+: the coarse steps of the 96-dim cases, most PQ steps),
// the direct kernel elsewhere.
TEST_P(IvfpqGpuTrain, TrainAndEncodeEqualCpu) {
  GKNN_NEED_GPU();
  const TrainCase c = GetParam();
  Params p;
  p.dim = c.dim, p.lists = c.lists, p.m = c.m, p.nbits = c.nbits, p.metric = c.metric;
  const std::vector<float> x = gknn::test::clustered(c.n, c.dim, 25, 0.4f, unsigned(c.n + c.dim));
  const std::int64_t sample = c.n * 2 / 3 + 1;
  const auto cpu = gknn::ivfpq::train(p, x.data(), sample, gknn::ivfpq::kCpu);
  const auto gpu = gknn::ivfpq::train(p, x.data(), sample, 0);
  EXPECT_EQ(cpu.params.lists, gpu.params.lists);
  EXPECT_TRUE(same_bits(cpu.centroids, gpu.centroids));
  EXPECT_TRUE(same_bits(cpu.codebooks, gpu.codebooks));

  const int cs = gknn::ivfpq::code_size(p);
  std::vector<std::int32_t> lc(c.n), lg(c.n);
  std::vector<std::uint8_t> cc(c.n * cs), cg(c.n * cs);
  gknn::ivfpq::encode(cpu, x.data(), c.n, gknn::ivfpq::kCpu, lc.data(), cc.data());
  gknn::ivfpq::encode(cpu, x.data(), c.n, 0, lg.data(), cg.data());
  EXPECT_EQ(lc, lg);
  EXPECT_EQ(cc, cg);
}

INSTANTIATE_TEST_SUITE_P(Shapes, IvfpqGpuTrain,
                         ::testing::Values(TrainCase{1003, 3, 3, 4, 17, Metric::L2},
                                           TrainCase{2011, 17, 17, 5, 40, Metric::Cosine},
                                           TrainCase{3001, 96, 12, 8, 150, Metric::InnerProduct},
                                           TrainCase{1501, 96, 32, 5, 211, Metric::L2},
                                           TrainCase{257, 17, 1, 8, 300, Metric::L2},
                                           // too wide to stage rows in shared memory
                                           TrainCase{700, 3000, 10, 4, 20, Metric::L2}),
                         [](const auto& info) {
                           const TrainCase& c = info.param;
                           return "n" + std::to_string(c.n) + "_dim" + std::to_string(c.dim) + "_m" +
                                  std::to_string(c.m) + "_nbits" + std::to_string(c.nbits) + "_" +
                                  metric_name(c.metric);
                         });

struct AssignCase {
  std::int64_t n;
  int dim, k, groups;
};

void PrintTo(const AssignCase& c, std::ostream* os) {
  *os << c.n << " rows, " << c.groups << " groups of dim " << c.dim << ", k " << c.k;
}

using gknn::ivfpq::AssignPath;

class IvfpqGpuAssign : public ::testing::TestWithParam<std::tuple<AssignCase, AssignPath>> {};

// The GEMM path needs cuBLAS, which is loaded at run time.
#define NEED_PATH(path)                                                                                \
  do {                                                                                                 \
    const char* why = "";                                                                              \
    if ((path) == AssignPath::Gemm && !gknn::load_cublas(&why) && !std::getenv("GKNN_REQUIRE_CUBLAS")) \
      GTEST_SKIP() << why;                                                                             \
  } while (0)

// Both GPU paths against nearest_cpu on awkward shapes: PQ sub-spaces of
// dsub 1..17 and 16..256 codewords, coarse-like and too-wide-to-stage
// groups, fewer centroids than warps, row counts off every tile size, rows
// padded (ld > groups x dim). Values on a coarse grid and a repeated
// centroid make exact ties (many GEMM candidates per row); NaN and infinity
// sit in some rows.
TEST_P(IvfpqGpuAssign, EqualsCpu) {
  GKNN_NEED_GPU();
  const auto [c, path] = GetParam();
  NEED_PATH(path);
  const std::int64_t ld = std::int64_t(c.groups) * c.dim + 1;
  std::mt19937 rng(unsigned(c.n * 31 + c.dim * 7 + c.k));
  std::uniform_int_distribution<int> grid(-4, 4);
  std::vector<float> x(c.n * ld), cents(std::size_t(c.groups) * c.k * c.dim);
  for (auto& v : x) v = 0.5f * float(grid(rng));
  x[std::min<std::int64_t>(5, c.n - 1) * ld] = NAN;
  x[(c.n - 1) * ld + ld - 2] = INFINITY;
  gknn::ivfpq::Assigner dev(x.data(), c.n, ld, 0, path);
  for (int round = 0; round < 2; ++round) {  // new centroids, same resident rows
    for (auto& v : cents) v = 0.5f * float(grid(rng));
    if (c.k > 3)
      for (int g = 0; g < c.groups; ++g)
        std::copy_n(cents.begin() + (std::size_t(g) * c.k + 1) * c.dim, c.dim,
                    cents.begin() + (std::size_t(g) * c.k + c.k - 1) * c.dim);
    std::vector<std::int32_t> want(c.groups * c.n), got(c.groups * c.n, -7);
    gknn::ivfpq::nearest_cpu({c.n, ld, c.dim, c.k, c.groups}, x.data(), cents.data(), want.data());
    dev.nearest(cents.data(), c.k, c.dim, c.groups, got.data());
    ASSERT_EQ(want, got) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IvfpqGpuAssign,
    ::testing::Combine(::testing::Values(AssignCase{1, 4, 256, 32}, AssignCase{33, 1, 16, 3},
                                         AssignCase{1000, 3, 32, 5}, AssignCase{70001, 4, 256, 32},
                                         AssignCase{4097, 8, 64, 16}, AssignCase{2049, 17, 128, 7},
                                         AssignCase{999, 17, 256, 1}, AssignCase{5000, 1, 256, 2},
                                         AssignCase{3001, 128, 1024, 1}, AssignCase{20011, 96, 300, 1},
                                         AssignCase{100, 5, 3, 4}, AssignCase{300, 3000, 20, 1},
                                         AssignCase{77, 16000, 5, 1}),
                       ::testing::Values(AssignPath::Direct, AssignPath::Gemm)),
    [](const auto& info) {
      const AssignCase& c = std::get<0>(info.param);
      return "n" + std::to_string(c.n) + "_dim" + std::to_string(c.dim) + "_k" + std::to_string(c.k) +
             "_groups" + std::to_string(c.groups) +
             (std::get<1>(info.param) == AssignPath::Gemm ? "_gemm" : "_direct");
    });

// Continuous data far from the origin: |x|^2 is ~10^4 times the distances
// that decide, so the GEMM's proxy |c|^2 - 2 x.c loses most of its digits
// and the bound must keep every centroid it cannot rule out. Centroids are
// rows plus tiny offsets (near ties), as late k-means iterations see.
TEST(IvfpqGpu, GemmAssignmentFarFromOriginEqualsCpu) {
  GKNN_NEED_GPU();
  NEED_PATH(AssignPath::Gemm);
  const std::int64_t n = 30011;
  const int dim = 128, k = 1000;
  std::mt19937 rng(77);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> x(n * dim), cents(std::size_t(k) * dim);
  for (auto& v : x) v = 100.0f + noise(rng);
  for (int c = 0; c < k; ++c)
    for (int d = 0; d < dim; ++d)
      cents[std::size_t(c) * dim + d] = x[std::size_t(c) * 7 * dim + d] + 1e-3f * noise(rng);
  std::vector<std::int32_t> want(n), got(n, -7);
  gknn::ivfpq::nearest_cpu({n, dim, dim, k, 1}, x.data(), cents.data(), want.data());
  gknn::ivfpq::Assigner dev(x.data(), n, dim, 0, AssignPath::Gemm);
  dev.nearest(cents.data(), k, dim, 1, got.data());
  EXPECT_EQ(want, got);
}

// Three encode batches in flight over two streams: the same lists, codes and
// progress calls as the CPU; a cancel stops it cleanly.
TEST(IvfpqGpu, PipelinedEncodeEqualsCpu) {
  GKNN_NEED_GPU();
  Params p;
  p.dim = 8, p.lists = 50, p.m = 4, p.nbits = 6, p.metric = Metric::Cosine;
  const std::int64_t n = 150001;
  const std::vector<float> x = gknn::test::clustered(n, p.dim, 30, 0.3f, 12);
  const auto q = gknn::ivfpq::train(p, x.data(), 5000, gknn::ivfpq::kCpu);
  const int cs = gknn::ivfpq::code_size(p);
  using Call = std::tuple<gknn::ivfpq::Phase, std::int64_t, std::int64_t>;
  std::vector<Call> calls_cpu, calls_gpu;
  std::vector<std::int32_t> lc(n), lg(n);
  std::vector<std::uint8_t> cc(n * cs), cg(n * cs);
  gknn::ivfpq::encode(q, x.data(), n, gknn::ivfpq::kCpu, lc.data(), cc.data(),
                      [&](gknn::ivfpq::Phase ph, std::int64_t d, std::int64_t t) {
                        calls_cpu.emplace_back(ph, d, t);
                        return true;
                      });
  gknn::ivfpq::encode(q, x.data(), n, 0, lg.data(), cg.data(),
                      [&](gknn::ivfpq::Phase ph, std::int64_t d, std::int64_t t) {
                        calls_gpu.emplace_back(ph, d, t);
                        return true;
                      });
  EXPECT_EQ(lc, lg);
  EXPECT_EQ(cc, cg);
  EXPECT_EQ(calls_cpu, calls_gpu);
  EXPECT_EQ(calls_gpu.size(), 3u);
  try {
    gknn::ivfpq::encode(q, x.data(), n, 0, lg.data(), cg.data(),
                        [](gknn::ivfpq::Phase, std::int64_t, std::int64_t) { return false; });
    ADD_FAILURE() << "not cancelled";
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::Cancelled);
  }
}

struct SearchCase {
  Metric metric;
  int nbits;
  std::int64_t encoded;  // rows in the image (few: many empty lists)
};

void PrintTo(const SearchCase& c, std::ostream* os) {
  *os << metric_name(c.metric) << " nbits " << c.nbits << " rows " << c.encoded;
}

class IvfpqGpuSearch : public ::testing::TestWithParam<SearchCase> {};

TEST_P(IvfpqGpuSearch, EqualsCpu) {
  GKNN_NEED_GPU();
  const SearchCase c = GetParam();
  const int dim = 40;
  Params p;
  p.dim = dim, p.lists = 30, p.m = 10, p.nbits = c.nbits, p.metric = c.metric;
  std::vector<float> x = gknn::test::clustered(c.encoded + 300, dim, 20, 0.4f, 3);
  const std::vector<float> queries(x.end() - 300 * dim, x.end());
  x.resize(c.encoded * dim);
  const std::vector<float> sample = gknn::test::clustered(2000, dim, 20, 0.4f, 3);
  const auto q = gknn::ivfpq::train(p, sample.data(), 2000, gknn::ivfpq::kCpu);
  std::vector<std::int32_t> list_of(c.encoded);
  std::vector<std::uint8_t> codes(c.encoded * gknn::ivfpq::code_size(p));
  gknn::ivfpq::encode(q, x.data(), c.encoded, gknn::ivfpq::kCpu, list_of.data(), codes.data());
  const auto image = gknn::test::make_image(q, list_of, codes);
  const gknn::ivfpq::DeviceImage dev(image, 0);
  EXPECT_FALSE(dev.fp16_lut());
  EXPECT_GE(dev.device_bytes(), image.codes.size() + 8 * image.ids.size());
  for (std::int64_t nq : {1, 7, 300})
    for (int k : {1, 10, 100, 2500})
      for (int probes : {1, 5, 30, 64}) {
        std::vector<std::int64_t> ic(nq * k), ig(nq * k, -7);
        std::vector<float> dc(nq * k), dg(nq * k);
        gknn::ivfpq::search_cpu(image, queries.data(), nq, {k, probes}, ic.data(), dc.data());
        dev.search(queries.data(), nq, {k, probes}, ig.data(), dg.data());
        EXPECT_EQ(ic, ig) << "nq " << nq << " k " << k << " probes " << probes;
        EXPECT_TRUE(same_bits(dc, dg)) << "nq " << nq << " k " << k << " probes " << probes;
      }
}

INSTANTIATE_TEST_SUITE_P(Metrics, IvfpqGpuSearch,
                         ::testing::Values(SearchCase{Metric::L2, 8, 5000},
                                           SearchCase{Metric::InnerProduct, 6, 5000},
                                           SearchCase{Metric::Cosine, 4, 5000},
                                           SearchCase{Metric::L2, 7, 20}),
                         [](const auto& info) {
                           return metric_name(info.param.metric) + "_nbits" +
                                  std::to_string(info.param.nbits) + "_rows" +
                                  std::to_string(info.param.encoded);
                         });

// m x 2^nbits = 65536 fp32 entries (256 KiB) exceed shared memory: fp16
// LUTs, so results are close to the CPU's rather than equal.
TEST(IvfpqGpu, Fp16LookupTablesStayClose) {
  GKNN_NEED_GPU();
  Params p;
  p.dim = 512, p.lists = 8, p.m = 256, p.nbits = 8, p.kmeans_iters = 4;
  std::vector<float> x = gknn::test::clustered(3000 + 20, p.dim, 10, 0.5f, 8);
  const std::vector<float> queries(x.end() - 20 * p.dim, x.end());
  x.resize(3000 * p.dim);
  const auto image = gknn::test::build_index(p, x, 3000, 0);
  const gknn::ivfpq::DeviceImage dev(image, 0);
  ASSERT_TRUE(dev.fp16_lut());
  const int k = 20;
  std::vector<std::int64_t> ic(20 * k), ig(20 * k);
  std::vector<float> dc(20 * k), dg(20 * k);
  gknn::ivfpq::search_cpu(image, queries.data(), 20, {k, 4}, ic.data(), dc.data());
  dev.search(queries.data(), 20, {k, 4}, ig.data(), dg.data());
  EXPECT_GE(gknn::test::recall(ic, ig, k), 0.9);
  for (int i = 0; i < 20 * k; ++i) EXPECT_NEAR(dg[i], dc[i], 1e-2 * dc[i]) << i;
}

TEST(IvfpqGpu, RejectsABadOrdinalAndMovesCleanly) {
  GKNN_NEED_GPU();
  Params p;
  p.dim = 8, p.lists = 4, p.m = 4, p.nbits = 4;
  const std::vector<float> x = gknn::test::clustered(200, 8, 4, 0.3f, 5);
  const auto image = gknn::test::build_index(p, x, 200, gknn::ivfpq::kCpu);
  try {
    gknn::ivfpq::DeviceImage bad(image, 1 << 20);
    ADD_FAILURE() << "accepted ordinal 2^20";
  } catch (const gknn::Error& e) {
    EXPECT_EQ(e.code(), gknn::ErrorCode::NoDevice);
  }
  gknn::ivfpq::DeviceImage a(image, 0);
  gknn::ivfpq::DeviceImage b = std::move(a);
  std::vector<std::int64_t> ids(5), cpu_ids(5);
  std::vector<float> dist(5), cpu_dist(5);
  b.search(x.data(), 1, {5, 4}, ids.data(), dist.data());
  gknn::ivfpq::search_cpu(image, x.data(), 1, {5, 4}, cpu_ids.data(), cpu_dist.data());
  EXPECT_EQ(ids, cpu_ids);
  EXPECT_EQ(a.device_bytes(), 0u);
}

}  // namespace
