// Hand-assembled bytecode for the interpreter tests: a tiny assembler over
// gknn::expr::Program, and a one-row batch to run expressions on.
#pragma once

#include <cstdint>
#include <vector>

#include "gknn/expr.h"

namespace gknn::test {

using namespace gknn::expr;

struct Asm {
  Program p;
  int emit(Op op, Type t = Type::I64, int arg = 0, int aux = 0) {
    p.code.push_back(Instr{op, static_cast<std::uint8_t>(t), static_cast<std::uint16_t>(aux), arg});
    return static_cast<int>(p.code.size()) - 1;
  }
  int constant(Value v, bool null = false) {
    p.consts.push_back(v);
    p.const_nulls.push_back(null);
    return static_cast<int>(p.consts.size()) - 1;
  }
  Asm& i(std::int64_t v) { return push(Value{v}); }
  Asm& f(double v) {
    Value x;
    x.f = v;
    return push(x);
  }
  Asm& null() { return push(Value{0}, true); }
  Asm& push(Value v, bool is_null = false) {
    emit(Op::Const, Type::I64, constant(v, is_null));
    return *this;
  }
  Asm& col(int c, Type t) {
    emit(Op::Col, t, c);
    return *this;
  }
  Asm& op(Op o, Type t = Type::I64, int aux = 0) {
    emit(o, t, 0, aux);
    return *this;
  }
  int here() const { return static_cast<int>(p.code.size()); }
  void patch(int at, int target) { p.code[at].arg = target; }
};

// A batch of one row per test value, columns given by the caller.
struct OneBatch {
  std::vector<std::vector<unsigned char>> data, nulls;
  std::vector<std::vector<std::int32_t>> dims;
  std::vector<std::uint64_t> ids;
  BatchView view;
  std::vector<ColumnSpec> specs;
};

}  // namespace gknn::test
