// The gknn GPU service (DESIGN stage 6): one background worker, started when
// gknn is in shared_preload_libraries, is the only process that opens CUDA
// for index searches and builds. It holds every index image resident once
// for all sessions, under a memory budget, and searches the requests that
// arrive while it is busy together, in one batched launch per image; index
// builds send it their training sample and encode batches.
//
// Backends keep what PostgreSQL must decide (snapshots, heap fetches,
// visibility, errors, cancellation): they send a request through their slot
// in shared memory and wait on their latch.
//
//   service_shmem.cpp   GUCs, shared memory, worker registration
//   service_client.*    the backend side: submit, wait, cancel, ship an image
//   service_build_client.cpp  the backend side of an index build's training and encoding, or graph
//   service_worker.cpp  the worker: its loop, batching, replies
//   service_build.cpp   the worker's side of index builds (sessions, train, encode, graph builds)
//   service_images.*    the worker's resident images (LRU under the budget)
//   service_topk_client.cpp  the backend side of a GpuTopK scan's ranking
//   service_topk.*      the worker's side of GpuTopK (sessions, batches ranked on executors)
//   service_topk_cache.*  GpuTopK's table cache: one entry per table and columns for every session
//   service_topk_cache_sql.cpp  gknn_topk_cache(), gknn_topk_cache_reset()
//   service_forget.*    images of dropped, truncated or rebuilt indexes leave at commit
//   service_status.cpp  gknn_service_status(), gknn_service_images()
#pragma once

#include "pg.h"

#include "gknn/expr.h"
#include "gknn/graph.h"
#include "gknn/ivfpq.h"
#include "ivfpq/ivfpq_pagemap.h"

extern "C" {
#include "storage/relfilenode.h"
}

// GUCs
enum { GKNN_SERVICE_OFF = 0, GKNN_SERVICE_GPU = 1, GKNN_SERVICE_CPU = 2 };
extern int gknn_service_mode;          // gknn.service (postmaster)
extern int gknn_service_memory_limit;  // gknn.gpu_memory_limit (kB; 0: 90% of the device)
extern int gknn_service_poll_us;       // gknn.service_poll_us (0: sleep at once)
extern bool gknn_service_cpu_ring;     // gknn.service_cpu_ring: a CPU-served ring (tests)
extern int gknn_topk_cache_mb;         // gknn.topk_cache_mb: the service's GpuTopK table cache (MB; 0: off)

// From _PG_init: GUCs; when preloading, shared memory and the worker.
void gknn_service_register();

// Where an index search (gpu_ivfpq, gpu_graph) runs, decided per scan.
struct ServiceRoute {
  bool use_service;  // false: this backend searches on the CPU itself
  int device;        // the service's device (-1: its CPU), when use_service
  const char* why;   // why not the service (static text, for EXPLAIN), when !use_service
};
// gknn.device = cpu: the backend's CPU; auto: the service when it serves,
// else the backend's CPU; gpu: the service on a GPU, else an ERROR (55000)
// saying why.
ServiceRoute gknn_service_route();

// What a search reported about its trip through the service.
struct ServiceTrip {
  uint64 batch_id;
  int batch_size;
  double queue_ms;  // submitted -> taken into a batch
  double run_ms;    // taken -> answered
};

// Search modes (service_shmem.h's SearchMode): PQ estimates, the PQ
// candidates re-ranked by exact distance, every entry by exact distance.
enum { GKNN_SEARCH_PQ = 0, GKNN_SEARCH_REFINED = 1, GKNN_SEARCH_EXACT = 2 };

// What the service holds of an index whose image it did not have at the
// generation asked for.
struct ServiceHeld {
  bool resident;      // another generation of the index...
  uint64 generation;  // ... this one (gknn_service_ivfpq_delta brings it up to date)
};

