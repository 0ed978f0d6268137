// Program checks, PostgreSQL's error messages, and the CPU interpreter's
// entry for one row.
#include <string>
#include <vector>

#include "expr/row_key.cuh"
#include "gknn/error.h"
#include "gknn/expr.h"

namespace gknn::expr {

namespace {

[[noreturn]] void bad(const std::string& what, int pc) {
  throw Error(ErrorCode::InvalidArgument,
              "invalid expression program: " + what + " at " + std::to_string(pc));
}

// Stack effect of an instruction and the operands it needs.
void effect(Op op, int& needs, int& delta) {
  switch (op) {
    case Op::Col:
    case Op::Const:
    case Op::VecDist:
      needs = 0, delta = 1;
      return;
    case Op::Pop:
    case Op::JumpIfNotTrue:
      needs = 1, delta = -1;
      return;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Mod:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or:
    case Op::Pow:
    case Op::Greatest:
    case Op::Least:
      needs = 2, delta = -1;
      return;
    case Op::Jump:
      needs = 0, delta = 0;
      return;
    default:
      needs = 1, delta = 0;
      return;
  }
}

bool is_jump(Op op) {
  return op == Op::Jump || op == Op::JumpIfFalse || op == Op::JumpIfTrue || op == Op::JumpIfNotTrue ||
         op == Op::JumpIfNotNull;
}

void check_operands(const Program& p, const std::vector<ColumnSpec>& cols, const Instr& in, int pc) {
  const int nconst = static_cast<int>(p.consts.size());
  if (in.op > Op::VecDist) bad("unknown instruction", pc);
  const auto last_type = static_cast<std::uint8_t>(Type::Vector);
  if (in.op != Op::VecDist && in.type > last_type) bad("unknown type", pc);
  if (in.op == Op::Cast && in.aux > last_type) bad("unknown type to cast from", pc);
  // The interpreter's float arithmetic has no modulo (nor has PostgreSQL).
  if (in.op == Op::Mod &&
      (in.type == static_cast<std::uint8_t>(Type::F32) || in.type == static_cast<std::uint8_t>(Type::F64)))
    bad("modulo of floats", pc);
  switch (in.op) {
    case Op::Col:
      if (in.arg < 0 || in.arg >= static_cast<int>(cols.size())) bad("column out of range", pc);
      if (cols[in.arg].type == Type::Vector) bad("vector column as a value", pc);
      break;
    case Op::Const:
      if (in.arg < 0 || in.arg >= nconst) bad("constant out of range", pc);
      break;
    case Op::InList:  // in 64 bits: arg + aux overflows int near INT_MAX
      if (in.arg < 0 || std::int64_t{in.arg} + in.aux > nconst) bad("list out of range", pc);
      break;
    case Op::VecDist: {
      if (in.arg < 0 || in.arg >= static_cast<int>(cols.size()) || cols[in.arg].type != Type::Vector)
        bad("not a vector column", pc);
      if (in.aux >= nconst) bad("vector constant out of range", pc);
      if ((in.type & 0x7f) > interp::kMetricPositiveIp) bad("unknown metric", pc);
      const std::int64_t packed = p.consts[in.aux].i;
      const std::int64_t dim = packed & ((1 << kVectorDimBits) - 1), off = packed >> kVectorDimBits;
      if (!p.const_nulls[in.aux] && (off < 0 || off + dim > static_cast<std::int64_t>(p.vectors.size())))
        bad("vector constant outside the pool", pc);
      // A batch keeps the elements of rows of the column's dimension only,
      // so a constant of another dimension would match rows whose elements
      // are not there.
      if (!p.const_nulls[in.aux] && dim != cols[in.arg].dim) bad("vector constant of another dimension", pc);
      break;
    }
    default:
      break;
  }
}

// Depth simulation of one segment; jumps go forward only, so one pass sees
// every path. The segment must leave exactly one value.
int check_segment(const Program& p, const std::vector<ColumnSpec>& cols, Segment seg) {
  if (seg.empty()) return 0;
  if (seg.begin < 0 || seg.end > static_cast<int>(p.code.size()) || seg.begin > seg.end)
    bad("segment", seg.begin);
  std::vector<int> at(seg.end - seg.begin + 1, -1);
  int depth = 0, deepest = 0;
  bool reachable = true;
  for (int pc = seg.begin; pc <= seg.end; ++pc) {
    int& known = at[pc - seg.begin];
    if (!reachable) {
      if (known < 0) bad("unreachable code", pc);
      depth = known;
    } else if (known >= 0 && known != depth) {
      bad("stack depths disagree", pc);
    }
    reachable = true;
    if (pc == seg.end) break;
    const Instr& in = p.code[pc];
    check_operands(p, cols, in, pc);
    int needs = 0, delta = 0;
    effect(in.op, needs, delta);
    if (depth < needs) bad("stack underflow", pc);
    depth += delta;
    if (depth > kMaxStack) bad("stack too deep", pc);
    deepest = depth > deepest ? depth : deepest;
    if (is_jump(in.op)) {
      if (in.arg <= pc || in.arg > seg.end) bad("jump out of its segment", pc);
      int& t = at[in.arg - seg.begin];
      if (t >= 0 && t != depth) bad("stack depths disagree at a jump target", pc);
      t = depth;
      reachable = in.op != Op::Jump;
    }
  }
  if (depth != 1) bad("segment must leave one value", seg.end);
  return deepest;
}

}  // namespace

void validate(const Program& p, const std::vector<ColumnSpec>& columns) {
  if (columns.size() > static_cast<std::size_t>(kMaxColumns)) bad("too many columns", 0);
  if (p.const_nulls.size() != p.consts.size()) bad("constant null flags", 0);
  if (p.key_limbs() > kMaxKeyLimbs) bad("too many key limbs", 0);
  check_segment(p, columns, p.qual);
  check_segment(p, columns, p.check);
  for (const SortKey& k : p.keys) {
    if (k.code.empty()) bad("empty key", 0);
    check_segment(p, columns, k.code);
  }
}

RowPlan row_plan(const Program& p) {
  RowPlan plan;
  plan.qual = p.qual;
  plan.check = p.check;
  plan.nkeys = static_cast<int>(p.keys.size());
  for (int j = 0; j < plan.nkeys; ++j) plan.keys[j] = p.keys[j];
  plan.key_limbs = p.key_limbs();
  return plan;
}

ProgramView program_view(const Program& p) {
  return ProgramView{p.code.data(), p.consts.data(), p.const_nulls.data(), p.vectors.data(), 0};
}

ErrorKind eval_row_cpu(const Program& program, const BatchView& batch, std::int64_t row, bool& passed,
                       Selected& word, std::int32_t detail[2]) {
  const RowPlan plan = row_plan(program);
  word.nlimbs = plan.key_limbs + 1;
  return eval_row(program_view(program), plan, batch, row, passed, word.limbs, detail);
}

std::string error_message(const EvalError& e) {
  switch (e.kind) {
    case ErrorKind::None:
      return "no error";
    case ErrorKind::SmallintRange:
      return "smallint out of range";
    case ErrorKind::IntegerRange:
      return "integer out of range";
    case ErrorKind::BigintRange:
      return "bigint out of range";
    case ErrorKind::DivisionByZero:
      return "division by zero";
    case ErrorKind::FloatOverflow:
      return "value out of range: overflow";
    case ErrorKind::FloatUnderflow:
      return "value out of range: underflow";
    case ErrorKind::SqrtNegative:
      return "cannot take square root of a negative number";
    case ErrorKind::LogZero:
      return "cannot take logarithm of zero";
    case ErrorKind::LogNegative:
      return "cannot take logarithm of a negative number";
    case ErrorKind::PowZeroNegative:
      return "zero raised to a negative power is undefined";
    case ErrorKind::PowNegativeFrac:
      return "a negative number raised to a non-integer power yields a complex result";
    case ErrorKind::TimestampRange:
      return "date out of range for timestamp";
    case ErrorKind::VectorDims:
      return "different vector dimensions " + std::to_string(e.detail[0]) + " and " +
             std::to_string(e.detail[1]);
    case ErrorKind::StackOverflow:
      return "expression stack overflow";
  }
  return "unknown expression error";
}

}  // namespace gknn::expr
