// GpuTopK over kept batches, as the GPU service ranks a table cache hit:
// ROWS rows of a tweets-like table (bench/topk's shape) kept on the device
// in batches of the service's capacity, then ranked by a fresh TopK for
// each query, REPS times; the median wall time and the TopK's GPU time. The
// floor beside it: the bytes the program's columns take, read once at the
// device's copy bandwidth (a device-to-device copy of as many bytes). So
// the per-row cost of the GPU program can be measured, and profiled with
// ncu (`--kernel-name regex:row_words`), without PostgreSQL.
//
//   gknn_bench_expr_topk [ROWS] [REPS] [OUT.md]     (10000000, 5)
//
// Queries (k = 50): Q1 WHERE tweet_time < cut(half) ORDER BY retweet_count
// DESC; Q2 ORDER BY retweet_count + 0.5 * likes_count DESC; Q3 WHERE lang
// IN (1, 2) ORDER BY retweet_count DESC; V ORDER BY emb <-> q (128-d,
// ROWS / 10 rows).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../../gpu/tests/expr_builder.h"
#include "gknn/expr.h"

using namespace gknn::expr;
using gknn::test::Asm;

namespace {

// The service's batch size for these columns (topk_service_capacity).
std::int64_t capacity_for(const std::vector<ColumnSpec>& cols) {
  std::int64_t row = 8;
  for (const ColumnSpec& c : cols) row += 1 + (c.type == Type::Vector ? 4 + 4 * std::int64_t(c.dim) : 8);
  return std::max<std::int64_t>(1024,
                                std::min<std::int64_t>(std::int64_t(1) << 18, (std::int64_t(8) << 20) / row));
}

// Columns: 0 tweet_time (timestamp), 1 retweet_count (int4), 2 likes_count
// (int4), 3 lang (int2); or 0 emb (vector(128)).
const std::vector<ColumnSpec> kTweets = {
    {Type::Timestamp, 0}, {Type::I32, 0}, {Type::I32, 0}, {Type::I16, 0}};
const std::vector<ColumnSpec> kVectors = {{Type::Vector, 128}};

void fill_tweets(BatchView& b, std::int64_t n, std::int64_t first, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  b.n = n;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t id = first + r;
    b.row_ids[r] =
        make_row_id(static_cast<std::uint32_t>(id / 200), static_cast<std::uint16_t>(id % 200 + 1));
    static_cast<std::int64_t*>(b.column[0].data)[r] = id * 3000000;  // 3 s apart, in microseconds
    static_cast<std::int32_t*>(b.column[1].data)[r] = static_cast<std::int32_t>(std::pow(u(rng), 8) * 100000);
    static_cast<std::int32_t*>(b.column[2].data)[r] = static_cast<std::int32_t>(std::pow(u(rng), 6) * 500000);
    static_cast<std::int16_t*>(b.column[3].data)[r] = static_cast<std::int16_t>(u(rng) * 40);
    for (int c = 0; c < 4; ++c) b.column[c].nulls[r] = 0;
  }
}

void fill_dim(BatchView& b, std::int64_t n, std::int64_t first, std::mt19937_64& rng, int dim) {
  std::uniform_real_distribution<float> u(0, 1);
  b.n = n;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t id = first + r;
    b.row_ids[r] = make_row_id(static_cast<std::uint32_t>(id / 15), static_cast<std::uint16_t>(id % 15 + 1));
    float* v = static_cast<float*>(b.column[0].data) + r * dim;
    for (int j = 0; j < dim; ++j) v[j] = u(rng);
    b.column[0].dims[r] = dim;
    b.column[0].nulls[r] = 0;
  }
}
void fill_vectors(BatchView& b, std::int64_t n, std::int64_t first, std::mt19937_64& rng) {
  fill_dim(b, n, first, rng, 128);
}
// Fashion-MNIST's shape: 784 dimensions.
const std::vector<ColumnSpec> kImages = {{Type::Vector, 784}};
void fill_images(BatchView& b, std::int64_t n, std::int64_t first, std::mt19937_64& rng) {
  fill_dim(b, n, first, rng, 784);
}

SortKey key(const Asm& a, int begin, Type t, bool desc) {
  SortKey k;
  k.code = Segment{begin, a.here()};
  k.type = t;
  k.descending = desc;
  return k;
}

// The code in `a` so far as the qual, then ORDER BY retweet_count DESC.
Program by_retweets(Asm& a) {
  a.p.qual = Segment{0, a.here()};
  const int b = a.here();
  a.col(1, Type::I32);
  a.p.keys.push_back(key(a, b, Type::I32, true));
  return a.p;
}

