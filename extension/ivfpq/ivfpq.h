// gpu_ivfpq index access method: shared declarations. One concern per file:
//   ivfpq_handler.cpp   the IndexAmRoutine, build phase names, GUCs, module init
//   ivfpq_element.*     operator classes: metric and element type (vector, halfvec)
//   ivfpq_options.cpp   reloptions (lists, m, nbits, training_sample, kmeans_iters)
//   ivfpq_format.*      page layout and page checks, no PostgreSQL (fuzzed)
//   ivfpq_pages.*       page helpers, checked reads of the metapage, quantizer, directory
//   ivfpq_chain.cpp     walking a chain of list pages, each page checked
//   ivfpq_build.cpp     ambuild / ambuildempty (sample, train, encode, write, WAL)
//   ivfpq_insert.cpp    aminsert (Generic WAL)
//   ivfpq_image.cpp     per-backend cache of searchable images (host, device)
//   ivfpq_log.cpp       the metapage's change log (written by insert and vacuum)
//   ivfpq_delta.cpp     what changed since a generation: the log and the pages it names
//   ivfpq_pagemap.*     where pages' items sit in an image; changes -> splices (no PostgreSQL)
//   ivfpq_scan.cpp      ordered scans: PQ candidates, exact re-rank, expansion
//   ivfpq_limit.cpp     ExecutorStart hook: the LIMIT above an index scan
//   ivfpq_vacuum.cpp    ambulkdelete / amvacuumcleanup
//   ivfpq_cost.cpp      amcostestimate
//   ivfpq_validate.cpp  amvalidate
//   ivfpq_info.cpp      gknn_ivfpq_info(regclass)
//   ivfpq_explain.cpp   EXPLAIN ANALYZE lines of a scan (where it searched, batches, waits)
// What it shares with gpu_graph (the scan machinery, the cost frame, the
// IndexAmRoutine, operator class reads): ../am/.
#pragma once

#include "pg.h"

#include "gknn/ivfpq.h"
#include "ivfpq/exact_bounds.h"
#include "ivfpq_pagemap.h"
#include "ivfpq_element.h"
#include "ivfpq_pages.h"

extern "C" {
#include "access/amapi.h"
#include "access/genam.h"
#include "nodes/pathnodes.h"
}

// Module init: GUCs, reloptions, the ExecutorStart hook (from _PG_init).
void gknn_ivfpq_register();

// GUCs
extern int gknn_ivfpq_probes;  // gknn.ivfpq_probes: lists scanned per query
extern int gknn_ivfpq_refine;  // gknn.ivfpq_refine: candidates = refine x k, re-ranked exactly
extern bool gknn_ivfpq_exact;  // gknn.ivfpq_exact: every entry ranked exactly (stored vectors)
extern bool gknn_ivfpq_delta;  // gknn.ivfpq_delta: changed images refreshed from the changed pages

// The LIMIT assumed when the executor hook found none above the scan.
constexpr int kIvfpqDefaultK = 10;

// Reloptions (rd_options of a gpu_ivfpq index).
struct IvfpqOptions {
  int32 vl_len_;
  int lists;            // coarse lists
  int m;                // sub-quantizers; 0: chosen from the dimension
  int nbits;            // bits per sub-quantizer code
  int training_sample;  // rows sampled for training; 0: chosen from lists
  int kmeans_iters;     // Lloyd iterations
};
constexpr int kIvfpqDefaultLists = 100;
constexpr int kIvfpqMaxLists = 1 << 20;
constexpr int kIvfpqDefaultNbits = 8;
constexpr int kIvfpqDefaultIters = 10;
constexpr int kIvfpqMaxTrainingSample = 10000000;
constexpr uint64 kIvfpqSeed = 1234;  // training's only randomness (sampling and k-means)

void ivfpq_register_options();
bytea* ivfpq_options(Datum reloptions, bool validate);
IvfpqOptions ivfpq_get_options(Relation index);
// m when the option is 0: the largest divisor of dim not above min(64, dim/2).
int ivfpq_default_m(int dim);
// The sample size when training_sample is 0.
int64 ivfpq_default_training_sample(int lists);
// ERROR (22000 / 54000) unless 1 <= dim <= kMaxDim: a stored vector of no,
// a negative or too many dimensions (older gknn versions' avg made them).
void ivfpq_check_vector_dim(int dim);
// ERROR (22000 / 22023 / 54000) when the parameters cannot index
// `dim`-dimensional vectors: dim out of range, m not dividing dim, a code too
// large for a page.
void ivfpq_check_params(int dim, int m, int nbits);

// The metric and element type of an index: ivfpq_element.h (its name:
// am/am_opclass.h).

