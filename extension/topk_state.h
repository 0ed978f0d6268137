// The GpuTopK executor node's state, shared by topk_exec.cpp and
// topk_explain.cpp.
#pragma once

#include "topk.h"

extern "C" {
#include "executor/executor.h"
}

struct TopKScanState {
  CustomScanState css;
  // from the plan (custom_exprs / custom_private, see topk_planner.cpp)
  List* quals;
  List* keys;
  List* checks;
  List* dirs;  // per key: 1 = DESC, 2 = NULLS FIRST
  Expr* limit;
  Expr* offset;
  bool quals_compiled;
  ExprState* residual;  // quals PostgreSQL evaluates during the scan (when they did not all compile)
  ExprState* limit_state;
  ExprState* offset_state;
  TupleTableSlot* fetch_slot;  // the table AM's slot, for fetches by TID
  // the run
  gknn::expr::TopK* topk;  // freed by EndCustomScan or the memory context callback
  MemoryContextCallback free_cb;
  bool done;
  uint64* row_ids;
  int64 nrows, next;
  // for EXPLAIN ANALYZE
  bool ran;
  int64 k;
  int64 heap_rows;
  int device;  // -1: CPU
  gknn::expr::TopKStats stats;
};
