// libFuzzer target: GpuTopK's bytecode validator (gpu/expr/program.cpp).
//
// The validator is what stands between a compiler bug and a wild read in the
// interpreter, on the CPU and inside a GPU kernel. The input is decoded into
// a batch schema and a program (any opcode, type, operand and segment
// bounds); a program the validator accepts is then run by the CPU
// interpreter on a batch that keeps the batch contract of gknn/expr.h, under
// ASan and UBSan: accepted programs must not read outside the program, the
// constants or the batch, nor overflow the interpreter's stack.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gknn/error.h"
#include "gknn/expr.h"

using namespace gknn::expr;

namespace {

constexpr int kRows = 4;
constexpr int kMaxOp = static_cast<int>(Op::VecDist) + 2;  // a few opcodes past the last
constexpr int kMaxType = static_cast<int>(Type::Vector) + 1;

// Small numbers most of the time (they are what reach deep into the
// validator), any 32-bit number sometimes.
std::int32_t operand(FuzzedDataProvider& in, int small) {
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) return in.ConsumeIntegral<std::int32_t>();
  return in.ConsumeIntegralInRange<std::int32_t>(-1, small);
}

Segment segment(FuzzedDataProvider& in, int code_size) {
  Segment s;
  s.begin = operand(in, code_size);
  s.end = in.ConsumeBool() && s.begin < code_size ? s.begin + in.ConsumeIntegralInRange<int>(0, 8)
                                                  : operand(in, code_size);
  return s;
}

// Storage of one column, laid out as the batch contract says: `dim` floats
// per vector row whatever the row's dimension.
struct Column {
  std::vector<unsigned char> data;
  std::vector<std::uint8_t> nulls;
  std::vector<std::int32_t> dims;
};

std::size_t row_bytes(const ColumnSpec& c) {
  switch (c.type) {
    case Type::Bool:
      return 1;
    case Type::I16:
      return 2;
    case Type::I32:
    case Type::Date:
    case Type::F32:
      return 4;
    case Type::Vector:
      return sizeof(float) * static_cast<std::size_t>(c.dim);
    default:
      return 8;
  }
}