// Build phases (pg_stat_progress_create_index.phase through amphasename).
enum IvfpqBuildPhase {
  kIvfpqPhaseSample = 2,  // 1 is PostgreSQL's "initializing"
  kIvfpqPhaseCoarse = 3,
  kIvfpqPhasePq = 4,
  kIvfpqPhaseEncode = 5,
  kIvfpqPhaseWal = 6,
};

// AM callbacks
IndexBuildResult* ivfpq_build(Relation heap, Relation index, IndexInfo* info);
void ivfpq_buildempty(Relation index);
bool ivfpq_insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation heap,
                  IndexUniqueCheck check_unique, bool index_unchanged, IndexInfo* info);
IndexBulkDeleteResult* ivfpq_bulkdelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                        IndexBulkDeleteCallback callback, void* callback_state);
IndexBulkDeleteResult* ivfpq_vacuumcleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats);
void ivfpq_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                        Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages);
bool ivfpq_validate(Oid opclassoid);
// amrescan, amgettuple, amendscan: am/ordered_scan.h (shared with gpu_graph).
IndexScanDesc ivfpq_beginscan(Relation index, int nkeys, int norderbys);

// EXPLAIN ANALYZE shows a scan's numbers (OrderedScanStats) under each
// gpu_ivfpq or gpu_graph Index Scan node.
void ivfpq_register_explain();

// The LIMIT (+ OFFSET) the running query puts above an index scan of
// `indexoid`, recorded by the ExecutorStart hook; 0 when unknown.
int64 ivfpq_limit_hint(Oid indexoid);
void ivfpq_register_limit_hook();

// A core operation that may be cancelled through its Progress callback:
// returns normally, or raises the pending interrupt (query cancel,
// termination) once the core's frames are gone, or the core's error.
template <typename Fn>
void ivfpq_core_call_cancellable(Fn&& fn);
// Progress callback's answer: false once a cancel or termination is pending.
bool ivfpq_interrupt_pending();

// The image of an index, cached per backend. Valid until the next
// ivfpq_image_get() in this backend (do not keep it across calls that could
// scan another gpu_ivfpq index).
struct IvfpqImage {
  IvfpqMeta meta;
  const gknn::ivfpq::Image* host;  // the coded entries; null unless asked for, or untrained
  const IvfpqPageMap* pages;       // the list pages `host`'s entries came from (with host)
  // host's bounds for its exact search, made on first use (with host)
  gknn_service::ExactBoundsCache* exact_bounds;
  int64 entries;         // coded entries in `host`
  const int64* pending;  // TIDs (as ids) of the pending chain
  int64 npending;
  const int64* nulls;  // TIDs (as ids) of the null chain
  int64 nnulls;
};
// The current image (reloaded when the metapage's generation or the
// relfilenode changed); with_host: with its coded entries (a CPU search, or
// shipping them to the GPU service).
const IvfpqImage* ivfpq_image_get(Relation index, bool with_host);
// The current image (without its coded entries) and, read under the same
// lock, what changed from generation `base` up to its generation (*delta,
// palloc'd; null when the change log cannot prove it): what the GPU service
// needs to bring its copy of generation `base` up to date.
const IvfpqImage* ivfpq_image_get_delta(Relation index, uint64 base, IvfpqDelta** delta);
// Frees the coded entries of an index's image in this backend (once shipped
// to the service, which keeps them for every session).
void ivfpq_image_release_host(Relation index);
// What changed in `index` after generation `base` up to `meta`'s (the
// metapage `metapage`, share-locked by the caller), from the change log and
// the pages it names (their items only when with_items); palloc'd, or null
// when the log cannot prove it.
IvfpqDelta* ivfpq_read_delta(Relation index, Page metapage, const IvfpqMeta& meta, uint64 base,
                             bool with_items);
// The quantizer alone (for inserts), cached per backend; null when untrained.
const gknn::ivfpq::Quantizer* ivfpq_quantizer_get(Relation index, const IvfpqMeta& meta);

// ---------------------------------------------------------------------------

#include "core_call.h"

extern "C" {
#include "miscadmin.h"
}

template <typename Fn>
void ivfpq_core_call_cancellable(Fn&& fn) {
  bool cancelled = false;
  gknn_pg::core_call([&] {
    try {
      fn();
    } catch (const gknn::Error& e) {
      if (e.code() != gknn::ErrorCode::Cancelled) throw;
      cancelled = true;
    }
  });
  if (cancelled) {
    CHECK_FOR_INTERRUPTS();
    // The interrupt was consumed elsewhere: still stop, as the core did.
    ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request")));
  }
}
