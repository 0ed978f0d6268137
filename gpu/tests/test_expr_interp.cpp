// The shared expression interpreter against PostgreSQL 15's semantics, on
// the CPU (the same header runs in the GPU kernels; test_expr_topk.cpp
// compares the two). Expected values and errors are PostgreSQL's, checked
// by hand against a PostgreSQL 15 server.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "expr/interp.cuh"
#include "expr/row_key.cuh"
#include "expr_builder.h"
#include "gknn/error.h"

namespace gknn::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Result {
  ErrorKind error;
  Value v;
  bool null;
};

// Runs the whole program as one segment on an empty batch (constants only).
Result run_consts(Asm& a) {
  a.p.qual = Segment{0, a.here()};
  validate(a.p, {});
  BatchView b;
  b.n = 1;
  std::uint64_t id = 1;
  b.row_ids = &id;
  Result r{};
  std::int32_t detail[2];
  r.error = run(program_view(a.p), a.p.qual, b, 0, r.v, r.null, detail);
  return r;
}

Result binary(Op op, Type t, Value x, Value y) {
  Asm a;
  a.push(x).push(y).op(op, t);
  return run_consts(a);
}
Value I(std::int64_t v) { return Value{v}; }
Value F(double v) {
  Value x;
  x.f = v;
  return x;
}

TEST(ExprInterp, IntegerOverflowPerWidth) {
  EXPECT_EQ(binary(Op::Add, Type::I32, I(2147483647), I(1)).error, ErrorKind::IntegerRange);
  EXPECT_EQ(binary(Op::Add, Type::I16, I(32767), I(1)).error, ErrorKind::SmallintRange);
  EXPECT_EQ(binary(Op::Sub, Type::I16, I(-32768), I(1)).error, ErrorKind::SmallintRange);
  EXPECT_EQ(binary(Op::Add, Type::I64, I(INT64_MAX), I(1)).error, ErrorKind::BigintRange);
  EXPECT_EQ(binary(Op::Sub, Type::I64, I(INT64_MIN), I(1)).error, ErrorKind::BigintRange);
  EXPECT_EQ(binary(Op::Mul, Type::I64, I(4294967296), I(4294967296)).error, ErrorKind::BigintRange);
  EXPECT_EQ(binary(Op::Mul, Type::I32, I(65536), I(32768)).error, ErrorKind::IntegerRange);
  Result ok = binary(Op::Mul, Type::I64, I(-3037000499), I(3037000499));
  EXPECT_EQ(ok.error, ErrorKind::None);
  EXPECT_EQ(ok.v.i, -9223372030926249001ll);
  EXPECT_EQ(binary(Op::Add, Type::I32, I(2147483646), I(1)).v.i, 2147483647);
}

TEST(ExprInterp, IntegerDivisionAndModulo) {
  EXPECT_EQ(binary(Op::Div, Type::I32, I(7), I(0)).error, ErrorKind::DivisionByZero);
  EXPECT_EQ(binary(Op::Mod, Type::I64, I(7), I(0)).error, ErrorKind::DivisionByZero);
  EXPECT_EQ(binary(Op::Div, Type::I32, I(-2147483648ll), I(-1)).error, ErrorKind::IntegerRange);
  EXPECT_EQ(binary(Op::Div, Type::I64, I(INT64_MIN), I(-1)).error, ErrorKind::BigintRange);
  EXPECT_EQ(binary(Op::Div, Type::I16, I(-32768), I(-1)).error, ErrorKind::SmallintRange);
  EXPECT_EQ(binary(Op::Mod, Type::I64, I(INT64_MIN), I(-1)).v.i, 0);
  EXPECT_EQ(binary(Op::Div, Type::I32, I(-7), I(2)).v.i, -3);  // truncation
  EXPECT_EQ(binary(Op::Mod, Type::I32, I(-7), I(2)).v.i, -1);
  EXPECT_EQ(binary(Op::Mod, Type::I32, I(7), I(-2)).v.i, 1);
}

TEST(ExprInterp, UnaryMinusAndAbs) {
  Asm a;
  a.i(-2147483648ll).op(Op::Neg, Type::I32);
  EXPECT_EQ(run_consts(a).error, ErrorKind::IntegerRange);
  Asm b;
  b.i(INT64_MIN).op(Op::Abs, Type::I64);
  EXPECT_EQ(run_consts(b).error, ErrorKind::BigintRange);
  Asm c;
  c.i(-5).op(Op::Abs, Type::I16);
  EXPECT_EQ(run_consts(c).v.i, 5);
}

