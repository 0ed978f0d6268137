// Walks of a finished plan, for gknn's plan hooks (ivfpq/ivfpq_limit.cpp,
// am/ordered_projection.cpp), which look for their index scans in it.
#pragma once

#include "pg.h"

extern "C" {
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "nodes/plannodes.h"
}

// Calls fn(plan) for every node of a plan tree, each before its children:
// its outer and inner plans, then the plans an Append, MergeAppend,
// BitmapAnd, BitmapOr, Subquery Scan or CustomScan holds.
template <typename Fn>
void walk_plan(Plan* plan, Fn& fn) {
  if (plan == nullptr) return;
  check_stack_depth();
  fn(plan);
  walk_plan(outerPlan(plan), fn);
  walk_plan(innerPlan(plan), fn);
  List* held = NIL;
  switch (nodeTag(plan)) {
    case T_Append:
      held = reinterpret_cast<Append*>(plan)->appendplans;
      break;
    case T_MergeAppend:
      held = reinterpret_cast<MergeAppend*>(plan)->mergeplans;
      break;
    case T_BitmapAnd:
      held = reinterpret_cast<BitmapAnd*>(plan)->bitmapplans;
      break;
    case T_BitmapOr:
      held = reinterpret_cast<BitmapOr*>(plan)->bitmapplans;
      break;
    case T_SubqueryScan:
      walk_plan(reinterpret_cast<SubqueryScan*>(plan)->subplan, fn);
      break;
    case T_CustomScan:
      held = reinterpret_cast<CustomScan*>(plan)->custom_plans;
      break;
    default:
      break;
  }
  ListCell* lc;
  foreach (lc, held) walk_plan(static_cast<Plan*>(lfirst(lc)), fn);
}

// The same over a statement: its plan tree, then each InitPlan's, SubPlan's
// and CTE's (an entry may be null: a pruned one).
template <typename Fn>
void walk_statement(PlannedStmt* stmt, Fn&& fn) {
  walk_plan(stmt->planTree, fn);
  ListCell* lc;
  foreach (lc, stmt->subplans) walk_plan(static_cast<Plan*>(lfirst(lc)), fn);
}
