// The GPU service's shared memory: one control block and one request slot
// per PGPROC (a backend, parallel worker or auxiliary process asks through
// its own slot, so slots never need allocating or locking against each
// other). Internal to extension/service/.
//
// A slot's life (its spinlock guards `state`; the payload belongs to whoever
// the state says):
//
//   Free --backend fills payload--> Submitted --service takes it--> Running
//   Running --service writes reply--> Done | Failed --backend reads--> Free
//   Submitted --backend gives up (cancel, exit)--> Free
//   Running --backend gives up--> Abandoned --service finishes--> Free
//
// A backend that gave up never touches the payload again until the slot is
// Free, so the service may keep writing into it; a new request from the same
// process waits for that.
#pragma once

#include "pg.h"

extern "C" {
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/relfilenode.h"
#include "storage/spin.h"
}

#include "gknn/graph.h"

namespace gknn_service {

enum SlotState : uint32 { kFree = 0, kSubmitted, kRunning, kDone, kFailed, kAbandoned };

enum RequestKind : uint32 {
  kSearchIvfpq = 1,  // PQ candidates of one query from a resident image
  kLoadBegin,        // start shipping an image: its shape
  kLoadChunk,        // a piece of one of its arrays
  kLoadEnd,          // the image is complete: make it resident
  kDeltaBegin,       // start shipping what changed since the resident generation: its shape
  kDeltaChunk,       // a piece of one of its arrays
  kDeltaEnd,         // the delta is complete: apply it (a new generation of the image)
  // An index build's GPU work (service_build.cpp), in a session per
  // requester that lives while the requester's `build_open` names it.
  // A gpu_graph build (shape.kind = kImageGraph) uses the same kinds: its
  // rows' vectors as the sample, kBuildTrain builds the graph (the reply's
  // `count`: its entries), kBuildFetch returns kGraphEdges or kGraphEntries.
  kBuildBegin,   // open a session: the quantizer's parameters (`shape`), the sample's rows
  kBuildSample,  // a piece of the training sample (floats, at `section_offset` bytes)
  kBuildTrain,   // train on the sample; progress in the slot while it runs
  kBuildFetch,   // a piece of the trained quantizer (`section`: kCentroids or kCodebooks)
  kBuildEncode,  // `count` vectors in the payload -> their lists (int32) and codes, written over them
  kSearchGraph,  // the k best rows of one query from a resident gpu_graph image (`ef`)
  // A GpuTopK scan's ranking (service_topk.cpp), in a session per requester
  // that lives while the requester's `topk_open` names it (`build_id` names
  // the session in each request).
  kTopKBegin,   // open a session: the program, its columns, k, the batch capacity (service_topk_wire.h)
  kTopKBatch,   // `count` rows of a batch in the payload, laid out as service_topk_wire.h says
  kTopKFinish,  // the k best rows: their count and stats, the first row ids in the payload
  kTopKFetch,   // `count` row ids of the result from row `section_offset` on, into the payload
  // The GpuTopK table cache (service_topk_cache.h), within a session opened
  // with a cache probe (TopKWireProgram::cache):
  kTopKCacheCheck,   // page LSNs of the blocks the probe asked to check, `count` from check
                     // `section_offset` on; `section` 1: the last piece (the reply's payload: the
                     // final per-block map, 1 = ranked from the cache, 0 = read from the heap)
  kTopKCacheRank,    // rank the entry's rows the final map keeps (a task, answered when ranked)
  kTopKCacheMeta,    // a filling session's metadata: `count` LSNs of `section` (0: the blocks',
                     // 1: the visibility map pages') from element `section_offset` on
  kTopKCacheCommit,  // the filled entry is complete (`count` blocks, `k` map pages): make it usable
  kTopKCacheReset,   // drop every entry (not in a session); the reply's `count`: how many
};

inline bool is_build_request(uint32 kind) { return kind >= kBuildBegin && kind <= kBuildEncode; }
inline bool is_search_request(uint32 kind) { return kind == kSearchIvfpq || kind == kSearchGraph; }
inline bool is_topk_request(uint32 kind) { return kind >= kTopKBegin && kind <= kTopKCacheReset; }

// The kinds of index image the service holds (ImageShape::kind, shown by
// gknn_service_images()).
enum ImageKind : int32 { kImageIvfpq = 0, kImageGraph = 1 };

enum ReplyCode : uint32 {
  kOk = 0,
  kNeedImage,    // the image is not resident: ship it (kLoad*) or, where the service holds
                 // an older generation (resident_generation), what changed (kDelta*)
  kError,        // sqlstate + message
  kServiceGone,  // the service stopped before answering
  kUseRing,      // a graph search: the resident kernel serves its image now, ask it (ring)
};

enum ServiceState : uint32 {
  kStopped = 0,  // no service process (not preloaded, or between restarts)
  kStarting,     // opening the devices
  kReady,        // serving
  kNoDevice,     // running, but found no device it may use (reason says why)
};

// Which resident image a request means. The generation is the metapage's:
// a changed index is a different image.
struct ImageKey {
  Oid database;
  Oid index;
  RelFileNode node;
  uint64 generation;
};

inline bool key_equal(const ImageKey& a, const ImageKey& b) {
  return a.database == b.database && a.index == b.index && RelFileNodeEquals(a.node, b.node) &&
         a.generation == b.generation;
}

// Arrays of an image, shipped in chunks (kLoadChunk's `section`): the
// image, then its page map (ivfpq/ivfpq_pagemap.h: pages per list, their
// blocks and item counts), which lets later deltas find their pages.
enum ImageSection : uint32 {
  kCentroids = 0,
  kCodebooks,
  kOffsets,
  kCodes,
  kIds,
  kVectors,
  kPageLists,
  kPageBlocks,
  kPageItems,
  kSections
};

// Arrays of a gpu_graph image (kLoadChunk's `section` after a kLoadBegin of
// kind kImageGraph): the graph's rows (rows x degree node numbers, uint32),
// its entries (uint32), the vectors (rows x dim float32), each row's heap
// TID as an id (int64).
enum GraphSection : uint32 { kGraphEdges = 0, kGraphEntries, kGraphVectors, kGraphIds, kGraphSections };

// A gpu_graph build's progress phases in the slot (gknn::graph's kPhase*
// strings, which cannot cross processes).
enum GraphBuildPhase : int32 { kGraphBuildKnn = 0, kGraphBuildPrune, kGraphBuildReverse, kGraphBuildConnect };

// Arrays of a delta (kDeltaChunk's `section`): the changed pages
// (IvfpqPageChange), the entries they carry, the ids shrunk pages kept.
enum DeltaSection : uint32 {
  kDeltaChanges = 0,
  kDeltaIds,
  kDeltaCodes,
  kDeltaVectors,
  kDeltaKept,
  kDeltaSections
};

// What a search returns (all: ids and float8 distances, best first).
enum SearchMode : uint32 {
  kModePq = 0,       // PQ-estimated distances (the backend re-ranks from the heap)
  kModeRefined = 1,  // the PQ candidates re-ranked by their exact distance (stored vectors)
  kModeExact = 2,    // every entry ranked by its exact distance (stored vectors)
};

// The shape of an image (kLoadBegin), or of the quantizer a build trains
// (kBuildBegin: `entries` is then the training sample's rows). A gpu_graph
// image (kind kImageGraph) uses dim, metric, seed (its searches' seed),
// entries (its rows), degree and graph_entries; a gpu_graph build's
// kBuildBegin (kind kImageGraph) dim, metric, seed (the build's), entries
// (the rows shipped), degree and intermediate_degree.
struct ImageShape {
  int32 kind;  // ImageKind
  int32 dim, lists, m, nbits, metric, kmeans_iters;
  uint64 seed;
  int64 entries;
  int32 vectors;        // StoredVectors (service_images.h): the entries' vectors, and their element type
  int64 pages;          // list pages in its page map
  int32 degree;         // graph: out-degree of every row
  int64 graph_entries;  // graph: the graph's entry nodes (Graph::entries)
  int32 intermediate_degree;  // graph build: the initial kNN graph's degree (0: 2 * degree)
};

// The shape of a delta (kDeltaBegin); `key` names its target generation.
struct DeltaShape {
  uint64 base;    // the generation it changes
  int64 changes;  // changed pages
  int64 entries;  // entries they carry
  int32 vectors;  // StoredVectors of their vectors
  int64 kept;     // ids of items shrunk pages kept
};

// What the service answers to a GpuTopK batch or finish: the first row that
// raised an error (gknn::expr::EvalError's fields; kind 0: none), and, after
// kTopKFinish, the core's counters (gknn::expr::TopKStats) and where it ranked.
struct TopKOutcome {
  int32 eval_kind;
  int32 eval_detail[2];
  uint64 eval_row;
  int64 rows_scanned, rows_passed, batches, bytes_to_device;
  double device_ms;
  int32 device;  // -1: the service's CPU
  // The table cache (a session opened with a cache probe): TopKCacheState
  // (service_topk_wire.h) after kTopKBegin; then the entry's blocks, the
  // blocks to check (kTopKBegin) or the rows ranked from it (kTopKCacheCheck),
  // and whether a kept batch was kept (kTopKBatch) or the entry committed.
  // cache_checked (kTopKBegin): a hit with no page to check, whose final map
  // the answer holds already, and cache_ranked the rows ranked from the
  // entry (no kTopKCacheCheck follows; cache_rows is the entry's, as always).
  // cache_final (kTopKBegin): the entry held every block, and the session
  // is ranked and finished already: `count` row ids (some in the payload,
  // the rest by kTopKFetch) or the row that raised; nothing else follows.
  int32 cache_state;
  int32 cache_kept;
  int32 cache_checked;
  int32 cache_final;
  int64 cache_blocks, cache_checks, cache_rows, cache_ranked;
};

constexpr int kInlineBytes = 64 * 1024;  // payload kept in the slot itself
constexpr int kMessageBytes = 256;

struct RequestSlot {
  slock_t mutex;
  uint32 state;  // SlotState
  Latch* owner_latch;
  int owner_pid;
  uint64 incarnation;  // of the service the request was submitted to