TEST(ExprInterp, FloatArithmeticAsFloat8) {
  EXPECT_EQ(binary(Op::Add, Type::F64, F(1e308), F(1e308)).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(binary(Op::Add, Type::F64, F(kInf), F(1)).error, ErrorKind::None);  // inf input: no error
  EXPECT_TRUE(std::isnan(binary(Op::Add, Type::F64, F(kInf), F(-kInf)).v.f));
  EXPECT_EQ(binary(Op::Mul, Type::F64, F(1e-200), F(1e-200)).error, ErrorKind::FloatUnderflow);
  EXPECT_EQ(binary(Op::Mul, Type::F64, F(0), F(1e-200)).error, ErrorKind::None);
  EXPECT_EQ(binary(Op::Div, Type::F64, F(1), F(0)).error, ErrorKind::DivisionByZero);
  EXPECT_EQ(binary(Op::Div, Type::F64, F(1), F(-0.0)).error, ErrorKind::DivisionByZero);
  EXPECT_EQ(binary(Op::Div, Type::F64, F(kNaN), F(0)).error, ErrorKind::None);  // NaN / 0 = NaN
  EXPECT_EQ(binary(Op::Div, Type::F64, F(1e300), F(1e-300)).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(binary(Op::Div, Type::F64, F(1e-300), F(1e300)).error, ErrorKind::FloatUnderflow);
  EXPECT_EQ(binary(Op::Div, Type::F64, F(1), F(kInf)).error, ErrorKind::None);
  // float4 works in float: 3e38 + 3e38 overflows float, not double.
  EXPECT_EQ(binary(Op::Add, Type::F32, F(3e38), F(3e38)).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(binary(Op::Add, Type::F32, F(0.1f), F(0.2f)).v.f, static_cast<double>(0.1f + 0.2f));
}

TEST(ExprInterp, FloatComparisonsOrderNaNAboveAll) {
  EXPECT_EQ(binary(Op::Eq, Type::F64, F(kNaN), F(kNaN)).v.i, 1);
  EXPECT_EQ(binary(Op::Gt, Type::F64, F(kNaN), F(kInf)).v.i, 1);
  EXPECT_EQ(binary(Op::Lt, Type::F64, F(kInf), F(kNaN)).v.i, 1);
  EXPECT_EQ(binary(Op::Eq, Type::F64, F(-0.0), F(0.0)).v.i, 1);
  EXPECT_EQ(binary(Op::Le, Type::F64, F(kNaN), F(1)).v.i, 0);
  EXPECT_EQ(binary(Op::Ne, Type::F64, F(kNaN), F(1)).v.i, 1);
  Result n = binary(Op::Lt, Type::I64, I(1), Value{0});
  EXPECT_EQ(n.v.i, 0);
}

TEST(ExprInterp, NullsAreStrict) {
  Asm a;
  a.null().i(0).op(Op::Div, Type::I32);  // NULL / 0 is NULL, no error
  Result r = run_consts(a);
  EXPECT_EQ(r.error, ErrorKind::None);
  EXPECT_TRUE(r.null);
  Asm b;
  b.null().op(Op::IsNull);
  r = run_consts(b);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 1);
}

// false AND (1/0 = 1): PostgreSQL stops at the false argument.
TEST(ExprInterp, AndShortCircuitsThreeValued) {
  Asm a;
  a.i(0);
  int j = a.emit(Op::JumpIfFalse);
  a.i(1).i(0).op(Op::Div, Type::I32).i(1).op(Op::Eq).op(Op::And);
  a.patch(j, a.here());
  Result r = run_consts(a);
  EXPECT_EQ(r.error, ErrorKind::None);
  EXPECT_EQ(r.v.i, 0);
  // NULL AND true = NULL; NULL AND false = false; NULL OR true = true.
  Asm b;
  b.null().i(1).op(Op::And);
  EXPECT_TRUE(run_consts(b).null);
  Asm c;
  c.null().i(0).op(Op::And);
  r = run_consts(c);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 0);
  Asm d;
  d.null().i(1).op(Op::Or);
  r = run_consts(d);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 1);
  Asm e;
  e.null().op(Op::Not);
  EXPECT_TRUE(run_consts(e).null);
}

TEST(ExprInterp, CaseEvaluatesOnlyTheChosenBranch) {
  // CASE WHEN NULL THEN 1/0 ELSE 7 END
  Asm a;
  a.null();
  int j = a.emit(Op::JumpIfNotTrue);
  a.i(1).i(0).op(Op::Div, Type::I32);
  int end = a.emit(Op::Jump);
  a.patch(j, a.here());
  a.i(7);
  a.patch(end, a.here());
  Result r = run_consts(a);
  EXPECT_EQ(r.error, ErrorKind::None);
  EXPECT_EQ(r.v.i, 7);
}

