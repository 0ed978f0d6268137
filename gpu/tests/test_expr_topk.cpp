// Running top-k over batches: the CPU TopK against a brute-force sort of
// every row's word, and the GPU TopK against the CPU one (skipped without a
// GPU), on random columns with NULLs, NaN, infinities, -0 and many ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "expr/batch_layout.h"
#include "expr/selected_order.h"
#include "expr_builder.h"
#include "gknn/error.h"
#include "gpu_env.h"

namespace gknn::test {
namespace {

// Columns: 0 int4 (few distinct values: ties), 1 float8 (specials), 2 int8, 3 vector(5).
const std::vector<ColumnSpec> kColumns = {{Type::I32, 0}, {Type::F64, 0}, {Type::I64, 0}, {Type::Vector, 5}};

void fill(BatchView& b, std::int64_t n, std::int64_t first_id, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> small(-5, 5), pct(0, 99);
  std::normal_distribution<double> normal(0, 100);
  const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
  b.n = n;
  for (std::int64_t r = 0; r < n; ++r) {
    b.row_ids[r] = make_row_id(static_cast<std::uint32_t>((first_id + r) / 100),
                               static_cast<std::uint16_t>((first_id + r) % 100 + 1));
    static_cast<std::int32_t*>(b.column[0].data)[r] = small(rng);
    double f = pct(rng) < 10 ? specials[pct(rng) % 5] : std::round(normal(rng));
    static_cast<double*>(b.column[1].data)[r] = f;
    static_cast<std::int64_t*>(b.column[2].data)[r] =
        pct(rng) < 5 ? (pct(rng) < 50 ? INT64_MAX : INT64_MIN) : static_cast<std::int64_t>(normal(rng));
    float* v = static_cast<float*>(b.column[3].data) + r * 5;
    for (int j = 0; j < 5; ++j) v[j] = static_cast<float>(small(rng));
    b.column[3].dims[r] = 5;
    for (int c = 0; c < 4; ++c) b.column[c].nulls[r] = pct(rng) < 8;
  }
}

// WHERE c0 >= -3 ORDER BY <key program> [, c2] with the given directions.
Program make_program(int variant, bool desc, bool nulls_first, bool two_keys) {
  Asm a;
  a.col(0, Type::I32).i(-3).op(Op::Ge, Type::I64);
  a.p.qual = Segment{0, a.here()};
  SortKey k;
  k.code.begin = a.here();
  switch (variant) {
    case 0:  // c1 (float8 with specials)
      a.col(1, Type::F64);
      k.type = Type::F64;
      break;
    case 1:  // c0 * 2 + 1 (int4, ties)
      a.col(0, Type::I32).i(2).op(Op::Mul, Type::I32).i(1).op(Op::Add, Type::I32);
      k.type = Type::I32;
      break;
    case 2:  // c2 (int8: a wide key)
      a.col(2, Type::I64);
      k.type = Type::I64;
      break;
    default: {  // c3 <-> '[1,1,1,1,1]'
      Value v;
      v.i = (std::int64_t(a.p.vectors.size()) << kVectorDimBits) | 5;
      for (int j = 0; j < 5; ++j) a.p.vectors.push_back(1.0f);
      int c = a.constant(v);
      a.emit(Op::VecDist, static_cast<Type>(0), 3, c);
      k.type = Type::F64;
    }
  }
  k.code.end = a.here();
  k.descending = desc;
  k.nulls_first = nulls_first;
  a.p.keys.push_back(k);
  if (two_keys) {
    SortKey k2;
    k2.code.begin = a.here();
    a.col(0, Type::I32);
    k2.code.end = a.here();
    k2.type = Type::I32;
    k2.descending = !desc;
    a.p.keys.push_back(k2);
  }
  return a.p;
}

// ORDER BY 100 / (c0 - 2): rows with c0 = 2 divide by zero.
Program divide_by_c0_minus_2() {
  Asm a;
  SortKey k;
  a.i(100).col(0, Type::I32).i(2).op(Op::Sub, Type::I32).op(Op::Div, Type::I32);
  k.code.end = a.here();
  k.type = Type::I32;
  a.p.keys.push_back(k);
  return a.p;
}

std::vector<Selected> run_topk(TopK& t, std::int64_t batches, std::int64_t rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  EvalError err;
  for (std::int64_t i = 0; i < batches; ++i) {
    BatchView& b = t.next_batch();
    fill(b, rows - i * 7, i * rows, rng);  // ragged batch sizes
    EXPECT_TRUE(t.push(err));
  }
  EXPECT_TRUE(t.finish(err));
  return t.result();
}

// Every row evaluated alone, sorted: the contract itself.
std::vector<Selected> brute_force(const Program& p, std::int64_t batches, std::int64_t rows, std::int64_t k,
                                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> storage(batch_bytes(kColumns, rows));
  BatchView b;
  layout_batch(b, kColumns, rows, storage.data());
  std::vector<Selected> all;
  for (std::int64_t i = 0; i < batches; ++i) {
    fill(b, rows - i * 7, i * rows, rng);
    for (std::int64_t r = 0; r < b.n; ++r) {
      bool passed = false;
      Selected w;
      std::int32_t d[2];
      EXPECT_EQ(eval_row_cpu(p, b, r, passed, w, d), ErrorKind::None);
      if (passed) all.push_back(w);
    }
  }
  std::sort(all.begin(), all.end(), selected_less);
  if (static_cast<std::int64_t>(all.size()) > k) all.resize(k);
  return all;
}

void expect_same(const std::vector<Selected>& a, const std::vector<Selected>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t j = 0; j < a.size(); ++j) {
    ASSERT_EQ(a[j].nlimbs, b[j].nlimbs);
    for (int l = 0; l < a[j].nlimbs; ++l)
      ASSERT_EQ(a[j].limbs[l], b[j].limbs[l]) << "row " << j << " limb " << l;
  }
}

TEST(ExprTopK, CpuMatchesBruteForce) {
  for (int variant = 0; variant < 4; ++variant)
    for (int dir = 0; dir < 4; ++dir)
      for (std::int64_t k : {0, 1, 7, 100, 5000}) {
        SCOPED_TRACE(::testing::Message() << "variant " << variant << " dir " << dir << " k " << k);
        Program p = make_program(variant, dir & 1, dir & 2, variant == 1);
        std::unique_ptr<TopK> t(make_topk_cpu(p, kColumns, 1000, k));
        std::uint64_t seed = 1000 + variant * 10 + dir;
        expect_same(run_topk(*t, 3, 1000, seed), brute_force(p, 3, 1000, k, seed));
        EXPECT_EQ(t->stats().rows_scanned, 1000 + 993 + 986);
      }
}

TEST(ExprTopK, FirstErrorInScanOrder) {
  const Program p = divide_by_c0_minus_2();
  std::unique_ptr<TopK> t(make_topk_cpu(p, kColumns, 100, 10));
  std::mt19937_64 rng(7);
  BatchView& b = t->next_batch();
  fill(b, 100, 0, rng);
  std::int64_t first = -1;
  for (std::int64_t r = 0; r < b.n && first < 0; ++r)
    if (!b.column[0].nulls[r] && static_cast<std::int32_t*>(b.column[0].data)[r] == 2) first = r;
  ASSERT_GE(first, 0);
  const std::uint64_t id = b.row_ids[first];
  EvalError err;
  EXPECT_FALSE(t->push(err));
  EXPECT_EQ(err.kind, ErrorKind::DivisionByZero);
  EXPECT_EQ(err.row_id, id);
  EXPECT_EQ(error_message(err), "division by zero");
}

TEST(ExprTopK, VectorDimensionMismatchNamesBothDimensions) {
  Program p = make_program(3, false, false, false);
  std::unique_ptr<TopK> t(make_topk_cpu(p, kColumns, 10, 3));
  std::mt19937_64 rng(3);
  BatchView& b = t->next_batch();
  fill(b, 10, 0, rng);
  for (int r = 0; r < 10; ++r) b.column[0].nulls[r] = 0, static_cast<std::int32_t*>(b.column[0].data)[r] = 0;
  b.column[3].nulls[4] = 0;
  b.column[3].dims[4] = 3;
  EvalError err;
  EXPECT_FALSE(t->push(err));
  EXPECT_EQ(error_message(err), "different vector dimensions 3 and 5");
}

TEST(ExprTopKGpu, GpuMatchesCpu) {
  GKNN_NEED_GPU();
  for (int variant = 0; variant < 4; ++variant)
    for (int dir = 0; dir < 4; ++dir)
      for (std::int64_t k : {0, 1, 10, 100, 1024}) {
        SCOPED_TRACE(::testing::Message() << "variant " << variant << " dir " << dir << " k " << k);
        Program p = make_program(variant, dir & 1, dir & 2, false);
        ASSERT_TRUE(gpu_supports(p, k));
        std::unique_ptr<TopK> cpu(make_topk_cpu(p, kColumns, 50000, k));
        std::unique_ptr<TopK> gpu(make_topk_gpu(p, kColumns, 50000, k, 0));
        std::uint64_t seed = 2000 + variant * 10 + dir;
        expect_same(run_topk(*gpu, 5, 50000, seed), run_topk(*cpu, 5, 50000, seed));
        EXPECT_EQ(gpu->stats().rows_passed, cpu->stats().rows_passed);
      }
}

TEST(ExprTopKGpu, GpuReportsTheCpuError) {
  GKNN_NEED_GPU();
  const Program p = divide_by_c0_minus_2();
  std::unique_ptr<TopK> cpu(make_topk_cpu(p, kColumns, 5000, 10));
  std::unique_ptr<TopK> gpu(make_topk_gpu(p, kColumns, 5000, 10, 0));
  EvalError ec, eg;
  for (TopK* t : {cpu.get(), gpu.get()}) {
    std::mt19937_64 rng(11);
    EvalError& e = t == cpu.get() ? ec : eg;
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
      BatchView& b = t->next_batch();
      fill(b, 5000, i * 5000, rng);
      ok = t->push(e);
    }
    if (ok) ok = t->finish(e);
    EXPECT_FALSE(ok);
  }
  EXPECT_EQ(eg.kind, ec.kind);
  EXPECT_EQ(eg.row_id, ec.row_id);
}

