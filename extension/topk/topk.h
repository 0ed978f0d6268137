// GpuTopK: ORDER BY <expression> LIMIT k over one table, as a CustomScan.
//   topk_planner.cpp  planner hook, path, plan
//   topk_compile.cpp  PostgreSQL expressions -> gknn::expr bytecode
//   topk_exec.cpp     heap scan into batches, top-k, TID fetch, projection
//   topk_explain.cpp  EXPLAIN output
#pragma once

#include "gknn/expr.h"
#include "pg.h"

extern "C" {
#include "nodes/extensible.h"
#include "nodes/params.h"
#include "nodes/pathnodes.h"
}

extern bool gknn_enable_topk;
extern int gknn_topk_min_rows;
extern int gknn_max_k;
extern double gknn_topk_gpu_setup_cost;

void gknn_topk_register(void);  // _PG_init: hook and CustomScan methods

// Candidates fetched for k rows when quals of selectivity `sel` are
// rechecked over them: 1.5 k / sel + 16, room for the estimate's noise
// (topk_exec.cpp fetches 8 times more, then filters during a scan, when
// too few pass). Saturates at INT64_MAX / 16.
inline int64 topk_overfetch(int64 k, double sel) {
  const double limit = double(PG_INT64_MAX / 16);
  if (!(sel > 1e-6)) sel = 1e-6;  // NaN too
  const double n = 1.5 * double(k) / Min(sel, 1.0) + 16;
  return n >= limit ? PG_INT64_MAX / 16 : int64(n);
}

// ---- the compiler (topk_compile.cpp) ----

// Values of Params and Consts for the executor's compilation; the planner
// compiles without values, only to learn what compiles.
typedef Datum (*TopKValueFn)(void* arg, Node* node, bool* isnull);

// A program under construction, in palloc'd arrays (the catalog lookups it
// needs may raise, so it owns no C++ objects).
struct TopKEmitter {
  gknn::expr::Instr* code;
  int ncode, capcode;
  gknn::expr::Value* consts;
  uint8* const_nulls;
  int nconst, capconst;
  float* vectors;
  int nvectors, capvectors;
  Index scanrelid;
  int ncolumns;
  AttrNumber attnos[gknn::expr::kMaxColumns];
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  Node* case_arg;  // the CASE operand a CaseTestExpr stands for
  TopKValueFn value_fn;
  void* value_arg;
  // the program's segments
  gknn::expr::Segment qual, check;
  int nkeys;
  gknn::expr::SortKey keys[gknn::expr::kMaxKeyLimbs];
};

void topk_emitter_init(TopKEmitter* em, Index scanrelid, TopKValueFn fn, void* arg);
// Each returns false (leaving the emitter unusable) when something does not compile.
bool topk_compile_quals(TopKEmitter* em, List* quals);
bool topk_compile_key(TopKEmitter* em, Expr* expr, bool descending, bool nulls_first);
bool topk_compile_checks(TopKEmitter* em, List* exprs);
// How GpuTopK stores a column of `type` (typmod: a vector's dimensions),
// as the compiler does; false for a type it does not read.
bool topk_column_spec(Oid type, int32 typmod, gknn::expr::ColumnSpec* out);
// Puts the columns in attno order (after compiling; see topk_compile.cpp).
void topk_emitter_sort_columns(TopKEmitter* em);
// Whether an ORDER BY sort operator is its type's default < or > (and which).
bool topk_sortop_direction(Oid sortop, Oid type, bool* descending);
// Whether an expression, alone, compiles (planner checks).
bool topk_expr_compiles(Index scanrelid, Expr* expr);
// The vector type's OID is found by its input function (vector_in in gknn's library).
bool topk_is_vector_type(Oid type);
