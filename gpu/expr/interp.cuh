// The one interpreter of gknn's expression bytecode (gknn/expr.h), compiled
// by the host compiler for the CPU path and by nvcc inside the GPU top-k
// kernels, so both run the same code: PostgreSQL 15's semantics for NULLs,
// NaN, -0, integer overflow, division by zero and the float8 functions
// (utils/float.h, int.c, int8.c, float.c, date.c).
#pragma once

#include <math.h>

#include <cstdint>

#include "gknn/distance.h"
#include "gknn/expr.h"

#if defined(__CUDACC__)
#define GKNN_EXPR_HD __host__ __device__ __forceinline__
#else
#define GKNN_EXPR_HD inline
#endif

namespace gknn::expr {

// Device-copyable view of a program's arrays.
struct ProgramView {
  const Instr* code;
  const Value* consts;
  const std::uint8_t* const_nulls;
  const float* vectors;
  // Where this program's precomputed distances sit past ColumnView::dist:
  // programs ranked together share their batch views (kept_shared_cuda.cu).
  std::int64_t dist_shift;
};

namespace interp {

constexpr std::int64_t kI64Min = static_cast<std::int64_t>(0x8000000000000000ull);
constexpr std::int64_t kI64Max = 0x7fffffffffffffffll;

GKNN_EXPR_HD bool is_nan(double x) { return x != x; }
GKNN_EXPR_HD bool is_inf(double x) { return x == INFINITY || x == -INFINITY; }

// ---- integers (values of every width sit in int64) ----

GKNN_EXPR_HD ErrorKind range_error(Type t) {
  return t == Type::I16 ? ErrorKind::SmallintRange
                        : (t == Type::I32 ? ErrorKind::IntegerRange : ErrorKind::BigintRange);
}

GKNN_EXPR_HD bool in_range(Type t, std::int64_t v) {
  if (t == Type::I16) return v >= -32768 && v <= 32767;
  if (t == Type::I32) return v >= -2147483648ll && v <= 2147483647ll;
  return true;
}

// -a without C's overflow on INT64_MIN (a value of no narrower type, so
// the range check that follows rejects it).
GKNN_EXPR_HD std::int64_t negate(std::int64_t a) {
  return static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(a));
}

// int2/int4 operands never overflow int64, so their results are range
// checked afterwards; int8 checks the operation itself (pg_add_s64_overflow).
GKNN_EXPR_HD ErrorKind int_arith(Op op, Type t, std::int64_t a, std::int64_t b, std::int64_t& r) {
  const bool wide = t == Type::I64;
  switch (op) {
    case Op::Add: {
      std::uint64_t u = static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b);
      r = static_cast<std::int64_t>(u);
      if (wide && ((a ^ r) & (b ^ r)) < 0) return ErrorKind::BigintRange;
      break;
    }
    case Op::Sub: {
      std::uint64_t u = static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b);
      r = static_cast<std::int64_t>(u);
      if (wide && ((a ^ b) & (a ^ r)) < 0) return ErrorKind::BigintRange;
      break;
    }
    case Op::Mul: {
      __int128 p = static_cast<__int128>(a) * b;
      if (wide && (p < kI64Min || p > kI64Max)) return ErrorKind::BigintRange;
      r = static_cast<std::int64_t>(p);
      break;
    }
    case Op::Div:
      if (b == 0) return ErrorKind::DivisionByZero;
      if (b == -1) {  // INT_MIN / -1 overflows (and traps in C)
        if (wide && a == kI64Min) return ErrorKind::BigintRange;
        r = negate(a);
      } else {
        r = a / b;
      }
      break;
    case Op::Mod:
      if (b == 0) return ErrorKind::DivisionByZero;
      r = b == -1 ? 0 : a % b;  // INT_MIN % -1 traps in C; PostgreSQL returns 0
      break;
    default:
      return ErrorKind::StackOverflow;
  }
  return in_range(t, r) ? ErrorKind::None : range_error(t);
}

GKNN_EXPR_HD ErrorKind int_unary(Op op, Type t, std::int64_t a, std::int64_t& r) {
  if (op == Op::Abs && a >= 0) {
    r = a;
    return ErrorKind::None;
  }
  if (t == Type::I64 && a == kI64Min) return ErrorKind::BigintRange;
  r = negate(a);
  return in_range(t, r) ? ErrorKind::None : range_error(t);
}

// ---- floats: float8_pl & co. of utils/float.h, in the operand's width ----

