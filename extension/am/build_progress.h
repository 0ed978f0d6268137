// An index build's phase and its progress in pg_stat_progress_create_index
// (phase names: each access method's ambuildphasename).
#pragma once

#include "pg.h"

extern "C" {
#include "commands/progress.h"
#include "utils/backend_progress.h"
}

// Sets the subphase and its tuples total and done at once. Shared-memory
// counters only: it raises no error, so the core's progress callbacks may
// call it.
inline void build_progress_report(int64 phase, int64 total, int64 done) {
  const int index[] = {PROGRESS_CREATEIDX_SUBPHASE, PROGRESS_CREATEIDX_TUPLES_TOTAL,
                       PROGRESS_CREATEIDX_TUPLES_DONE};
  const int64 val[] = {phase, total, done};
  pgstat_progress_update_multi_param(3, index, val);
}