// One query's k best rows (ids, distances as float8, best first) of the
// image of `index` at `generation`, in `mode`. Returns false when the
// service does not hold that image (ship it with gknn_service_ivfpq_load,
// or what changed since *held with gknn_service_ivfpq_delta, then ask
// again).
// *entries: the image's coded entries. ERROR on service errors; with
// gknn.device = auto, a service that stopped returns false with *gone set
// (the caller searches on the CPU).
bool gknn_service_ivfpq_search(Oid index, RelFileNode node, uint64 generation, const float* query, int dim,
                               int probes, int mode, int64 k, int64* ids, double* distances, int64* count,
                               int64* entries, bool* gone, ServiceTrip* trip, ServiceHeld* held);

// One query's k best rows of the gpu_graph image of `index` at `generation`
// (or a newer one of the same index: see find_for_search in
// service_images.h), searched with a candidate list of max(ef, k): heap ids
// and float8 distances, best first, *count of them; *rows: the image's rows.
// Returns false when the service holds no such image (ship it with
// gknn_service_graph_load, then ask again). ERROR on service errors; with
// gknn.device = auto, a service that stopped returns false with *gone set
// (the caller searches on the CPU).
bool gknn_service_graph_search(Oid index, RelFileNode node, uint64 generation, const float* query, int dim,
                               int ef, int64 k, int64* ids, double* distances, int64* count, int64* rows,
                               bool* gone, ServiceTrip* trip);

// A gpu_graph image as shipped: the graph over the index's live rows, their
// vectors, their heap TIDs as ids, and the seed its searches start from.
// Plain pointers: the caller's image owns the arrays.
struct ServiceGraphImage {
  int64 rows;
  int degree;
  int dim;
  int metric;  // gknn::Metric
  uint64 seed;
  const uint32* edges;  // rows x degree
  const uint32* entries;
  int64 nentries;
  const float* vectors;  // rows x dim
  const int64* ids;      // rows
};
// Ships a gpu_graph image to the service; on return it is resident (or an
// ERROR said why not: 53200 when it does not fit the budget; 22023 when the
// service found it malformed).
void gknn_service_graph_load(Oid index, RelFileNode node, uint64 generation, const ServiceGraphImage& image);

// Ships an image and its page map to the service (in chunks through a DSM
// segment); on return it is resident (or an ERROR said why not: 53200 when
// it does not fit the budget).
void gknn_service_ivfpq_load(Oid index, RelFileNode node, uint64 generation, const gknn::ivfpq::Image& image,
                             const IvfpqPageMap& pages);

// Ships what changed in an index from the generation the service holds
// (delta.base) to delta.generation (the entries of `code_size` bytes, and
// stored vectors of `dim` elements of `element` where delta.vectors is
// set); true when the service then
// holds delta.generation, false when it holds no longer the base or the
// delta did not fit it (ship the whole image). ERROR as for a load.
bool gknn_service_ivfpq_delta(Oid index, RelFileNode node, const IvfpqDelta& delta, int code_size, int dim,
                              IvfpqElement element);

// Whether the GPU service serves on a GPU now (no wait: the planner asks).
bool gknn_service_serves_gpu();

// Whether gknn was preloaded with its service on (gknn.service = gpu or
// cpu): then no backend opens CUDA, index builds included.
bool gknn_service_preloaded();

// An index build's GPU work (training, encoding) done by the service
// (service_build_client.cpp). The session lives in the build's memory
// context: an ERROR closes it (the service then drops it).
//
// Each call returns false when the service went away (stopped, restarted)
// with gknn.device = auto: the session is then closed and the caller goes on
// on its own CPU (the results are the same). With gknn.device = gpu that is
// an ERROR (55000); errors of the service are ERRORs with its SQLSTATE
// (53200: the work does not fit gknn.gpu_memory_limit). A cancel while
// waiting withdraws the request (the service stops its training).
struct ServiceBuild;
// Progress of the training, as gknn::ivfpq::Progress reports it (phase as
// an int); called while waiting, must not raise an error.
using ServiceBuildProgress = void (*)(int phase, int64 done, int64 total);
// Opens a session for a quantizer of `params` trained on `rows` sample
// rows, encoding batches of up to `batch_rows` vectors. Null (auto) when the
// service went away.
ServiceBuild* gknn_service_build_begin(const gknn::ivfpq::Params& params, int64 rows, int64 batch_rows);
// Ships the sample (rows x dim), trains, and fills *out (params, centroids,
// codebooks) with the trained quantizer.
bool gknn_service_build_train(ServiceBuild* build, const float* sample, ServiceBuildProgress progress,
                              gknn::ivfpq::Quantizer* out);
