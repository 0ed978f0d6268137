// gpu_graph index access method: shared declarations. One concern per file:
//   graph_handler.cpp   the IndexAmRoutine, build phase names, GUCs, module init
//   graph_options.cpp   reloptions (degree, intermediate_degree) and their checks
//   graph_opclass.cpp   the operator class's metric
//   graph_format.*      page layout and page checks, no PostgreSQL
//   graph_pages.*       page helpers, checked reads of the metapage and node slots
//   graph_build.cpp     ambuild / ambuildempty (read rows, core build, pages, WAL)
//   graph_image.cpp     per-backend cache of the searchable graph (vectors + edges)
//   graph_scan.cpp      ordered scans: graph search (the GPU service or this backend's CPU),
//                       widening rounds, exhaustive end
//   graph_insert.cpp    aminsert (search, prune, reverse edges; Generic WAL)
//   graph_vacuum.cpp    ambulkdelete / amvacuumcleanup (mark dead, repair lists)
//   graph_cost.cpp      amcostestimate
//   graph_validate.cpp  amvalidate
//   graph_info.cpp      gknn_graph_info(regclass)
// What it shares with gpu_ivfpq (the scan machinery, the cost frame, the
// IndexAmRoutine, operator class reads): ../am/.
#pragma once

#include "am/heap_id.h"
#include "gknn/distance.h"
#include "gknn/graph.h"
#include "graph_format.h"
#include "ivfpq/ivfpq.h"  // the cancellable core call and its interrupt check
#include "pg.h"

extern "C" {
#include "access/amapi.h"
#include "access/genam.h"
#include "miscadmin.h"
#include "nodes/pathnodes.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
}

// Module init: GUCs and reloptions (from _PG_init).
void gknn_graph_register();

// gknn.graph_ef_search: the candidate list of a search (README "The gpu_graph index").
extern int gknn_graph_ef_search;
constexpr int kGraphDefaultEfSearch = 40;
constexpr int kGraphMaxEfSearch = 10000;
// The LIMIT assumed when the executor hook found none above the scan.
constexpr int kGraphDefaultK = 10;
// Every random choice of a build and of a search derives from it.
constexpr uint64 kGraphSeed = 4242;

// Reloptions (rd_options of a gpu_graph index).
struct GraphOptions {
  int32 vl_len_;
  int degree;               // out-degree of every node
  int intermediate_degree;  // the initial kNN graph's degree (0: 2 x degree)
};
constexpr int kGraphDefaultDegree = 32;

void graph_register_options();
bytea* graph_options(Datum reloptions, bool validate);
GraphOptions graph_get_options(Relation index);
// ERROR (22023) when the options cannot make a graph: degree odd,
// intermediate_degree below degree.
void graph_check_options(const GraphOptions& o);
// ERROR (22000 / 54000) unless `dim`-dimensional vectors fit a node slot of
// a page at this degree.
void graph_check_dim(int dim, int degree);

// The metric of the index's operator class (support function 1).
gknn::Metric graph_index_metric(Relation index);

// Build phases (pg_stat_progress_create_index.phase through amphasename).
enum GraphBuildPhase {
  kGraphPhaseLoad = 2,  // 1 is PostgreSQL's "initializing"
  kGraphPhaseKnn = 3,
  kGraphPhaseOptimize = 4,
  kGraphPhaseWrite = 5,
  kGraphPhaseWal = 6,
};

// AM callbacks
IndexBuildResult* graph_build(Relation heap, Relation index, IndexInfo* info);
void graph_buildempty(Relation index);
bool graph_insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation heap,
                  IndexUniqueCheck check_unique, bool index_unchanged, IndexInfo* info);
IndexBulkDeleteResult* graph_bulkdelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                        IndexBulkDeleteCallback callback, void* callback_state);
IndexBulkDeleteResult* graph_vacuumcleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats);
void graph_costestimate(PlannerInfo* root, IndexPath* path, double loop_count, Cost* startup_cost,
                        Cost* total_cost, Selectivity* selectivity, double* correlation, double* pages);
bool graph_validate(Oid opclassoid);
// amrescan, amgettuple, amendscan: am/ordered_scan.h (shared with gpu_ivfpq).
IndexScanDesc graph_beginscan(Relation index, int nkeys, int norderbys);

// ---- pages (graph_pages.cpp) ----