// Kept batches ranked again by a new TopK (the table cache's path) give the
// rows of pushing them again: a third of the batches kept, the rest pushed
// alongside, and a store over its byte limit given up.
void check_resident(int device) {
  auto make = [&](const Program& p, std::int64_t k) {
    return std::unique_ptr<TopK>(device >= 0 ? make_topk_gpu(p, kColumns, 4000, k, device)
                                             : make_topk_cpu(p, kColumns, 4000, k));
  };
  // Pushes batches 0 .. count - 1 of the seeded sequence (batch i: 4000 - 7i rows).
  auto push_batches = [](TopK& t, std::uint64_t seed, int count) {
    std::mt19937_64 rng(seed);
    EvalError err;
    for (int i = 0; i < count; ++i) {
      BatchView& b = t.next_batch();
      fill(b, 4000 - i * 7, i * 4000, rng);
      ASSERT_TRUE(t.push(err));
    }
  };
  for (int variant = 0; variant < 4; ++variant)
    for (std::int64_t k : {1, 10, 500}) {
      SCOPED_TRACE(::testing::Message() << "device " << device << " variant " << variant << " k " << k);
      Program p = make_program(variant, variant & 1, variant & 2, false);
      const std::uint64_t seed = 3000 + variant;
      std::unique_ptr<TopK> first = make(p, k);
      first->keep_start(std::size_t(1) << 30);
      std::mt19937_64 rng(seed);
      EvalError err;
      for (int i = 0; i < 6; ++i) {
        if (i == 2) {
          std::unique_ptr<ResidentBatches> none(first->keep_stop());  // an empty store still comes back
        }
        if (i == 4) first->keep_start(std::size_t(1) << 30);
        BatchView& b = first->next_batch();
        fill(b, 4000 - i * 7, i * 4000, rng);
        ASSERT_TRUE(first->push(err));
      }
      ASSERT_TRUE(first->finish(err));
      std::unique_ptr<ResidentBatches> kept(first->keep_stop());
      ASSERT_TRUE(kept);
      EXPECT_EQ(kept->rows(), (4000 - 28) + (4000 - 35));
      EXPECT_EQ(kept->device(), device);
      // batches 0-3 pushed again, 4-5 from the store
      std::unique_ptr<TopK> again = make(p, k);
      ASSERT_NO_FATAL_FAILURE(push_batches(*again, seed, 4));
      ASSERT_TRUE(again->push_resident(*kept, err));
      ASSERT_TRUE(again->finish(err));
      expect_same(again->result(), first->result());
      EXPECT_EQ(again->stats().rows_scanned, first->stats().rows_scanned);
      EXPECT_EQ(again->stats().rows_passed, first->stats().rows_passed);
      // every batch kept, then ranked from the store alone (many kept batches
      // in one call, none pushed)
      std::unique_ptr<TopK> keeper = make(p, k);
      keeper->keep_start(std::size_t(1) << 30);
      ASSERT_NO_FATAL_FAILURE(push_batches(*keeper, seed, 6));
      ASSERT_TRUE(keeper->finish(err));
      std::unique_ptr<ResidentBatches> all(keeper->keep_stop());
      ASSERT_TRUE(all);
      std::unique_ptr<TopK> from_store = make(p, k);
      ASSERT_TRUE(from_store->push_resident(*all, err));
      ASSERT_TRUE(from_store->finish(err));
      expect_same(from_store->result(), first->result());
      EXPECT_EQ(from_store->stats().rows_scanned, first->stats().rows_scanned);
      EXPECT_EQ(from_store->stats().rows_passed, first->stats().rows_passed);
      EXPECT_EQ(from_store->stats().batches, 6);
      // a store over its limit is given up
      std::unique_ptr<TopK> small = make(p, k);
      small->keep_start(batch_bytes(kColumns, 4000));
      for (int i = 0; i < 2; ++i) {
        BatchView& b = small->next_batch();
        fill(b, 4000, i * 4000, rng);
        ASSERT_TRUE(small->push(err));
      }
      ASSERT_TRUE(small->finish(err));
      EXPECT_EQ(small->keep_stop(), nullptr);
    }
}