// Encodes n <= batch_rows vectors (n x dim) with the trained quantizer, as
// gknn::ivfpq::encode: list_of[i], codes + i * code_size.
bool gknn_service_build_encode(ServiceBuild* build, const float* x, int64 n, int32* list_of, uint8* codes);
// Closes the session (the service frees what it holds for it).
void gknn_service_build_end(ServiceBuild* build);
// A gpu_graph build in the service: ships the n vectors (n x params.dim, n
// >= 1), builds the graph (build_gpu on the service's device, build_cpu when
// it runs on the CPU: the backend's own build_cpu gives the same graph),
// reporting its progress (phase: kServiceGraphPhaseKnn, else a phase of the
// graph's optimisation) while
// waiting, and fills *out (n, degree, edges, entries). False (auto) when
// the service went away: the caller builds on its own CPU. Errors, cancel
// and gknn.device = gpu as for the calls above.
constexpr int kServiceGraphPhaseKnn = 0;  // service_shmem.h's kGraphBuildKnn
bool gknn_service_build_graph(const gknn::graph::BuildParams& params, const float* vectors, int64 n,
                              ServiceBuildProgress progress, gknn::graph::Graph* out);
// The images of `index` (of this database) are stale once this transaction
// commits: its storage is being rebuilt (ambuild: CREATE INDEX, REINDEX,
// TRUNCATE, VACUUM FULL, CLUSTER). At commit the service is asked to drop
// them; an abort forgets the request. Dropped indexes and databases are
// found by an object access hook. No-op without the service.
void gknn_service_forget_index(Oid index);

// A GpuTopK scan's ranking in the service (service_topk_client.cpp): the
// backend (or a parallel plan's participant) opens a session with its
// compiled program, fills batches in shared memory and ships them, then
// fetches the k best rows' ids. The session lives in the current memory
// context: its reset (or an ERROR) closes it.
//
// Each call but _batch returns kServiceTopKOk, kServiceTopKRaised (a row
// raised in the program: *err says which, for PostgreSQL's error) or
// kServiceTopKGone (the service stopped or restarted, with gknn.device =
// auto: the session is closed and its memory unmapped; the rows shipped are
// lost, the caller ranks again on its own CPU). With gknn.device = gpu a
// service gone is an ERROR (55000); the service's errors are ERRORs with its
// SQLSTATE (53200: the scan does not fit gknn.gpu_memory_limit). A cancel
// while waiting gives the request up.
enum { kServiceTopKOk = 0, kServiceTopKRaised, kServiceTopKGone };
struct ServiceTopK;
// A compiled program as plain pointers (the compiler's arrays).
struct ServiceTopKProgram {
  const gknn::expr::Instr* code;
  int ncode;
  const gknn::expr::Value* consts;
  const uint8* const_nulls;
  int nconst;
  const float* vectors;
  int nvectors;
  gknn::expr::Segment qual, check;
  const gknn::expr::SortKey* keys;
  int nkeys;
  const gknn::expr::ColumnSpec* columns;
  int ncolumns;
};
// What the scan's trips to the service took.
struct ServiceTopKTrips {
  int64 requests;
  int64 batches, rows;  // batches shipped and their rows
  double queue_ms;      // submitted -> taken by the service
  double service_ms;    // taken -> answered
};
// The GpuTopK table cache's probe (the service's entries: service_topk_cache.h):
// the table, its columns (attnos of the program's columns, in attno
// order), and its visibility map as the backend read it; the answer.
struct ServiceTopKCacheProbe {
  Oid database, relation;
  RelFileNode node;
  const int16* attnos;   // AttrNumbers
  int64 nblocks;         // the table's blocks now
  int64 nvm, vm_span;    // visibility map pages read, heap blocks per map page
  const uint64* vm_lsn;  // nvm LSNs, each read with its page's bits
  const uint8* bits;     // nblocks all-visible bits
  // The answer: kServiceCache* (service_topk_wire.h's TopKCacheState); for
  // a hit, a map of the entry's blocks (palloc'd; 0 heap, 1 cached, 2
  // check the page) and how many to check; `checked`: none, and the map is
  // final already (`ranked`: the rows ranked from the entry; no cache check).
  // `final`: the entry held every block, and the service ranked and
  // finished the session with the probe (gknn_service_topk_finish answers
  // from what came back; no cache check, rank or heap scan follows).
  int state;
  uint8* map;
  int64 map_blocks, checks, rows;  // rows: the entry's
  bool checked;
  bool final;
  int64 ranked;
};
enum { kServiceCacheNone = 0, kServiceCacheFill = 1, kServiceCacheHit = 2 };
// Opens a session keeping the k best rows, batches of `capacity` rows;
// *device: where the service ranks them (-1: its CPU). Null when the
// service went away (auto). With a probe, the service looks up the table
// cache's entry (its answer in *probe).
ServiceTopK* gknn_service_topk_begin(const ServiceTopKProgram& program, int64 k, int64 capacity, int* device,
                                     ServiceTopKCacheProbe* probe = nullptr);