Program q1(std::int64_t rows) {
  Asm a;
  a.col(0, Type::Timestamp).i(rows / 2 * 3000000).op(Op::Lt, Type::I64);
  return by_retweets(a);
}

Program q2() {
  Asm a;
  a.col(1, Type::I32).op(Op::Cast, Type::F64, int(Type::I32));
  a.f(0.5)
      .col(2, Type::I32)
      .op(Op::Cast, Type::F64, int(Type::I32))
      .op(Op::Mul, Type::F64)
      .op(Op::Add, Type::F64);
  a.p.keys.push_back(key(a, 0, Type::F64, true));
  return a.p;
}

Program q3() {
  Asm a;
  a.col(3, Type::I16).op(Op::Cast, Type::I64, int(Type::I16)).i(1).op(Op::Eq, Type::I64);
  a.col(3, Type::I16)
      .op(Op::Cast, Type::I64, int(Type::I16))
      .i(2)
      .op(Op::Eq, Type::I64)
      .op(Op::Or, Type::Bool);
  return by_retweets(a);
}

// ORDER BY emb <-> q (q's elements all `at`, dim dimensions), k = 10 by the caller.
Program vq(int dim = 128, float at = 0.5f) {
  Asm a;
  Value v;
  v.i = (std::int64_t(0) << kVectorDimBits) | dim;
  for (int j = 0; j < dim; ++j) a.p.vectors.push_back(at);
  const int c = a.constant(v);
  a.emit(Op::VecDist, static_cast<Type>(0), 0, c);
  a.p.keys.push_back(key(a, 0, Type::F64, false));
  return a.p;
}

// The table kept on the device, as a cache fill keeps it.
template <typename Fill>
std::unique_ptr<ResidentBatches> keep(const Program& p, const std::vector<ColumnSpec>& cols,
                                      std::int64_t rows, Fill fill) {
  const std::int64_t cap = capacity_for(cols);
  std::unique_ptr<TopK> t(make_topk_gpu(p, cols, cap, 1, 0));
  t->keep_start(std::size_t(64) << 30);
  std::mt19937_64 rng(7);
  EvalError err;
  for (std::int64_t at = 0; at < rows; at += cap) {
    BatchView& b = t->next_batch();
    fill(b, std::min(cap, rows - at), at, rng);
    if (!t->push(err)) std::exit(2);
  }
  if (!t->finish(err)) std::exit(2);
  std::unique_ptr<ResidentBatches> kept(t->keep_stop());
  if (!kept) std::exit(3);
  return kept;
}

struct Timing {
  double ms, setup_ms, gpu_ms;  // setup: making the TopK and freeing it
};

Timing rank(const Program& p, const std::vector<ColumnSpec>& cols, const ResidentBatches& kept, int reps) {
  std::vector<double> wall, setup, gpu;
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock::now();
    std::unique_ptr<TopK> t(make_topk_gpu(p, cols, capacity_for(cols), 50, 0));
    const auto t1 = clock::now();
    EvalError err;
    if (!t->push_resident(kept, err) || !t->finish(err)) std::exit(4);
    const auto t2 = clock::now();
    gpu.push_back(t->stats().device_ms);
    t.reset();
    const auto t3 = clock::now();
    wall.push_back(ms(t0, t3));
    setup.push_back(ms(t0, t1) + ms(t2, t3));
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(wall), median(setup), median(gpu)};
}

// Q programs ranked together (rank_kept_shared, as the GPU service ranks
// concurrent cache hits on one entry): median wall ms of the call and the
// GPU ms of its launches.
Timing rank_shared(const std::vector<Program>& ps, const std::vector<ColumnSpec>& cols,
                   const ResidentBatches& kept, int reps) {
  std::vector<double> wall, gpu;
  for (int r = 0; r < reps; ++r) {
    std::vector<KeptQuery> qs(ps.size());
    for (std::size_t i = 0; i < ps.size(); ++i) {
      qs[i].program = &ps[i];
      qs[i].k = 10;
    }
    const auto t0 = std::chrono::steady_clock::now();
    rank_kept_shared({&kept}, cols, qs, 0);
    const auto t1 = std::chrono::steady_clock::now();
    if (qs[0].rows.size() != 10) std::exit(7);
    wall.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    gpu.push_back(qs[0].stats.device_ms);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(gpu.begin(), gpu.end());
  return {wall[wall.size() / 2], 0, gpu[gpu.size() / 2]};
}

// Milliseconds to copy `bytes` device to device (read + write: the floor
// for reading them once is about half of it).
double copy_ms(std::size_t bytes) {
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) std::exit(5);
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(s);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e);
  cudaEventSynchronize(e);
  float ms = 0;
  cudaEventElapsedTime(&ms, s, e);
  cudaFree(a);
  cudaFree(b);
  return ms;
}

}  // namespace