template <typename F>
GKNN_EXPR_HD ErrorKind float_arith(Op op, F a, F b, F& r) {
  const bool ia = is_inf(a), ib = is_inf(b);
  switch (op) {
    case Op::Add:
      r = a + b;
      if (is_inf(r) && !ia && !ib) return ErrorKind::FloatOverflow;
      return ErrorKind::None;
    case Op::Sub:
      r = a - b;
      if (is_inf(r) && !ia && !ib) return ErrorKind::FloatOverflow;
      return ErrorKind::None;
    case Op::Mul:
      r = a * b;
      if (is_inf(r) && !ia && !ib) return ErrorKind::FloatOverflow;
      if (r == F(0) && a != F(0) && b != F(0)) return ErrorKind::FloatUnderflow;
      return ErrorKind::None;
    case Op::Div:
      if (b == F(0) && !is_nan(a)) return ErrorKind::DivisionByZero;
      r = a / b;
      if (is_inf(r) && !ia) return ErrorKind::FloatOverflow;
      if (r == F(0) && a != F(0) && !ib) return ErrorKind::FloatUnderflow;
      return ErrorKind::None;
    default:
      return ErrorKind::StackOverflow;
  }
}

// float8_eq / float8_lt: NaN equals NaN and sorts above every number.
GKNN_EXPR_HD bool float_eq(double a, double b) { return is_nan(a) ? is_nan(b) : (!is_nan(b) && a == b); }
GKNN_EXPR_HD bool float_lt(double a, double b) { return !is_nan(a) && (is_nan(b) || a < b); }

// -1, 0, 1 as the type's btree comparison (I64 and Bool: integers).
GKNN_EXPR_HD int compare(Type t, Value a, Value b) {
  if (t == Type::F64) return float_lt(a.f, b.f) ? -1 : (float_eq(a.f, b.f) ? 0 : 1);
  return a.i < b.i ? -1 : (a.i == b.i ? 0 : 1);
}

GKNN_EXPR_HD bool compare_op(Op op, int c) {
  switch (op) {
    case Op::Eq:
      return c == 0;
    case Op::Ne:
      return c != 0;
    case Op::Lt:
      return c < 0;
    case Op::Le:
      return c <= 0;
    case Op::Gt:
      return c > 0;
    default:
      return c >= 0;
  }
}

// ---- float8 functions (float.c: dsqrt, dlog1, dexp, dpow) ----

GKNN_EXPR_HD ErrorKind f_sqrt(double a, double& r) {
  if (a < 0) return ErrorKind::SqrtNegative;
  r = sqrt(a);
  return ErrorKind::None;
}

GKNN_EXPR_HD ErrorKind f_ln(double a, double& r) {
  if (a == 0.0) return ErrorKind::LogZero;
  if (a < 0) return ErrorKind::LogNegative;
  r = log(a);
  return ErrorKind::None;
}

// Subnormal results are results (glibc's exp and pow leave errno alone for
// them; PostgreSQL 15 checks errno, then inf and zero).
GKNN_EXPR_HD ErrorKind f_exp(double a, double& r) {
  if (is_nan(a)) {
    r = a;
  } else if (is_inf(a)) {
    r = a > 0 ? a : 0.0;
  } else {
    r = exp(a);
    if (is_inf(r)) return ErrorKind::FloatOverflow;
    if (r == 0.0) return ErrorKind::FloatUnderflow;
  }
  return ErrorKind::None;
}

GKNN_EXPR_HD ErrorKind f_pow(double x, double y, double& r) {
  if (is_nan(x)) {
    r = (is_nan(y) || y != 0.0) ? x : 1.0;
    return ErrorKind::None;
  }
  if (is_nan(y)) {
    r = x != 1.0 ? y : 1.0;
    return ErrorKind::None;
  }
  if (x == 0 && y < 0) return ErrorKind::PowZeroNegative;
  if (x < 0 && floor(y) != y) return ErrorKind::PowNegativeFrac;
  if (is_inf(y)) {
    double ax = fabs(x);
    if (ax == 1.0)
      r = 1.0;
    else if (y > 0.0)
      r = ax > 1.0 ? y : 0.0;
    else
      r = ax > 1.0 ? 0.0 : -y;
  } else if (is_inf(x)) {
    if (y == 0.0) {
      r = 1.0;
    } else if (x > 0.0) {
      r = y > 0.0 ? x : 0.0;
    } else {
      double halfy = y / 2;
      bool odd = floor(halfy) != halfy;
      r = y > 0.0 ? (odd ? x : -x) : (odd ? -0.0 : 0.0);
    }
  } else {
    r = pow(x, y);
    if (is_inf(r)) return ErrorKind::FloatOverflow;
    if (r == 0.0 && x != 0.0) return ErrorKind::FloatUnderflow;
  }
  return ErrorKind::None;
}