TEST(ExprInterp, InListThreeValued) {
  auto in = [](Value x, bool xnull, std::vector<std::pair<Value, bool>> list, Type t) {
    Asm a;
    a.push(x, xnull);
    int first = static_cast<int>(a.p.consts.size());
    for (auto& e : list) a.constant(e.first, e.second);
    a.emit(Op::InList, t, first, static_cast<int>(list.size()));
    return run_consts(a);
  };
  Result r = in(I(2), false, {{I(1), false}, {I(2), false}}, Type::I64);
  EXPECT_EQ(r.v.i, 1);
  r = in(I(3), false, {{I(1), false}, {I(0), true}}, Type::I64);
  EXPECT_TRUE(r.null);  // 3 IN (1, NULL) is NULL
  r = in(I(1), false, {{I(1), false}, {I(0), true}}, Type::I64);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 1);
  r = in(I(0), true, {{I(1), false}}, Type::I64);
  EXPECT_TRUE(r.null);
  r = in(F(kNaN), false, {{F(kNaN), false}}, Type::F64);
  EXPECT_EQ(r.v.i, 1);  // NaN = NaN in PostgreSQL
}

TEST(ExprInterp, BooleanTestsAreNeverNull) {
  Asm a;
  a.null().op(Op::IsNotTrue);
  Result r = run_consts(a);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 1);
  Asm b;
  b.null().op(Op::IsFalse);
  EXPECT_EQ(run_consts(b).v.i, 0);
  Asm c;
  c.null().op(Op::IsUnknown);
  EXPECT_EQ(run_consts(c).v.i, 1);
}