// A hit: the page LSNs of the blocks the map said to check (in block
// order; 0: not all-visible any more), n of them; `map` (map_blocks) gets
// the final map (1: ranked from the entry, 0: read from the heap), *rows
// the entry's rows it ranks.
int gknn_service_topk_cache_check(ServiceTopK* t, const uint64* lsn, int64 n, uint8* map, int64* rows);
// Ranks them (while the backend scans the heap: the next push collects it).
int gknn_service_topk_cache_rank(ServiceTopK* t, gknn::expr::EvalError* err);
// A fill: batches pushed while `keep` are the entry's rows (whole
// all-visible blocks, in block order); then the blocks' LSNs (0: not kept)
// and the map pages' LSNs, and the commit (*committed: the entry is
// usable; false when the service gave it up, gknn_service_topk_fill_lost).
void gknn_service_topk_keep(ServiceTopK* t, bool keep);
int gknn_service_topk_cache_commit(ServiceTopK* t, const uint64* block_lsn, int64 nblocks,
                                   const uint64* vm_lsn, int64 nvm, bool* committed,
                                   gknn::expr::EvalError* err);
bool gknn_service_topk_fill_lost(const ServiceTopK* t);
// The columns of the table cache entry a scan of these columns (attno
// order) should use: the usable entry of the table's relfilenode with the
// fewest columns that holds them all (the same type and dimension), as the
// service last published its list. False when there is none (the scan
// probes for its own columns).
bool gknn_service_topk_cache_columns(Oid relation, RelFileNode node, int ncolumns, const int16* attnos,
                                     const gknn::expr::ColumnSpec* columns, int* nout, int16* attnos_out,
                                     gknn::expr::ColumnSpec* columns_out);
// Drops the service's entries (sessions using one keep it); how many.
// ERROR when the service is not running.
int gknn_service_topk_cache_reset();
// The batch to fill (n rows of capacity; valid until the next push).
gknn::expr::BatchView* gknn_service_topk_batch(ServiceTopK* t);
// Ships the filled batch (after reading the answer to the previous one).
int gknn_service_topk_push(ServiceTopK* t, gknn::expr::EvalError* err);
// Every batch ranked: the best rows' ids, best first (*rows palloc'd,
// *nrows of them), and the core's counters. Closes the session.
int gknn_service_topk_finish(ServiceTopK* t, gknn::expr::EvalError* err, uint64** rows, int64* nrows,
                             gknn::expr::TopKStats* stats);
// Closes the session (idempotent).
void gknn_service_topk_end(ServiceTopK* t);
const ServiceTopKTrips& gknn_service_topk_trips(const ServiceTopK* t);