// GKNN_FUZZ_DUMP=1 prints the decoded program (to read a crash's input).
void dump(const Program& p, const std::vector<ColumnSpec>& specs) {
  for (const ColumnSpec& c : specs) std::fprintf(stderr, "column type %d dim %d\n", int(c.type), c.dim);
  for (std::size_t i = 0; i < p.consts.size(); ++i)
    std::fprintf(stderr, "const %zu: %lld%s\n", i, static_cast<long long>(p.consts[i].i),
                 i < p.const_nulls.size() && p.const_nulls[i] ? " (null)" : "");
  for (std::size_t i = 0; i < p.code.size(); ++i)
    std::fprintf(stderr, "%3zu: op %d type %d aux %d arg %d\n", i, int(p.code[i].op), p.code[i].type,
                 p.code[i].aux, p.code[i].arg);
  std::fprintf(stderr, "qual [%d,%d) check [%d,%d)\n", p.qual.begin, p.qual.end, p.check.begin, p.check.end);
  for (const SortKey& k : p.keys)
    std::fprintf(stderr, "key [%d,%d) type %d\n", k.code.begin, k.code.end, int(k.type));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);

  std::vector<ColumnSpec> specs(in.ConsumeIntegralInRange<int>(0, 4));
  for (ColumnSpec& c : specs) {
    c.type = static_cast<Type>(in.ConsumeIntegralInRange<int>(0, kMaxType - 1));
    c.dim = c.type == Type::Vector ? in.ConsumeIntegralInRange<int>(1, 8) : 0;
  }

  Program p;
  p.vectors.resize(in.ConsumeIntegralInRange<int>(0, 16));
  for (float& x : p.vectors) x = static_cast<float>(in.ConsumeIntegralInRange<int>(-4, 4));
  const int nconst = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < nconst; ++i) {
    Value v;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:  // a vector constant: offset << 20 | dim
        v.i = static_cast<std::int64_t>(in.ConsumeIntegralInRange<int>(-1, 16)) * (1 << kVectorDimBits) +
              in.ConsumeIntegralInRange<int>(0, 9);
        break;
      case 1:
        v.f = in.ConsumeFloatingPoint<double>();
        break;
      default:
        v.i = in.ConsumeIntegral<std::int64_t>();
    }
    p.consts.push_back(v);
    p.const_nulls.push_back(in.ConsumeIntegralInRange<int>(0, 5) == 0);
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) p.const_nulls.push_back(0);  // a mismatched flag list

  const int ncode = in.ConsumeIntegralInRange<int>(0, 48);
  for (int i = 0; i < ncode; ++i) {
    Instr x;
    x.op = static_cast<Op>(in.ConsumeIntegralInRange<int>(0, kMaxOp));
    x.type = in.ConsumeIntegralInRange<int>(0, 15) == 0
                 ? in.ConsumeIntegral<std::uint8_t>()
                 : in.ConsumeIntegralInRange<std::uint8_t>(0, kMaxType);
    x.aux = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegral<std::uint16_t>()
                                                       : in.ConsumeIntegralInRange<std::uint16_t>(0, 9);
    x.arg = operand(in, ncode);
    p.code.push_back(x);
  }
  if (in.ConsumeBool()) p.qual = segment(in, ncode);
  if (in.ConsumeBool()) p.check = segment(in, ncode);
  const int nkeys = in.ConsumeIntegralInRange<int>(0, 4);
  for (int j = 0; j < nkeys; ++j) {
    SortKey k;
    k.code = segment(in, ncode);
    k.type = static_cast<Type>(in.ConsumeIntegralInRange<int>(0, kMaxType));
    k.descending = in.ConsumeBool();
    k.nulls_first = in.ConsumeBool();
    p.keys.push_back(k);
  }

  if (std::getenv("GKNN_FUZZ_DUMP")) dump(p, specs);
  try {
    validate(p, specs);
  } catch (const gknn::Error& e) {
    if (e.code() != gknn::ErrorCode::InvalidArgument) __builtin_trap();
    return 0;
  }

  // Accepted: run it on every row of a batch filled from the rest of the input.
  std::vector<Column> cols(specs.size());
  BatchView b;
  b.n = b.capacity = kRows;
  b.columns = static_cast<int>(specs.size());
  std::vector<std::uint64_t> ids(kRows);
  for (int r = 0; r < kRows; ++r) ids[r] = make_row_id(r, 1);
  b.row_ids = ids.data();
  for (std::size_t c = 0; c < specs.size(); ++c) {
    Column& col = cols[c];
    col.data = in.ConsumeBytes<unsigned char>(row_bytes(specs[c]) * kRows);
    col.data.resize(row_bytes(specs[c]) * kRows);
    col.nulls.resize(kRows);
    for (auto& n : col.nulls) n = in.ConsumeIntegralInRange<int>(0, 3) == 0;
    ColumnView& v = b.column[c];
    v.type = specs[c].type;
    v.data = col.data.data();
    v.nulls = col.nulls.data();
    v.dim = specs[c].dim;
    if (specs[c].type == Type::Vector) {
      col.dims.resize(kRows);
      for (auto& d : col.dims) d = in.ConsumeBool() ? specs[c].dim : in.ConsumeIntegralInRange<int>(0, 9);
      v.dims = col.dims.data();
    }
  }
  for (int r = 0; r < kRows; ++r) {
    bool passed = false;
    Selected word;
    std::int32_t detail[2] = {0, 0};
    ErrorKind e = eval_row_cpu(p, b, r, passed, word, detail);
    if (e == ErrorKind::StackOverflow) __builtin_trap();  // validated programs never overflow
  }
  return 0;
}
