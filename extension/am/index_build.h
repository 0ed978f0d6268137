// The frame of both index access methods' ambuild: the checks before it,
// pages written without WAL while it runs, every page WAL-logged once at
// its end, and its progress in pg_stat_progress_create_index (phase names:
// each access method's ambuildphasename).
#pragma once

#include "pg.h"

extern "C" {
#include "access/genam.h"
#include "commands/progress.h"
#include "storage/bufpage.h"
#include "utils/backend_progress.h"
#include "utils/rel.h"
}

// Before anything is read: ERROR unless the index is empty; the GPU
// service forgets its images of the index at commit (REINDEX, TRUNCATE,
// VACUUM FULL and CLUSTER build again).
void index_build_begin(Relation index);
// Writes a whole page at the end of the index, or over block `blk`
// (no WAL: index_build_finish logs every page).
BlockNumber index_build_append_page(Relation index, Page page);
void index_build_overwrite_page(Relation index, BlockNumber blk, Page page);
// Every page as a full image, once (subphase `wal_phase`), and ambuild's
// result.
IndexBuildResult* index_build_finish(Relation index, int64 wal_phase, double heap_tuples,
                                     double index_tuples);

// Sets the subphase and its tuples total and done at once. Shared-memory
// counters only: it raises no error, so the core's progress callbacks may
// call it.
inline void build_progress_report(int64 phase, int64 total, int64 done) {
  const int index[] = {PROGRESS_CREATEIDX_SUBPHASE, PROGRESS_CREATEIDX_TUPLES_TOTAL,
                       PROGRESS_CREATEIDX_TUPLES_DONE};
  const int64 val[] = {phase, total, done};
  pgstat_progress_update_multi_param(3, index, val);
}