  // Request.
  uint32 kind;
  ImageKey key;
  int32 dim;               // query dimensions (search)
  int32 probes;            // search (ivfpq)
  int32 ef;                // search (graph): the candidate list, at least k
  int32 mode;              // search: SearchMode
  int64 k;                 // candidates wanted (search)
  int32 section;           // kLoadChunk
  int64 section_offset;    // kLoadChunk: byte offset in the section
  int64 payload_bytes;     // bytes of payload the request carries
  ImageShape shape;        // kLoadBegin
  DeltaShape delta;        // kDeltaBegin
  dsm_handle payload_dsm;  // DSM_HANDLE_INVALID: the payload is `inline_payload`

  // Reply.
  uint32 reply;                // ReplyCode
  int32 sqlstate;              // kError
  int64 count;                 // search: candidates returned (ids then float8 distances in the payload)
  int64 entries;               // search: entries of the resident image
  int32 resident;              // kNeedImage: the service holds another generation of the index...
  uint64 resident_generation;  // ... this one
  uint64 batch_id;             // search: the batch it rode in
  int32 batch_size;            // search: queries in that batch
  int64 submit_us, start_us, end_us;  // when submitted, taken, answered (GetCurrentTimestamp)
  char message[kMessageBytes];

  // Builds. build_id: the session a build request belongs to. build_open:
  // the session its requester has open (0: none); written by the requester
  // alone, read by the service, which drops every other session of the slot.
  uint64 build_id;
  uint64 build_open;
  // Written by the service while a build request runs (gknn::ivfpq::Phase,
  // or a graph build's GraphBuildPhase; done of total), read by the waiting requester for its progress
  // report.
  int32 progress_phase;
  int64 progress_done, progress_total;