// An error in a kept batch names the same row as the CPU's.
void check_resident_error(int device) {
  const Program p = divide_by_c0_minus_2();
  Program ok_program = make_program(1, false, false, false);
  auto make = [&](const Program& prog) {
    return std::unique_ptr<TopK>(device >= 0 ? make_topk_gpu(prog, kColumns, 3000, 10, device)
                                             : make_topk_cpu(prog, kColumns, 3000, 10));
  };
  std::unique_ptr<TopK> keeper = make(ok_program);
  keeper->keep_start(std::size_t(1) << 30);
  std::mt19937_64 rng(17);
  EvalError err;
  for (int i = 0; i < 2; ++i) {
    BatchView& b = keeper->next_batch();
    fill(b, 3000, i * 3000, rng);
    ASSERT_TRUE(keeper->push(err));
  }
  ASSERT_TRUE(keeper->finish(err));
  std::unique_ptr<ResidentBatches> kept(keeper->keep_stop());
  ASSERT_TRUE(kept);
  std::unique_ptr<TopK> cpu(make_topk_cpu(p, kColumns, 3000, 10));
  std::mt19937_64 rng2(17);
  EvalError ec, er;
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) {
    BatchView& b = cpu->next_batch();
    fill(b, 3000, i * 3000, rng2);
    ok = cpu->push(ec);
  }
  ASSERT_FALSE(ok && cpu->finish(ec));
  std::unique_ptr<TopK> t = make(p);
  ok = t->push_resident(*kept, er);
  if (ok) ok = t->finish(er);
  EXPECT_FALSE(ok);
  EXPECT_EQ(er.kind, ec.kind);
  EXPECT_EQ(er.row_id, ec.row_id);
  // another TopK's columns are refused
  const std::vector<ColumnSpec> other = {{Type::I64, 0}};
  Asm b;
  SortKey k2;
  b.col(0, Type::I64);
  k2.code.end = b.here();
  k2.type = Type::I64;
  b.p.keys.push_back(k2);
  std::unique_ptr<TopK> wrong(make_topk_cpu(b.p, other, 10, 1));
  EXPECT_THROW(wrong->push_resident(*kept, er), Error);
}