// Each program ranks 10,000 rows on the CPU first (a program the
// interpreter refuses or that raises is this file's bug, caught anywhere).
template <typename Fill>
void check_on_cpu(const Program& p, const std::vector<ColumnSpec>& cols, Fill fill) {
  std::unique_ptr<TopK> t(make_topk_cpu(p, cols, 10000, 50));
  std::mt19937_64 rng(1);
  EvalError err;
  fill(t->next_batch(), 10000, 0, rng);
  if (!t->push(err) || !t->finish(err) || t->result().empty()) {
    std::fprintf(stderr, "a benchmark program fails on the CPU\n");
    std::exit(6);
  }
}

int main(int argc, char** argv) {
  const std::int64_t rows = argc > 1 ? std::atoll(argv[1]) : 10000000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const char* out = argc > 3 ? argv[3] : nullptr;
  check_on_cpu(q1(20000), kTweets, fill_tweets);
  check_on_cpu(q2(), kTweets, fill_tweets);
  check_on_cpu(q3(), kTweets, fill_tweets);
  check_on_cpu(vq(), kVectors, fill_vectors);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no GPU\n");
    return 1;
  }
  std::string table =
      "| query | rows | rows per batch | wall ms (median) | of which setup ms | GPU ms | G rows/s | floor ms "
      "(columns read once) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  auto row = [&](const char* name, std::int64_t n, std::int64_t cap, Timing t, std::size_t bytes) {
    char line[256];
    std::snprintf(line, sizeof line, "| %s | %lld | %lld | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name,
                  (long long)n, (long long)cap, t.ms, t.setup_ms, t.gpu_ms, n / t.ms / 1e6,
                  copy_ms(bytes) / 2);
    table += line;
    std::fputs(line, stdout);
  };
  {
    auto kept = keep(q1(rows), kTweets, rows, fill_tweets);
    const std::int64_t cap = capacity_for(kTweets);
    row("Q1 (time < cut, retweet_count DESC)", rows, cap, rank(q1(rows), kTweets, *kept, reps),
        rows * (8 + 4 + 2));
    row("Q2 (retweet_count + 0.5 * likes_count DESC)", rows, cap, rank(q2(), kTweets, *kept, reps),
        rows * (4 + 4 + 2));
    row("Q3 (lang IN (1, 2), retweet_count DESC)", rows, cap, rank(q3(), kTweets, *kept, reps),
        rows * (2 + 4 + 2));
  }
  {
    const std::int64_t n = rows / 10;
    auto kept = keep(vq(), kVectors, n, fill_vectors);
    row("V (emb <-> q, 128-d)", n, capacity_for(kVectors), rank(vq(), kVectors, *kept, reps),
        n * (512 + 1 + 4));
  }
  // Fashion-MNIST's shape (60,000 x 784) ranked by Q programs at once.
  std::string shared =
      "| programs ranked together | wall ms (median) | GPU ms | wall ms per program | floor ms (vectors "
      "read once) |\n|---:|---:|---:|---:|---:|\n";
  {
    const std::int64_t n = 60000;
    auto kept = keep(vq(784), kImages, n, fill_images);
    const double floor = copy_ms(std::size_t(n) * (784 * 4 + 1 + 4)) / 2;
    for (int q : {1, 2, 4, 8, 16, 32}) {
      std::vector<Program> ps;
      for (int i = 0; i < q; ++i) ps.push_back(vq(784, 0.01f * float(i + 1)));
      const Timing t = rank_shared(ps, kImages, *kept, reps);
      char line[256];
      std::snprintf(line, sizeof line, "| %d | %.3f | %.3f | %.3f | %.3f |\n", q, t.ms, t.gpu_ms, t.ms / q,
                    floor);
      shared += line;
      std::fputs(line, stdout);
    }
  }
  if (out) {
    FILE* f = std::fopen(out, "w");
    if (!f) return 1;
    std::fprintf(f, "# GpuTopK over kept batches (the table cache's ranking), %s\n\n", prop.name);
    std::fprintf(f,
                 "Command: gknn_bench_expr_topk %lld %d OUT.md. k = 50, a fresh TopK per query (as a service "
                 "session), median of %d.\n\n%s",
                 (long long)rows, reps, reps, table.c_str());
    std::fprintf(f,
                 "\nPrograms ranked together (rank_kept_shared, the service's concurrent cache hits): "
                 "60,000 x 784 vectors kept, ORDER BY emb <-> q_i LIMIT 10 for Q constants, median of "
                 "%d.\n\n%s",
                 reps, shared.c_str());
    std::fclose(f);
  }
  return 0;
}