// ---- casts (int.c, int8.c, float.c, date.c) ----

GKNN_EXPR_HD bool is_int(Type t) {
  return t == Type::I16 || t == Type::I32 || t == Type::I64 || t == Type::Date || t == Type::Timestamp;
}

// dtoi4 & co.: round to nearest even, then a range check that lets values
// round into range. Bounds as PostgreSQL writes them: [MIN, -MIN).
GKNN_EXPR_HD ErrorKind float_to_int(double v, Type to, bool from_f32, std::int64_t& r) {
  double lo = to == Type::I16 ? -32768.0 : (to == Type::I32 ? -2147483648.0 : -9223372036854775808.0);
  double n;
  if (from_f32) {
    float f = rintf(static_cast<float>(v));
    if (is_nan(f) || !(f >= static_cast<float>(lo) && f < -static_cast<float>(lo))) return range_error(to);
    n = f;
  } else {
    n = rint(v);
    if (is_nan(n) || !(n >= lo && n < -lo)) return range_error(to);
  }
  r = static_cast<std::int64_t>(n);
  return ErrorKind::None;
}

constexpr std::int64_t kUsecsPerDay = 86400000000ll;
constexpr std::int64_t kDateEndForTimestamp =
    109203528 - 2451545;  // TIMESTAMP_END_JULIAN - POSTGRES_EPOCH_JDATE
// The first date PostgreSQL stores (DATETIME_MIN_JULIAN - POSTGRES_EPOCH_JDATE):
// date_in refuses earlier ones, so a value below it is no date, and the
// multiplication below would overflow.
constexpr std::int64_t kDateMinForTimestamp = 0 - 2451545;

GKNN_EXPR_HD ErrorKind cast(Type to, Type from, Value a, Value& r) {
  if (from == Type::Date && to == Type::Timestamp) {  // date2timestamp
    if (a.i == -2147483648ll)
      r.i = kI64Min;
    else if (a.i == 2147483647ll)
      r.i = kI64Max;
    else if (a.i >= kDateEndForTimestamp || a.i < kDateMinForTimestamp)
      return ErrorKind::TimestampRange;
    else
      r.i = a.i * kUsecsPerDay;
    return ErrorKind::None;
  }
  if (to == Type::Bool) {  // int4_bool
    r.i = a.i != 0;
    return ErrorKind::None;
  }
  if (from == Type::Bool || (is_int(from) && is_int(to))) {
    r.i = a.i;
    return in_range(to, a.i) ? ErrorKind::None : range_error(to);
  }
  if (is_int(from)) {  // i4tod, i8tof, ...: one rounding of the exact integer
    r.f = to == Type::F32 ? static_cast<double>(static_cast<float>(a.i)) : static_cast<double>(a.i);
    return ErrorKind::None;
  }
  if (is_int(to)) return float_to_int(a.f, to, from == Type::F32, r.i);
  if (to == Type::F32 && from == Type::F64) {  // dtof
    float f = static_cast<float>(a.f);
    if (is_inf(f) && !is_inf(a.f)) return ErrorKind::FloatOverflow;
    if (f == 0.0f && a.f != 0.0) return ErrorKind::FloatUnderflow;
    r.f = f;
    return ErrorKind::None;
  }
  r.f = a.f;  // float4 -> float8 is exact
  return ErrorKind::None;
}

GKNN_EXPR_HD void load_column(const ColumnView& c, std::int64_t row, Value& v) {
  switch (c.type) {
    case Type::Bool:
      v.i = static_cast<const std::uint8_t*>(c.data)[row];
      break;
    case Type::I16:
      v.i = static_cast<const std::int16_t*>(c.data)[row];
      break;
    case Type::I32:
    case Type::Date:
      v.i = static_cast<const std::int32_t*>(c.data)[row];
      break;
    case Type::F32:
      v.f = static_cast<const float*>(c.data)[row];
      break;
    case Type::F64:
      v.f = static_cast<const double*>(c.data)[row];
      break;
    default:
      v.i = static_cast<const std::int64_t*>(c.data)[row];
      break;
  }
}

// Vector distance metrics: gknn::Metric, plus the positive inner_product().
constexpr int kMetricPositiveIp = 4;
constexpr int kMetricConstFirst = 0x80;  // the constant is the left operand (error message order)