TEST(ExprTopK, ResidentBatchesRankAsPushed) { check_resident(-1); }
TEST(ExprTopK, ResidentBatchesReportTheFirstError) { check_resident_error(-1); }
TEST(ExprTopKGpu, ResidentBatchesRankAsPushed) {
  GKNN_NEED_GPU();
  check_resident(0);
}
TEST(ExprTopKGpu, ResidentBatchesReportTheFirstError) {
  GKNN_NEED_GPU();
  check_resident_error(0);
}

// ---- vector distances computed ahead of the rows (vector_distances.cuh) ----

// ORDER BY c0 <op> q, metric m (4: the positive inner product), over
// vector(dim) rows: random values, NULLs, and zero vectors (cosine's NaN).
Program vector_program(int metric, int dim, bool desc, std::mt19937_64& rng) {
  Asm a;
  std::normal_distribution<float> normal(0, 1);
  Value v;
  v.i = (std::int64_t(a.p.vectors.size()) << kVectorDimBits) | dim;
  for (int j = 0; j < dim; ++j) a.p.vectors.push_back(normal(rng));
  SortKey k;
  k.code.begin = a.here();
  a.emit(Op::VecDist, static_cast<Type>(metric), 0, a.constant(v));
  k.code.end = a.here();
  k.type = Type::F64;
  k.descending = desc;
  a.p.keys.push_back(k);
  return a.p;
}