  // GpuTopK. topk_open: the session its requester has open (0: none),
  // written by the requester alone (as build_open). topk: the outcome of a
  // kTopKBatch or kTopKFinish, written by the service.
  uint64 topk_open;
  TopKOutcome topk;

  int32 ring_tries;  // a graph search's kUseRing replies so far (the service then searches it)

  alignas(16) char inline_payload[kInlineBytes];
};

// Images shown by gknn_service_images(): a copy the service refreshes.
constexpr int kMaxShownImages = 64;
struct ShownImage {
  ImageKey key;
  int32 kind;  // ImageKind
  int32 device;
  int64 bytes;
  int64 entries;
  int64 hits;
  int64 loaded_us;
  int64 last_used_us;
};

// Table cache entries shown by gknn_topk_cache(): a copy the service
// refreshes.
constexpr int kMaxShownCache = 64;
struct ShownCacheEntry {
  Oid database, relation;
  RelFileNode node;
  int32 ncolumns;
  int16 attnos[32];  // gknn::expr::kMaxColumns
  int32 types[32];   // each column's gknn::expr::Type and dimension
  int32 dims[32];
  int32 device;
  bool ready;  // false: being filled
  int64 rows, bytes, blocks, segments, excluded_blocks, hits, built_us, last_used_us;
};

// An index whose images must leave the service (service_forget.cpp): it was
// dropped, truncated or rebuilt by a committed transaction.
constexpr int kMaxForgets = 128;
struct ForgetRequest {
  Oid database;
  Oid index;        // InvalidOid: every index of the database (it was dropped)
  int64 before_us;  // images loaded at or before this time (the commit's) go
};

// The kernel serves kRingClusters searches at once, slot s by cluster
// s % kRingClusters (GraphServer: 16 clusters, up to 4 slots each, taken in
// turn): up to 16 sessions each have a cluster of their own (ring_claim takes
// a cluster with nothing to search first); more wait in the ring for a cluster instead
// of going the request path, whose executors would share the SMs the kernel
// leaves (a few with 6 CTAs a query). Backends that find every slot taken
// use the request path.
constexpr int kRingClusters = 16;
constexpr int kRingSlots = gknn::graph::kMaxSlotsPerCluster * kRingClusters;
static_assert(gknn::graph::serving_clusters(kRingSlots) == kRingClusters &&
                  kRingSlots <= gknn::graph::RingLayout::kMaxRingSlots,
              "the ring's slots and the kernel's clusters must agree (slot s: cluster s % kRingClusters)");
constexpr int kRingMaxDim = 2048;
constexpr int kRingMaxK = 1024;
constexpr uint32 kRingHeld = 0x7fffffffu;
constexpr uint32 kRingAbandoned = 0x80000000u;

struct ServiceShared {
  slock_t mutex;  // guards everything below but the slots
  uint32 state;   // ServiceState
  int pid;
  Latch* latch;
  uint64 incarnation;  // bumped at every service start
  int64 started_us;
  char device_name[128];
  int32 device;  // the device searches run on (-1: the CPU)
  // Requests submitted or running at the service's last round (written by
  // the service, read without the mutex by a backend deciding whether to
  // poll for its reply: service_client.cpp).
  pg_atomic_uint32 open_requests;
  char reason[kMessageBytes];

