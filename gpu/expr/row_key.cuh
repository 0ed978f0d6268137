// One row of a GpuTopK query, on the CPU or the GPU: the qual, the check
// expressions and the ORDER BY keys, packed into ordered 64-bit limbs so that
// the row's place in the SQL order is the lexicographic order of its limbs
// followed by its row id (ties, as everywhere in gknn, break by TID).
//
// A key's limbs:
//   Narrow keys (int2/int4/date/bool widened to int64, float4/float8 as
//   double): one limb, the ordered bits of key_order.cuh (sign-flipped
//   integers, NaN above +inf, -0 = +0), inverted for DESC. These bits never
//   reach 0 or ~0, which are left for NULL: 0 with NULLS FIRST, ~0 with NULLS
//   LAST.
//   Wide keys (int8, timestamp): every 64-bit pattern is a value, so a
//   null-rank limb (0 NULLS FIRST, 1 a value, 2 NULLS LAST) comes first.
#pragma once

#include "expr/interp.cuh"
#include "select/key_order.cuh"

namespace gknn::expr {

// The query's shape, device-copyable.
struct RowPlan {
  Segment qual;
  Segment check;
  int nkeys = 0;
  SortKey keys[kMaxKeyLimbs];
  int key_limbs = 0;
};

GKNN_EXPR_HD std::uint64_t ordered_bits(Type t, Value v) {
  if (t == Type::F64 || t == Type::F32) return select::KeyBits<double>::ordered(v.f);
  return select::KeyBits<std::int64_t>::ordered(v.i);
}

// Writes the key limbs of value (v, null) at limbs[0..].
GKNN_EXPR_HD int put_key(const SortKey& k, Value v, bool null, std::uint64_t* limbs) {
  std::uint64_t bits = null ? 0 : ordered_bits(k.type, v);
  if (k.descending) bits = ~bits;
  if (k.kind() == KeyKind::Narrow) {
    limbs[0] = null ? (k.nulls_first ? 0ull : ~0ull) : bits;
    return 1;
  }
  limbs[0] = null ? (k.nulls_first ? 0u : 2u) : 1u;
  limbs[1] = null ? 0 : bits;
  return 2;
}

// Evaluates one row: qual first (a row that is not true is done), then the
// check expressions, then the keys, as PostgreSQL's scan evaluates its qual
// before the target list below a Sort. limbs gets key_limbs + 1 words.
GKNN_EXPR_HD ErrorKind eval_row(const ProgramView& p, const RowPlan& plan, const BatchView& b,
                                std::int64_t row, bool& passed, std::uint64_t* limbs, std::int32_t* detail) {
  Value v;
  bool null = false;
  passed = false;
  ErrorKind e;
  if (!plan.qual.empty()) {
    e = run(p, plan.qual, b, row, v, null, detail);
    if (e != ErrorKind::None) return e;
    if (null || v.i == 0) return ErrorKind::None;
  }
  if (!plan.check.empty()) {
    e = run(p, plan.check, b, row, v, null, detail);
    if (e != ErrorKind::None) return e;
  }
  int at = 0;
  for (int j = 0; j < plan.nkeys; ++j) {
    e = run(p, plan.keys[j].code, b, row, v, null, detail);
    if (e != ErrorKind::None) return e;
    at += put_key(plan.keys[j], v, null, limbs + at);
  }
  limbs[at] = b.row_ids[row];
  passed = true;
  return ErrorKind::None;
}

}  // namespace gknn::expr

namespace gknn::expr {

// Host-side helpers (program.cpp).
RowPlan row_plan(const Program& p);
ProgramView program_view(const Program& p);

}  // namespace gknn::expr