void fill_vectors(BatchView& b, std::int64_t n, std::int64_t first_id, int dim, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> pct(0, 99);
  b.n = n;
  for (std::int64_t r = 0; r < n; ++r) {
    b.row_ids[r] = make_row_id(static_cast<std::uint32_t>((first_id + r) / 50),
                               static_cast<std::uint16_t>((first_id + r) % 50 + 1));
    const bool zero = pct(rng) < 2;
    float* v = static_cast<float*>(b.column[0].data) + r * dim;
    for (int j = 0; j < dim; ++j) v[j] = zero ? 0.0f : normal(rng);
    b.column[0].dims[r] = dim;
    b.column[0].nulls[r] = pct(rng) < 5;
  }
}

// Every metric at awkward dimensions, pushed and kept: the same rows, to the
// bit (the words carry each distance's bits), as the CPU's.
TEST(ExprTopKGpu, VectorDistancesMatchCpu) {
  GKNN_NEED_GPU();
  for (int dim : {1, 3, 8, 13, 131, 784})
    for (int metric = 0; metric <= 4; ++metric)
      for (bool desc : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dim " << dim << " metric " << metric << " desc " << desc);
        const std::vector<ColumnSpec> cols = {{Type::Vector, dim}};
        std::mt19937_64 qrng(dim * 10 + metric);
        const Program p = vector_program(metric, dim, desc, qrng);
        const std::int64_t rows = 3000, k = 1024;
        std::unique_ptr<TopK> cpu(make_topk_cpu(p, cols, rows, k));
        std::unique_ptr<TopK> gpu(make_topk_gpu(p, cols, rows, k, 0));
        gpu->keep_start(std::size_t(1) << 30);
        EvalError err;
        for (TopK* t : {cpu.get(), gpu.get()}) {
          std::mt19937_64 rng(7 + dim);
          for (int i = 0; i < 3; ++i) {
            BatchView& b = t->next_batch();
            fill_vectors(b, rows - 11 * i, i * rows, dim, rng);
            ASSERT_TRUE(t->push(err));
          }
          ASSERT_TRUE(t->finish(err));
        }
        expect_same(gpu->result(), cpu->result());
        std::unique_ptr<ResidentBatches> kept(gpu->keep_stop());
        ASSERT_TRUE(kept);
        std::unique_ptr<TopK> again(make_topk_gpu(p, cols, rows, k, 0));
        ASSERT_TRUE(again->push_resident(*kept, err));
        ASSERT_TRUE(again->finish(err));
        expect_same(again->result(), cpu->result());
        EXPECT_EQ(again->stats().rows_passed, cpu->stats().rows_passed);
      }
}