// Which VecDist a column's precomputed distances are for (ColumnView::dist_key).
GKNN_EXPR_HD std::int32_t distance_key(const Instr& in) {
  return static_cast<std::int32_t>(in.aux) << 8 | (in.type & 0x7f);
}

GKNN_EXPR_HD ErrorKind vec_dist(const ProgramView& p, const BatchView& b, const Instr& in, std::int64_t row,
                                Value& out, bool& null, std::int32_t* detail) {
  const ColumnView& c = b.column[in.arg];
  const std::uint8_t metric = in.type & 0x7f;
  null = (c.nulls && c.nulls[row]) || p.const_nulls[in.aux];
  if (null) return ErrorKind::None;
  const std::int64_t packed = p.consts[in.aux].i;
  const int qdim = static_cast<int>(packed & ((1 << kVectorDimBits) - 1));
  const float* q = p.vectors + (packed >> kVectorDimBits);
  const int rdim = c.dims[row];
  if (rdim != qdim) {
    bool const_first = (in.type & kMetricConstFirst) != 0;
    detail[0] = const_first ? qdim : rdim;
    detail[1] = const_first ? rdim : qdim;
    return ErrorKind::VectorDims;
  }
  const float* x = static_cast<const float*>(c.data) + row * static_cast<std::int64_t>(c.dim);
  if (c.dist && c.dist_key == distance_key(in))
    out.f = c.dist[row + p.dist_shift];  // the same value, summed by 8 threads
  else if (metric == kMetricPositiveIp)
    out.f = static_cast<double>(inner_product(x, q, rdim));
  else
    out.f = distance(static_cast<Metric>(metric), x, q, rdim);
  return ErrorKind::None;
}

// Three-valued AND/OR of a and b (PostgreSQL's BoolExpr).
GKNN_EXPR_HD void and3(Value& a, bool& an, Value b, bool bn) {
  if ((!an && a.i == 0) || (!bn && b.i == 0)) {
    a.i = 0;
    an = false;
  } else {
    an = an || bn;
    a.i = 1;
  }
}
GKNN_EXPR_HD void or3(Value& a, bool& an, Value b, bool bn) {
  if ((!an && a.i != 0) || (!bn && b.i != 0)) {
    a.i = 1;
    an = false;
  } else {
    an = an || bn;
    a.i = 0;
  }
}

GKNN_EXPR_HD bool boolean_test(Op op, Value v, bool n) {
  switch (op) {
    case Op::IsTrue:
      return !n && v.i;
    case Op::IsNotTrue:
      return n || !v.i;
    case Op::IsFalse:
      return !n && !v.i;
    case Op::IsNotFalse:
      return n || v.i;
    case Op::IsUnknown:
      return n;
    default:
      return !n;
  }
}

}  // namespace interp