TEST(ExprInterp, FloatFunctions) {
  auto fn = [](Op op, double x) {
    Asm a;
    a.f(x).op(op, Type::F64);
    return run_consts(a);
  };
  EXPECT_EQ(fn(Op::Sqrt, -1).error, ErrorKind::SqrtNegative);
  EXPECT_EQ(fn(Op::Sqrt, -0.0).error, ErrorKind::None);
  EXPECT_EQ(fn(Op::Sqrt, 2).v.f, std::sqrt(2.0));
  EXPECT_EQ(fn(Op::Ln, 0).error, ErrorKind::LogZero);
  EXPECT_EQ(fn(Op::Ln, -1).error, ErrorKind::LogNegative);
  EXPECT_TRUE(std::isnan(fn(Op::Ln, kNaN).v.f));
  EXPECT_EQ(fn(Op::Exp, 1000).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(fn(Op::Exp, -1000).error, ErrorKind::FloatUnderflow);
  EXPECT_EQ(fn(Op::Exp, -740).error, ErrorKind::None);  // subnormal 4.2e-322, as PostgreSQL
  EXPECT_EQ(fn(Op::Exp, -kInf).v.f, 0.0);
  EXPECT_EQ(fn(Op::Floor, -1.5).v.f, -2.0);
  EXPECT_EQ(fn(Op::Ceil, -1.5).v.f, -1.0);
  auto pw = [](double x, double y) { return binary(Op::Pow, Type::F64, F(x), F(y)); };
  EXPECT_EQ(pw(0, -1).error, ErrorKind::PowZeroNegative);
  EXPECT_EQ(pw(-8, 1.0 / 3).error, ErrorKind::PowNegativeFrac);
  EXPECT_EQ(pw(10, 400).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(pw(10, -400).error, ErrorKind::FloatUnderflow);
  EXPECT_EQ(pw(10, -310).error, ErrorKind::None);
  EXPECT_EQ(pw(kNaN, 0).v.f, 1.0);
  EXPECT_EQ(pw(1, kNaN).v.f, 1.0);
  EXPECT_EQ(pw(-kInf, 3).v.f, -kInf);
  EXPECT_EQ(pw(-kInf, -3).v.f, 0.0);
  EXPECT_TRUE(std::signbit(pw(-kInf, -3).v.f));
  EXPECT_EQ(pw(0.5, -kInf).v.f, kInf);
  EXPECT_EQ(pw(-1, kInf).v.f, 1.0);
  EXPECT_EQ(pw(2, 10).v.f, 1024.0);
}

TEST(ExprInterp, Casts) {
  auto cast = [](Value v, Type from, Type to) {
    Asm a;
    a.push(v).op(Op::Cast, to, static_cast<int>(from));
    return run_consts(a);
  };
  EXPECT_EQ(cast(F(2.5), Type::F64, Type::I32).v.i, 2);  // rint: half to even
  EXPECT_EQ(cast(F(3.5), Type::F64, Type::I32).v.i, 4);
  EXPECT_EQ(cast(F(-2147483648.4), Type::F64, Type::I32).v.i, -2147483648ll);
  EXPECT_EQ(cast(F(2147483647.5), Type::F64, Type::I32).error, ErrorKind::IntegerRange);
  EXPECT_EQ(cast(F(kNaN), Type::F64, Type::I64).error, ErrorKind::BigintRange);
  EXPECT_EQ(cast(F(9.3e18), Type::F64, Type::I64).error, ErrorKind::BigintRange);
  EXPECT_EQ(cast(F(32767.5), Type::F32, Type::I16).error, ErrorKind::SmallintRange);
  EXPECT_EQ(cast(I(70000), Type::I32, Type::I16).error, ErrorKind::SmallintRange);
  EXPECT_EQ(cast(I(3000000000ll), Type::I64, Type::I32).error, ErrorKind::IntegerRange);
  EXPECT_EQ(cast(I(16777217), Type::I32, Type::F32).v.f, 16777216.0);  // rounds to float
  EXPECT_EQ(cast(F(1e300), Type::F64, Type::F32).error, ErrorKind::FloatOverflow);
  EXPECT_EQ(cast(F(1e-300), Type::F64, Type::F32).error, ErrorKind::FloatUnderflow);
  EXPECT_EQ(cast(F(kInf), Type::F64, Type::F32).error, ErrorKind::None);
  EXPECT_EQ(cast(I(5), Type::I32, Type::Bool).v.i, 1);
  EXPECT_EQ(cast(I(1), Type::Date, Type::Timestamp).v.i, 86400000000ll);
  EXPECT_EQ(cast(I(2147483647), Type::Date, Type::Timestamp).v.i, INT64_MAX);  // infinity
  EXPECT_EQ(cast(I(-2147483648ll), Type::Date, Type::Timestamp).v.i, INT64_MIN);
  EXPECT_EQ(cast(I(106751983), Type::Date, Type::Timestamp).error, ErrorKind::TimestampRange);
  // 4714-11-24 BC, the first date, and a value below it (no date; found by
  // fuzz/expr_program_fuzz.cpp, where it overflowed the multiplication)
  EXPECT_EQ(cast(I(-2451545), Type::Date, Type::Timestamp).v.i, -211813488000000000ll);
  EXPECT_EQ(cast(I(-2097217537), Type::Date, Type::Timestamp).error, ErrorKind::TimestampRange);
}

TEST(ExprInterp, GreatestLeastIgnoreNulls) {
  Asm a;
  a.null().i(3).op(Op::Greatest).i(5).op(Op::Greatest).null().op(Op::Greatest);
  Result r = run_consts(a);
  EXPECT_FALSE(r.null);
  EXPECT_EQ(r.v.i, 5);
  Asm b;
  b.null().null().op(Op::Least);
  EXPECT_TRUE(run_consts(b).null);
  Asm c;
  c.f(1).f(kNaN).op(Op::Greatest, Type::F64);
  EXPECT_TRUE(std::isnan(run_consts(c).v.f));
  Asm d;  // equal values keep the first: greatest(-0, 0) = -0
  d.f(-0.0).f(0.0).op(Op::Greatest, Type::F64);
  EXPECT_TRUE(std::signbit(run_consts(d).v.f));
}

TEST(ExprInterp, ValidateRejectsBrokenPrograms) {
  Asm a;
  a.i(1).op(Op::Add, Type::I32);  // underflow
  a.p.qual = Segment{0, a.here()};
  EXPECT_THROW(validate(a.p, {}), gknn::Error);
  Asm b;
  b.emit(Op::Col, Type::I32, 3);
  b.p.qual = Segment{0, b.here()};
  EXPECT_THROW(validate(b.p, {ColumnSpec{Type::I32, 0}}), gknn::Error);
  Asm c;
  c.i(1);
  c.emit(Op::Jump, Type::I64, 0);  // backwards
  c.p.qual = Segment{0, c.here()};
  EXPECT_THROW(validate(c.p, {}), gknn::Error);
  Asm d;
  d.i(1).i(2);  // leaves two values
  d.p.qual = Segment{0, d.here()};
  EXPECT_THROW(validate(d.p, {}), gknn::Error);
}

// Found by fuzz/expr_program_fuzz.cpp.
TEST(ExprInterp, ValidateRejectsWhatTheFuzzerFound) {
  Asm a;  // IN list at INT_MAX: arg + aux must not overflow
  a.i(1);
  a.emit(Op::InList, Type::I64, 2147483647, 9);
  a.p.qual = Segment{0, a.here()};
  EXPECT_THROW(validate(a.p, {}), gknn::Error);
  Asm b;  // an opcode past the last
  b.i(1);
  b.emit(static_cast<Op>(static_cast<int>(Op::VecDist) + 1), Type::I64);
  b.p.qual = Segment{0, b.here()};
  EXPECT_THROW(validate(b.p, {}), gknn::Error);
  Asm m;  // float modulo: the interpreter has none
  m.f(1).f(2).op(Op::Mod, Type::F64);
  m.p.qual = Segment{0, m.here()};
  EXPECT_THROW(validate(m.p, {}), gknn::Error);
  // A vector constant of 3 dimensions against a column of 5: rows of 3
  // dimensions keep no elements in the batch, so it would read past them.
  const std::vector<ColumnSpec> cols = {{Type::Vector, 5}};
  for (int qdim : {3, 5}) {
    Asm c;
    Value v;
    v.i = qdim;  // offset 0
    c.p.vectors.assign(qdim, 1.0f);
    c.emit(Op::VecDist, static_cast<Type>(0), 0, c.constant(v));
    c.p.qual = Segment{0, c.here()};
    if (qdim == 5)
      EXPECT_NO_THROW(validate(c.p, cols));
    else
      EXPECT_THROW(validate(c.p, cols), gknn::Error);
  }
}

// ---- keys: the limb order is the SQL order ----

Selected key_of(const SortKey& k, Value v, bool null) {
  Selected s;
  s.nlimbs = put_key(k, v, null, s.limbs) + 1;
  return s;
}

bool limb_less(const Selected& a, const Selected& b) {
  for (int j = 0; j < a.nlimbs - 1; ++j)
    if (a.limbs[j] != b.limbs[j]) return a.limbs[j] < b.limbs[j];
  return false;
}

TEST(ExprKeys, FloatKeysFollowSqlOrder) {
  // ASC NULLS LAST: -inf < -1 < -0 = 0 < 1 < inf < NaN < NULL
  SortKey k;
  k.type = Type::F64;
  std::vector<double> asc = {-kInf, -1, 0, 1, kInf, kNaN};
  for (std::size_t j = 0; j + 1 < asc.size(); ++j)
    EXPECT_TRUE(limb_less(key_of(k, F(asc[j]), false), key_of(k, F(asc[j + 1]), false))) << j;
  EXPECT_FALSE(limb_less(key_of(k, F(-0.0), false), key_of(k, F(0.0), false)));
  EXPECT_FALSE(limb_less(key_of(k, F(0.0), false), key_of(k, F(-0.0), false)));
  EXPECT_TRUE(limb_less(key_of(k, F(kNaN), false), key_of(k, Value{0}, true)));
  k.descending = true;
  k.nulls_first = true;  // DESC NULLS FIRST: NULL, NaN, inf, ..., -inf
  EXPECT_TRUE(limb_less(key_of(k, Value{0}, true), key_of(k, F(kNaN), false)));
  EXPECT_TRUE(limb_less(key_of(k, F(kNaN), false), key_of(k, F(kInf), false)));
  EXPECT_TRUE(limb_less(key_of(k, F(1), false), key_of(k, F(-kInf), false)));
}

TEST(ExprKeys, WideIntegerKeysKeepNullsApart) {
  SortKey k;
  k.type = Type::I64;
  EXPECT_EQ(k.limbs(), 2);
  // every int8 is below NULL (NULLS LAST), even INT64_MAX
  EXPECT_TRUE(limb_less(key_of(k, I(INT64_MAX), false), key_of(k, Value{0}, true)));
  EXPECT_TRUE(limb_less(key_of(k, I(INT64_MIN), false), key_of(k, I(-1), false)));
  k.nulls_first = true;
  k.descending = true;
  EXPECT_TRUE(limb_less(key_of(k, Value{0}, true), key_of(k, I(INT64_MAX), false)));
  EXPECT_TRUE(limb_less(key_of(k, I(INT64_MAX), false), key_of(k, I(INT64_MIN), false)));
  SortKey narrow;
  narrow.type = Type::I32;
  narrow.descending = true;
  EXPECT_TRUE(limb_less(key_of(narrow, I(2147483647), false), key_of(narrow, Value{0}, true)));
  EXPECT_TRUE(limb_less(key_of(narrow, I(-2147483648ll), false), key_of(narrow, Value{0}, true)));
}

}  // namespace
}  // namespace gknn::test