// More kept rows than one group (kKeptGroupPositions): ranked in several
// launches, the same rows as pushing them; a vector of another dimension
// in the second group, behind a row the qual drops, raises for the row the
// CPU names.
TEST(ExprTopKGpu, KeptBatchesInSeveralGroups) {
  GKNN_NEED_GPU();
  const std::int64_t rows = 65536, batches = kKeptGroupPositions / rows + 3;
  const std::int64_t bad = (batches - 2) * rows + 777, dropped = bad - 300;  // positions
  auto push_all = [&](TopK& t, bool mismatch, EvalError& err) {
    std::mt19937_64 rng(99);
    for (std::int64_t i = 0; i < batches; ++i) {
      BatchView& b = t.next_batch();
      fill(b, rows, i * rows, rng);
      for (std::int64_t at : {bad, dropped})
        if (mismatch && at / rows == i) {
          b.column[3].dims[at % rows] = 4;
          b.column[3].nulls[at % rows] = 0;
          b.column[0].nulls[at % rows] = 0;
          static_cast<std::int32_t*>(b.column[0].data)[at % rows] = at == bad ? 0 : -5;  // qual c0 >= -3
        }
      if (!t.push(err)) return false;
    }
    return t.finish(err);
  };
  const Program ranked = make_program(3, false, false, false);  // WHERE c0 >= -3 ORDER BY c3 <-> ones
  // The rows kept by a TopK that ranks by c0 (no vector distance: no error).
  std::unique_ptr<TopK> keeper(make_topk_gpu(make_program(1, false, false, false), kColumns, rows, 10, 0));
  keeper->keep_start(std::size_t(1) << 34);
  EvalError err, cpu_err;
  ASSERT_TRUE(push_all(*keeper, true, err));
  std::unique_ptr<ResidentBatches> kept(keeper->keep_stop());
  ASSERT_TRUE(kept);
  std::unique_ptr<TopK> cpu(make_topk_cpu(ranked, kColumns, rows, 100));
  EXPECT_FALSE(push_all(*cpu, true, cpu_err));
  EXPECT_EQ(cpu_err.kind, ErrorKind::VectorDims);
  std::unique_ptr<TopK> gpu(make_topk_gpu(ranked, kColumns, rows, 100, 0));
  bool ok = gpu->push_resident(*kept, err);
  if (ok) ok = gpu->finish(err);
  EXPECT_FALSE(ok);
  EXPECT_EQ(err.kind, cpu_err.kind);
  EXPECT_EQ(err.row_id, cpu_err.row_id);
  EXPECT_EQ(err.row_id,
            make_row_id(static_cast<std::uint32_t>(bad / 100), static_cast<std::uint16_t>(bad % 100 + 1)));
  // Without the bad rows: every group ranked, the rows of pushing them.
  std::unique_ptr<TopK> keeper2(make_topk_gpu(make_program(1, false, false, false), kColumns, rows, 10, 0));
  keeper2->keep_start(std::size_t(1) << 34);
  ASSERT_TRUE(push_all(*keeper2, false, err));
  std::unique_ptr<ResidentBatches> kept2(keeper2->keep_stop());
  ASSERT_TRUE(kept2);
  std::unique_ptr<TopK> pushed(make_topk_gpu(ranked, kColumns, rows, 100, 0));
  ASSERT_TRUE(push_all(*pushed, false, err));
  std::unique_ptr<TopK> from_store(make_topk_gpu(ranked, kColumns, rows, 100, 0));
  ASSERT_TRUE(from_store->push_resident(*kept2, err));
  ASSERT_TRUE(from_store->finish(err));
  expect_same(from_store->result(), pushed->result());
  EXPECT_EQ(from_store->stats().rows_passed, pushed->stats().rows_passed);
  EXPECT_EQ(from_store->stats().batches, batches);
}