// Runs code[seg.begin, seg.end) for one row; the value left on the stack is
// the result. Returns the first error (the row's evaluation stops there).
GKNN_EXPR_HD ErrorKind run(const ProgramView& p, Segment seg, const BatchView& b, std::int64_t row,
                           Value& out, bool& out_null, std::int32_t* detail) {
  using namespace interp;
  Value st[kMaxStack];
  bool nl[kMaxStack];
  int sp = 0;  // next free slot
  for (int pc = seg.begin; pc < seg.end;) {
    const Instr in = p.code[pc++];
    const Type t = static_cast<Type>(in.type);
    ErrorKind e = ErrorKind::None;
    switch (in.op) {
      case Op::Col: {
        const ColumnView& c = b.column[in.arg];
        nl[sp] = c.nulls && c.nulls[row];
        load_column(c, row, st[sp]);
        ++sp;
        break;
      }
      case Op::Const:
        st[sp] = p.consts[in.arg];
        nl[sp] = p.const_nulls[in.arg];
        ++sp;
        break;
      case Op::Pop:
        --sp;
        break;
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Mod: {
        --sp;
        Value& a = st[sp - 1];
        nl[sp - 1] = nl[sp - 1] || nl[sp];
        if (nl[sp - 1]) break;  // strict: not evaluated on NULL
        if (t == Type::F64) {
          e = float_arith<double>(in.op, a.f, st[sp].f, a.f);
        } else if (t == Type::F32) {
          float r = 0;
          e = float_arith<float>(in.op, static_cast<float>(a.f), static_cast<float>(st[sp].f), r);
          a.f = r;
        } else {
          e = int_arith(in.op, t, a.i, st[sp].i, a.i);
        }
        break;
      }
      case Op::Neg:
      case Op::Abs: {
        Value& a = st[sp - 1];
        if (nl[sp - 1]) break;
        if (t == Type::F64 || t == Type::F32)
          a.f = in.op == Op::Neg ? -a.f : fabs(a.f);
        else
          e = int_unary(in.op, t, a.i, a.i);
        break;
      }
      case Op::Eq:
      case Op::Ne:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge: {
        --sp;
        nl[sp - 1] = nl[sp - 1] || nl[sp];
        if (!nl[sp - 1]) st[sp - 1].i = compare_op(in.op, compare(t, st[sp - 1], st[sp]));
        break;
      }
      case Op::Not:
        if (!nl[sp - 1]) st[sp - 1].i = !st[sp - 1].i;
        break;
      case Op::And:
        --sp;
        and3(st[sp - 1], nl[sp - 1], st[sp], nl[sp]);
        break;
      case Op::Or:
        --sp;
        or3(st[sp - 1], nl[sp - 1], st[sp], nl[sp]);
        break;
      case Op::JumpIfFalse:
        if (!nl[sp - 1] && st[sp - 1].i == 0) pc = in.arg;
        break;
      case Op::JumpIfTrue:
        if (!nl[sp - 1] && st[sp - 1].i != 0) pc = in.arg;
        break;
      case Op::JumpIfNotTrue:
        --sp;
        if (nl[sp] || st[sp].i == 0) pc = in.arg;
        break;
      case Op::JumpIfNotNull:
        if (!nl[sp - 1]) pc = in.arg;
        break;
      case Op::Jump:
        pc = in.arg;
        break;
      case Op::IsNull:
      case Op::IsNotNull:
        st[sp - 1].i = nl[sp - 1] == (in.op == Op::IsNull);
        nl[sp - 1] = false;
        break;
      case Op::IsTrue:
      case Op::IsNotTrue:
      case Op::IsFalse:
      case Op::IsNotFalse:
      case Op::IsUnknown:
      case Op::IsNotUnknown:
        st[sp - 1].i = boolean_test(in.op, st[sp - 1], nl[sp - 1]);
        nl[sp - 1] = false;
        break;
      case Op::Cast:
        if (!nl[sp - 1]) e = cast(t, static_cast<Type>(in.aux), st[sp - 1], st[sp - 1]);
        break;
      case Op::Sqrt:
      case Op::Ln:
      case Op::Exp:
      case Op::Floor:
      case Op::Ceil: {
        double& a = st[sp - 1].f;
        if (nl[sp - 1]) break;
        if (in.op == Op::Sqrt)
          e = f_sqrt(a, a);
        else if (in.op == Op::Ln)
          e = f_ln(a, a);
        else if (in.op == Op::Exp)
          e = f_exp(a, a);
        else
          a = in.op == Op::Floor ? floor(a) : ceil(a);
        break;
      }
      case Op::Pow:
        --sp;
        nl[sp - 1] = nl[sp - 1] || nl[sp];
        if (!nl[sp - 1]) e = f_pow(st[sp - 1].f, st[sp].f, st[sp - 1].f);
        break;
      case Op::Greatest:
      case Op::Least: {
        --sp;  // keep the earlier value unless the later one is strictly better (ExecEvalMinMax)
        if (nl[sp]) break;
        int c = nl[sp - 1] ? 0 : compare(t, st[sp], st[sp - 1]);
        if (nl[sp - 1] || (in.op == Op::Greatest ? c > 0 : c < 0)) {
          st[sp - 1] = st[sp];
          nl[sp - 1] = false;
        }
        break;
      }
      case Op::InList: {
        Value x = st[sp - 1];
        if (in.aux == 0) {  // an empty list is false even for NULL
          st[sp - 1].i = 0;
          nl[sp - 1] = false;
          break;
        }
        if (nl[sp - 1]) break;
        bool found = false, any_null = false;
        for (int j = 0; j < in.aux && !found; ++j) {
          if (p.const_nulls[in.arg + j])
            any_null = true;
          else
            found = compare(t, x, p.consts[in.arg + j]) == 0;
        }
        st[sp - 1].i = found;
        nl[sp - 1] = !found && any_null;
        break;
      }
      case Op::VecDist: {
        bool n = false;
        e = vec_dist(p, b, in, row, st[sp], n, detail);
        nl[sp] = n;
        ++sp;
        break;
      }
    }
    if (e != ErrorKind::None) return e;
  }
  out = st[sp - 1];
  out_null = nl[sp - 1];
  return ErrorKind::None;
}

}  // namespace gknn::expr