  // Counters since the service started.
  int64 requests, searches, batches, batched_queries, loads, evictions, errors;
  int64 load_bytes;   // bytes of whole images shipped (their pieces)
  int64 deltas;       // deltas applied (an image brought to a new generation)
  int64 delta_bytes;  // bytes of deltas shipped
  int64 busy_us;      // time spent running batches
  // Summed over the searches batches answered: submitted to the batch's
  // start on an executor (queue wait), and submitted to answered.
  int64 wait_us, held_us;
  // Graph searches the resident kernel's ring answered, and their time from
  // the request written to the answer read (the backends' clocks): added
  // by the backends themselves, without the mutex.
  pg_atomic_uint64 ring_searches, ring_us;
  // GpuTopK: sessions opened, batches ranked and their rows; rankings of
  // several sessions' one-shot cache hits at once and the hits in them.
  int64 topk_sessions, topk_batches, topk_rows, topk_shared_rankings, topk_shared_hits;
  int64 memory_budget, memory_used;
  int32 nimages;
  ShownImage images[kMaxShownImages];
  // The GpuTopK table cache: its entries, bytes and budget.
  int32 ncache;
  int64 cache_bytes, cache_budget, cache_evictions;
  ShownCacheEntry cache[kMaxShownCache];

  // Queued by committing backends, taken by the service.
  int32 nforgets;
  int64 forget_all_before_us;  // the queue was full: every image loaded by then goes
  ForgetRequest forgets[kMaxForgets];

  // The resident graph kernel's ring (docs/resident-graph-search.md;
  // ring_memory(): kRingSlots slots laid out as gknn::graph::RingLayout for
  // kRingMaxDim and kRingMaxK). Whether a kernel serves it, for which image
  // and epoch: written by the service only, read without a lock (ring_seq,
  // a sequence lock: read_ring() and write_ring()), since every ring search
  // reads it.
  pg_atomic_uint32 ring_seq;
  uint32 ring_serving;
  uint32 ring_epoch;
  ImageKey ring_key;
  int64 ring_entries;
  // Each slot's owner (no mutex): 0 free, pgprocno + 1 a backend's,
  // kRingHeld the service's (stopping); kRingAbandoned set by a backend
  // that gave its request up (the service frees the slot once answered).
  pg_atomic_uint32 ring_owner[kRingSlots];

  int32 nslots;
  RequestSlot slots[FLEXIBLE_ARRAY_MEMBER];
};

// The ring (page-aligned), its layout and bytes; slot i, its request
// number (the doorbell's word) and its answered number.
char* ring_memory();
gknn::graph::RingLayout ring_layout();
Size ring_bytes();
char* ring_slot(int i);
volatile uint32* ring_request(int i);
const volatile uint32* ring_answered(int i);
// Whether slot i holds a request not answered yet.
bool ring_slot_waiting(int i);
struct RingDescriptor {
  bool serving = false;
  uint32 epoch = 0;
  ImageKey key;
  int64 entries = 0;
};
// Backends' searches in the ring not answered yet (a glance, no lock).
int ring_waiting_searches(ServiceShared* ctl);
// The ring's descriptor, read without a lock (any process).
RingDescriptor read_ring(ServiceShared* ctl);
// Publishes it (the service only: the one writer).
void write_ring(ServiceShared* ctl, const RingDescriptor& d);

// The shared block (null when the library was not preloaded).
ServiceShared* shared();
// Microseconds on the service's clock (GetCurrentTimestamp's); any thread.
int64 now_us();

}  // namespace gknn_service