// ---- programs ranked together over the same kept batches (rank_kept_shared) ----

// The store of `batches` batches of `rows` (ragged) rows, kept by a TopK
// of `keeper_program`.
std::unique_ptr<ResidentBatches> keep_batches(
    int device, const Program& keeper_program, const std::vector<ColumnSpec>& cols, std::int64_t rows,
    int batches, const std::function<void(BatchView&, std::int64_t, int)>& fill_batch) {
  std::unique_ptr<TopK> keeper(device >= 0 ? make_topk_gpu(keeper_program, cols, rows, 1, device)
                                           : make_topk_cpu(keeper_program, cols, rows, 1));
  keeper->keep_start(std::size_t(1) << 34);
  EvalError err;
  for (int i = 0; i < batches; ++i) {
    BatchView& b = keeper->next_batch();
    fill_batch(b, rows - 13 * i, i);
    EXPECT_TRUE(keeper->push(err));
  }
  EXPECT_TRUE(keeper->finish(err));
  return std::unique_ptr<ResidentBatches>(keeper->keep_stop());
}

// Each query against a TopK of its own given the same stores: rows, error, counts.
void expect_as_alone(int device, const std::vector<const ResidentBatches*>& stores,
                     const std::vector<ColumnSpec>& cols, std::vector<KeptQuery>& queries) {
  rank_kept_shared(stores, cols, queries, device);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "query " << i << " k " << queries[i].k);
    const KeptQuery& q = queries[i];
    std::unique_ptr<TopK> alone(device >= 0 ? make_topk_gpu(*q.program, cols, 1 << 16, q.k, device)
                                            : make_topk_cpu(*q.program, cols, 1 << 16, q.k));
    EvalError err;
    bool ok = true;
    for (const ResidentBatches* r : stores)
      if (ok) ok = alone->push_resident(*r, err);
    if (ok) ok = alone->finish(err);
    EXPECT_EQ(q.error.kind, err.kind);
    if (!ok) {
      EXPECT_EQ(q.error.row_id, err.row_id);
      EXPECT_EQ(q.error.detail[0], err.detail[0]);
      EXPECT_EQ(q.error.detail[1], err.detail[1]);
      continue;
    }
    expect_same(q.rows, alone->result());
    EXPECT_EQ(q.stats.rows_scanned, alone->stats().rows_scanned);
    EXPECT_EQ(q.stats.rows_passed, alone->stats().rows_passed);
    EXPECT_EQ(q.stats.batches, alone->stats().batches);
  }
}

// Mixed programs (scalar keys of one and two limbs, vector distances to
// different constants, a division by zero) and k from 0 to 1024, over two
// stores: each gets what it would alone.
void check_shared_mixed(int device) {
  auto fill_batch = [](BatchView& b, std::int64_t n, int i) {
    std::mt19937_64 rng(500 + i);
    fill(b, n, i * 5000, rng);
  };
  std::unique_ptr<ResidentBatches> first =
      keep_batches(device, make_program(1, false, false, false), kColumns, 5000, 3, fill_batch);
  std::unique_ptr<ResidentBatches> second =
      keep_batches(device, make_program(1, false, false, false), kColumns, 3000, 2, fill_batch);
  ASSERT_TRUE(first && second);
  std::vector<Program> programs;
  for (int variant = 0; variant < 4; ++variant)
    for (bool two : {false, true}) programs.push_back(make_program(variant, variant & 1, variant & 2, two));
  std::mt19937_64 rng(77);
  std::normal_distribution<float> normal(0, 2);
  for (int c = 0; c < 19; ++c) {  // c3 <-> q for 19 constants (more than one chunk of sums)
    Program p = make_program(3, c & 1, false, false);
    for (float& x : p.vectors) x = normal(rng);
    programs.push_back(p);
  }
  programs.push_back(divide_by_c0_minus_2());
  std::vector<KeptQuery> queries;
  const std::int64_t ks[] = {0, 1, 10, 10, 100, 500, 1024};
  for (std::size_t i = 0; i < programs.size(); ++i) {
    KeptQuery q;
    q.program = &programs[i];
    q.k = ks[i % 7];
    if (device < 0 || gpu_supports(programs[i], q.k)) queries.push_back(q);  // (three key limbs: the CPU's)
  }
  ASSERT_GE(queries.size(), 25u);
  expect_as_alone(device, {first.get(), second.get()}, kColumns, queries);
  EXPECT_NE(queries.back().error.kind, ErrorKind::None);
}