inline GraphPageOpaque* graph_opaque(Page page) {
  return reinterpret_cast<GraphPageOpaque*>(PageGetSpecialPointer(page));
}
inline GraphMeta* graph_meta(Page page) { return reinterpret_cast<GraphMeta*>(PageGetContents(page)); }
void graph_init_page(Page page, GraphPageKind kind);
void graph_init_meta_page(Page page, const GraphMeta& meta);
// pd_lower after `bytes` of contents (full-page images skip the hole).
void graph_set_contents_size(Page page, Size bytes);
// ERROR XX002 naming the index, the block and the problem.
[[noreturn]] void graph_corrupted(Relation index, BlockNumber blk, const char* problem);
// Every node page is read with the metapage locked (share: scans' image
// loads; exclusive: inserts, VACUUM) and checked against the copy of the
// metapage made under that lock; so lock the metapage first, then node
// pages in block order.
//
// The metapage locked in `mode` (its buffer returned, locked), checked
// (magic, version, parameters, node pages inside the index) and copied.
Buffer graph_lock_meta(Relation index, int mode, GraphMeta* out);
// The same, copied out under a share lock released at once.
void graph_read_meta(Relation index, GraphMeta* out);
// Checks a metapage's contents (the same ERRORs), e.g. one locked in place.
void graph_check_meta(Relation index, const GraphMeta* meta);
// Checks locked node page `blk` against `meta`, copied under the metapage
// lock the caller still holds.
void graph_check_node_page(Relation index, const GraphMeta& meta, BlockNumber blk, Page page);

// Node slots of a checked page.
inline char* graph_slot(Page page, const GraphMeta& meta, uint64 node) {
  return reinterpret_cast<char*>(page) + graph_node_offset(node, meta.nodes_per_page, meta.node_bytes);
}
inline ItemPointer graph_slot_tid(char* slot) { return reinterpret_cast<ItemPointer>(slot); }
inline uint16 graph_slot_flags(const char* slot) {
  uint16 f;
  memcpy(&f, slot + kGraphTidBytes, sizeof f);
  return f;
}
inline void graph_slot_set_flags(char* slot, uint16 f) { memcpy(slot + kGraphTidBytes, &f, sizeof f); }
inline float* graph_slot_vector(char* slot) { return reinterpret_cast<float*>(slot + kGraphVectorOffset); }
inline uint32* graph_slot_adjacency(char* slot, const GraphMeta& meta) {
  return reinterpret_cast<uint32*>(slot + graph_adjacency_offset(meta.dim));
}
// A new block at the end of the index, exclusively locked.
Buffer graph_new_buffer(Relation index);

// Calls fn(node, slot) for every node, in node order, each node page read
// (through `strategy`; null: the default), share-locked and checked against
// `meta`, copied under the metapage lock the caller holds; between_pages()
// after each page (a cancel check, or VACUUM's delay point).
template <typename Fn>
void graph_for_each_node(Relation index, const GraphMeta& meta, BufferAccessStrategy strategy,
                         void (*between_pages)(), Fn fn) {
  const uint32 pages = graph_node_pages(meta, meta.nodes);
  for (uint32 p = 0; p < pages; ++p) {
    BlockNumber blk = kGraphFirstNodeBlock + p;
    Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, blk, RBM_NORMAL, strategy);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    graph_check_node_page(index, meta, blk, page);
    const uint32 count = graph_nodes_on_page(meta, blk, meta.nodes);
    for (uint32 i = 0; i < count; ++i) {
      const uint64 node = uint64{p} * meta.nodes_per_page + i;
      fn(node, graph_slot(page, meta, node));
    }
    UnlockReleaseBuffer(buf);
    between_pages();
  }
}
// between_pages for readers outside VACUUM.
inline void graph_check_interrupts() { CHECK_FOR_INTERRUPTS(); }

// Heap TIDs as int64 ids: am/heap_id.h.

// ---- the searchable image (graph_image.cpp) ----

// The image of an index, cached per backend. Rows are the live nodes with a
// vector (neither NULL nor dead), in node order; the graph's edges are
// between rows (edges to other nodes dropped). Valid until the next
// graph_image_get() in this backend.
struct GraphImage {
  GraphMeta meta;
  const gknn::graph::Graph* graph;  // rows x degree
  const float* vectors;             // rows x dim
  const int64* ids;                 // heap TID of each row (heap_tid_to_id)
  const uint32* row_node;           // node number of each row
  const uint32* node_row;           // row of each node below meta.nodes (kGraphNoNode: none)
  int64 rows;
  const int64* nulls;  // heap TIDs of the NULL nodes
  int64 nnulls;
};
// The current image (reloaded when the metapage's generation or the
// relfilenode changed).
const GraphImage* graph_image_get(Relation index);
// Frees this backend's image of `index` (shipped to the GPU service, which
// searches it from then on); the next graph_image_get() reads it again.
void graph_image_release(Relation index);

// What an insert changed, for the image of the generation before it: the
// new node and the lists it rewrote (node numbers, degree entries each).
struct GraphInsertChange {
  uint64 generation_before;
  uint64 generation_after;
  uint32 node;
  int64 id;
  const float* vector;      // null for a NULL node
  const uint32* adjacency;  // the new node's list
  int nchanged;
  const uint32* changed_nodes;
  const uint32* changed_lists;  // nchanged x degree
};
// Brings this backend's image of `index` to generation_after when it is at
// generation_before (else it is reloaded at its next use).
void graph_image_apply_insert(Relation index, const GraphInsertChange& change);