TEST(ExprTopK, SharedRankingAsAlone) { check_shared_mixed(-1); }
TEST(ExprTopKGpu, SharedRankingAsAlone) {
  GKNN_NEED_GPU();
  check_shared_mixed(0);
}

// Fashion-MNIST's shape: 784-d vectors, 1 to 20 constants per metric ranked
// together (the same bits as alone: the words hold each distance).
TEST(ExprTopKGpu, SharedVectorDistancesAsAlone) {
  GKNN_NEED_GPU();
  for (int dim : {3, 784}) {
    const std::vector<ColumnSpec> cols = {{Type::Vector, dim}};
    auto fill_batch = [dim](BatchView& b, std::int64_t n, int i) {
      std::mt19937_64 rng(900 + i);
      fill_vectors(b, n, i * 3000, dim, rng);
    };
    std::mt19937_64 krng(dim);
    std::unique_ptr<ResidentBatches> store =
        keep_batches(0, vector_program(0, dim, false, krng), cols, 3000, 4, fill_batch);
    ASSERT_TRUE(store);
    std::vector<Program> programs;
    const int per_metric[] = {1, 2, 3, 7, 20};  // sums per thread: 1, 2, 4, 8, 16 (two chunks)
    for (int metric = 0; metric <= 4; ++metric)
      for (int c = 0; c < per_metric[metric]; ++c) {
        std::mt19937_64 qrng(dim * 100 + metric * 20 + c);
        programs.push_back(vector_program(metric, dim, c % 3 == 0, qrng));
      }
    std::vector<KeptQuery> queries;
    for (std::size_t i = 0; i < programs.size(); ++i) {
      KeptQuery q;
      q.program = &programs[i];
      q.k = i % 4 == 0 ? 100 : 10;
      queries.push_back(q);
    }
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    expect_as_alone(0, {store.get()}, cols, queries);
  }
}

// More rows than one group of positions: several launches, the same rows
// and the first error in scan order, as alone.
TEST(ExprTopKGpu, SharedRankingInSeveralGroups) {
  GKNN_NEED_GPU();
  const std::int64_t rows = 65536;
  const int batches = static_cast<int>(kKeptGroupPositions / rows) + 2;
  auto fill_batch = [](BatchView& b, std::int64_t n, int i) {
    std::mt19937_64 rng(40 + i);
    fill(b, n, std::int64_t(i) * 65536, rng);
  };
  std::unique_ptr<ResidentBatches> store =
      keep_batches(0, make_program(1, false, false, false), kColumns, rows, batches, fill_batch);
  ASSERT_TRUE(store);
  std::vector<Program> programs = {make_program(3, false, false, false), make_program(0, true, true, true),
                                   divide_by_c0_minus_2(), make_program(1, false, false, false)};
  std::vector<KeptQuery> queries;
  for (std::size_t i = 0; i < programs.size(); ++i) {
    KeptQuery q;
    q.program = &programs[i];
    q.k = i == 1 ? 1000 : 50;
    queries.push_back(q);
  }
  expect_as_alone(0, {store.get()}, kColumns, queries);
}

}  // namespace
}  // namespace gknn::test
