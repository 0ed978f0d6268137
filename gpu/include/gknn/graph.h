// A fixed-degree proximity graph (CAGRA, Ootomo et al., ICDE 2024) built and
// searched on the CPU or the GPU, free of PostgreSQL. The gpu_graph index
// access method keeps the graph's rows and the full vectors in its pages and
// calls these functions: the build, the searches, and the maintenance rules
// (insert, VACUUM) on rows it has read from pages.
//
// The graph: node i is row i of the vectors (n x dim float32). Row i of the
// adjacency holds `degree` out-neighbours of node i, ordered by (distance to
// node i, id) ascending with NaN last, the entries distinct and never node i
// itself; kNoNode slots only at the end of a row (when n - 1 < degree, or
// after a repair found fewer live neighbours). Every function here keeps that
// order, so "rank" below means position in a row, closest first.
//
// The build: an initial kNN graph of intermediate_degree (build_cpu: exact
// kNN for n <= 20,000, IVF-PQ with exact re-ranking above; build_gpu: exact
// for n <= 250,000, above each k-means list's nodes searched exactly among
// its nearest lists' nodes), then CAGRA's
// optimisation: for every node, its kNN list pruned by counting detourable
// routes (rank-based, prune_list below), then the reverse edges of the
// pruned graph merged in, to `degree` edges per node; last, parts of the
// graph that node 0 does not reach (clusters the kNN graph left apart) are
// linked to their nearest reached node both ways, and the first node of
// every part of at least kMinEntryPart nodes becomes one of the graph's
// entries (Graph::entries), so a search starts in every such part: on
// well-separated clusters the links alone do not lead a search into the
// query's cluster. Every random choice derives from the seed: the same
// vectors, params and seed give the same graph (build_cpu twice: the same edges; build_gpu twice: the same
// edges; the two need not be equal, both reach the same recall).
//
// Distances everywhere are gknn::distance (gknn/distance.h), the SQL
// operator's value, canonical (one NaN, -0 as +0), ordered by score_less:
// (distance, id) with NaN last. Cosine of a zero vector is NaN: such a node
// is in the graph, sorts last, and breaks nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "gknn/distance.h"
#include "gknn/error.h"

namespace gknn::graph {

constexpr std::uint32_t kNoNode = 0xFFFFFFFFu;  // an empty adjacency slot
constexpr int kMaxDegree = 128;                 // degree in [2, kMaxDegree], even
constexpr int kMaxIntermediateDegree = 256;     // the initial kNN graph's degree, at most
constexpr int kMaxDim = 16000;                  // the vector type's limit

struct BuildParams {
  int dim = 0;
  Metric metric = Metric::L2;   // L2, InnerProduct or Cosine (distances = SQL operator values)
  int degree = 32;              // out-degree of the final graph: even, 2..kMaxDegree
  int intermediate_degree = 0;  // the initial kNN graph's degree; 0 = 2 * degree; >= degree
  std::uint64_t seed = 0;       // every random choice derives from it: same input + seed = same graph
};

// Throws Error(InvalidArgument) naming the offending parameter.
void validate(const BuildParams& p);

// The initial kNN graph's degree that a build with `p` over n nodes uses:
// intermediate_degree (or 2 * degree), at least degree, clamped to
// kMaxIntermediateDegree and to n - 1.
int effective_intermediate_degree(const BuildParams& p, std::int64_t n);

// Called between chunks of work; returning false stops the build with
// Error(Cancelled). `phase` is one of the fixed strings below (pointer
// equality is not promised; compare with strcmp); `done` of `total` units of
// that phase. Never called from a GPU thread or concurrently.
using Progress = std::function<bool(const char* phase, std::int64_t done, std::int64_t total)>;

constexpr const char* kPhaseKnn = "building kNN graph";         // units: nodes
constexpr const char* kPhasePrune = "pruning edges";            // units: nodes
constexpr const char* kPhaseReverse = "merging reverse edges";  // units: nodes
constexpr const char* kPhaseConnect = "linking graph parts";    // units: nodes reached

// A fixed-degree directed graph over nodes 0..n-1 (row layout: see above).
struct Graph {
  std::int64_t n = 0;
  int degree = 0;
  std::vector<std::uint32_t> edges;  // n * degree
  // Where every search starts, besides a seeded sample (see entry_points
  // below): ascending distinct node ids, one per part of the graph that the
  // build (or repair_deleted) found unreachable from the parts before it.
  // Empty is valid (a graph from before this field, or from a caller that
  // does not keep it): the search then starts from the sample alone, which
  // may miss small well-separated clusters. Keep it with the rows.
  std::vector<std::uint32_t> entries;

  const std::uint32_t* row(std::int64_t i) const { return edges.data() + i * degree; }
  std::uint32_t* row(std::int64_t i) { return edges.data() + i * degree; }
};

// Throws Error(InvalidArgument) when `g` is not a well-formed graph of the
// shape above (sizes, ids in range, no self edges, no duplicates, kNoNode
// only at the end of a row, entries ascending and in range). Does not check the distance order (it needs the
// vectors; see check_row_order).
void validate(const Graph& g);

// vectors: n x dim float32 row-major, host memory. Node i = row i. n may be
// 0 (an empty graph) or 1 (one row of kNoNode). Throws Error(InvalidArgument,
// Cancelled, OutOfMemory); build_gpu also NoDevice and DeviceFault.
Graph build_cpu(const float* vectors, std::int64_t n, const BuildParams& p, const Progress& progress = {});
Graph build_gpu(const float* vectors, std::int64_t n, const BuildParams& p, int device,
                const Progress& progress = {});
// An estimate of the device memory build_gpu takes over n rows at most (the
// GPU service reserves it under its budget).
std::int64_t build_gpu_bytes(const BuildParams& p, std::int64_t n);

struct SearchParams {
  int k = 10;
  int ef = 64;                         // candidate list size; ef < k is raised to k
  std::uint64_t seed = 0;              // which nodes the search starts from
  const std::uint8_t* skip = nullptr;  // optional n flags (host): nonzero = traversed but never returned
  // Nodes expanded per step: the `width` best unexpanded nodes of the list,
  // their rows scored and merged as one batch (CAGRA's search width). 1 is
  // HNSW's one at a time (fewest distances); wider takes fewer, larger steps,
  // which is what a lone query's latency on the GPU depends on. 1..kMaxWidth.
  // 8: in the small calls the GPU service makes, more recall for less time
  // than 4 (bench/results/graph-width-H200-2026-11-29.md; through the service
  // synthetic-1m-graph-width-H200-2026-11-29-2eb8069.md: recall 0.99 at 16
  // clients +19 % on 1M x 128). Its costs: more distances a query, so batches
  // of 64 and more lose 10-20 % on the GPU, Fashion-MNIST at 64 clients
  // 10-18 % at the same ef, and the CPU search 8-30 % a query. (4 against 1:
  // graph-width-H100-2026-11-23.md.) Inserts search with kInsertWidth.
  int width = 8;
};
constexpr int kMaxWidth = 16;
// The width of an insert's neighbour search (insert_node and the backend's
// insert): fixed, whatever queries use, so that the edges an insert writes
// do not follow the query default; 4, what inserts searched with before
// queries went to 8 (regress/graph-recall.sh's floors after inserts hold
// with it).
constexpr int kInsertWidth = 4;

// Where a search starts (the same on the CPU and the GPU): the graph's
// entries, then nodes picked from the seed until entry_samples(n) nodes in
// all (deleted ones, skipped with an empty row, passed over), are scored
// against the query and the ef best form the first candidate list (HNSW's
// upper layers play this part; a sample of ~sqrt(n) nodes finds a
// query's region when the graph is one piece, and the entries add one node
// of every separate part, so a query's cluster is never left out).
int entry_samples(std::int64_t n);

// Parts of at least this many nodes get an entry (smaller ones, a node
// that lost its in-edges say, are reached through their links).
constexpr std::int64_t kMinEntryPart = 16;
constexpr std::size_t kMaxEntries = 4096;  // the first parts found, when there are more

// nq x k results, ordered by (distance, id); rows padded with id -1 / NaN
// when fewer than k nodes are reachable and not skipped. Distances are the
// SQL operator's values (gknn/distance.h). queries: nq x dim, host memory.
// A search keeps the ef best nodes seen (skipped ones included, so a search
// through dead nodes stays as wide as ef; a skipped node with an empty row,
// a deleted one after repair_deleted, is left out) and returns the k best
// not skipped; for more rows after skips, call again with a larger ef.
void search_cpu(const Graph& g, const float* vectors, int dim, Metric metric, const float* queries,
                std::int64_t nq, const SearchParams& sp, std::int64_t* ids, double* distances);

// The graph and its vectors resident on one GPU; search() is batched and
// thread-safe (the GPU service calls it from several executor threads at
// once, each on its own thread_stream), one host wait per call. Same contract
// as search_cpu and the same algorithm (one CTA per query), so the same rows
// and the same distances bit for bit. ef (after raising it to k) is at most
// kMaxDeviceEf here, else Error(InvalidArgument): search_cpu takes any. Movable, not copyable; frees
// its device memory when destroyed. Throws Error(NoDevice/OutOfMemory/
// DeviceFault/InvalidArgument).
constexpr int kMaxDeviceEf = 1024;

class DeviceGraph {
 public:
  DeviceGraph(const Graph& g, const float* vectors, int dim, Metric metric, int device);
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&&) noexcept;
  DeviceGraph& operator=(DeviceGraph&&) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // sp.skip: host flags (n bytes), uploaded per call.
  void search(const float* queries, std::int64_t nq, const SearchParams& sp, std::int64_t* ids,
              double* distances) const;
  std::size_t bytes() const;  // device memory held
  std::int64_t n() const;
  int degree() const;
  int device() const;

 private:
  friend class GraphServer;
  struct Impl;
  Impl* impl_ = nullptr;
};

// A search kernel that stays on the GPU and serves single queries from
// `slots` request slots in mapped host memory, one thread block cluster of
// `team` CTAs (1, 4, 6 or 8; 0: the device's choice, the largest of 6 and
// 4 whose clusters all fit the GPU at once, else 1) per slot: no launch, no stream wait and no
// batching per query. One warp of an extra cluster reads the slots'
// doorbells over the bus and forwards each request to its cluster's
// mailbox in device memory (idle clusters polling host memory slowed a
// searching one 2-5x: bench/results/graph-ring-idle-pollers-*). A host thread owns a slot and
// calls search() with it (or submit(), then answers() once answered());
// the answers are DeviceGraph::search's for one query with sp's seed and
// width and the request's ef and k (no skip flags; k at most sp.k).
// Throws Error(InvalidArgument) where the clusters do not all fit on the
// GPU at once or the query does not fit shared memory, Error(DeviceFault)
// where search() is not answered within 2 s. It holds its SMs while it
// runs, and a synchronizing CUDA call (cudaFree, cudaDeviceSynchronize)
// waits for it: for its lifetime at most (see keep_alive).
//
// Its request slots: its own (the constructor with a count), or a ring in
// memory of the caller's (RingSpec: e.g. shared memory other processes
// write requests into, registered for the device by the caller), laid out
// as RingLayout says. A request: the query, ef, k and epoch written, then
// its number (one more than the slot's last); its answer: ids and
// distances (and the status) written, then the answered number. A request
// of another epoch than the server's is refused (status 1, no search): so
// a writer that saw an older server's epoch cannot have its query searched
// on another graph; so is one whose k is not in 1..max_k or whose ef is
// not in k..kMaxDeviceEf (the kernel trusts nothing in the slot).

// Whether a ring request's list (ef) and answers (k) fit a server whose
// slots hold max_k answers: what GraphServer and CpuGraphServer search;
// they refuse the rest unsearched.
GKNN_HD bool ring_request_fits(int ef, int k, int max_k) {
  return k >= 1 && k <= max_k && ef >= k && ef <= kMaxDeviceEf;
}

// The serving clusters of a GraphServer with `slots` slots: one a slot up
// to 16, then up to kMaxSlotsPerCluster a cluster; slot s is served by
// cluster s % serving_clusters(slots), its slots in turn (a caller that
// wants each request its own cluster fills slots 0..clusters-1 first).
constexpr int kMaxSlotsPerCluster = 4;
constexpr int serving_clusters(int slots) {
  const int one_each = slots < 16 ? slots : 16;
  const int shared = (slots + kMaxSlotsPerCluster - 1) / kMaxSlotsPerCluster;
  return one_each > shared ? one_each : shared;
}

struct RingLayout {
  // Slot i at i * slot_bytes(); after the slots, the doorbell: one u32 a
  // slot, its request number, written last (one line the kernel reads for
  // every slot at once; at most kMaxRingSlots slots).
  static constexpr int kMaxRingSlots = 64;
  static constexpr std::size_t kEfAt = 4;          // i32
  static constexpr std::size_t kKAt = 8;           // i32, 1..max_k
  static constexpr std::size_t kEpochAt = 12;      // u32
  static constexpr std::size_t kAnsweredAt = 128;  // u32, written last
  static constexpr std::size_t kStatusAt = 132;    // u32: 0 answered, 1 refused (epoch, ef or k)
  static constexpr std::size_t kQueryAt = 256;     // max_dim floats
  int max_dim = 0, max_k = 0;
  static constexpr std::size_t round128(std::size_t b) { return (b + 127) / 128 * 128; }
  std::size_t ids_at() const { return kQueryAt + round128(std::size_t(max_dim) * sizeof(float)); }
  std::size_t distances_at() const { return ids_at() + round128(std::size_t(max_k) * sizeof(std::int64_t)); }
  std::size_t slot_bytes() const { return distances_at() + round128(std::size_t(max_k) * sizeof(double)); }
  std::size_t doorbell_at(int slots) const { return std::size_t(slots) * slot_bytes(); }
  std::size_t ring_bytes(int slots) const { return doorbell_at(slots) + round128(std::size_t(slots) * 4); }
};
struct RingSpec {
  void* host = nullptr;  // layout.ring_bytes(slots), mapped for the device
  int slots = 0;
  RingLayout layout;
  std::uint32_t epoch = 0;
  const std::int64_t* row_ids = nullptr;  // host, one a row: answers are row_ids[row] (null: rows)
};

class GraphServer {
 public:
  GraphServer(const DeviceGraph& g, int slots, int team, const SearchParams& sp);
  GraphServer(const DeviceGraph& g, const RingSpec& ring, int team, const SearchParams& sp);
  ~GraphServer();  // stops the kernel and waits for it
  GraphServer(const GraphServer&) = delete;
  GraphServer& operator=(const GraphServer&) = delete;
  void search(int slot, const float* query, int ef, int k, std::int64_t* ids, double* distances);
  void submit(int slot, const float* query, int ef, int k);
  // Each launch ends on its own after a lifetime (4 ms), so that nothing
  // waits for it forever; keep_alive() keeps the next launch queued behind
  // the running one: call it at least once a lifetime while serving (or
  // after submit() and while a submission is unanswered).
  void keep_alive();
  bool answered(int slot) const;  // the slot's last submission (through submit())
  void answers(int slot, int k, std::int64_t* ids, double* distances) const;
  int slots() const;
  int team() const;  // CTAs a query (the device's choice where 0 was asked)

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

// GraphServer's ring protocol served on the CPU: a host thread reads the
// ring's doorbell line (sleeping 20 us when no slot had a request) and
// answers each request with search_cpu, with the kernel's refusals (another
// epoch, k outside 1..max_k, ef outside k..kMaxDeviceEf) and its answers
// (rows mapped through row_ids; search_cpu's are the kernel's, bit for
// bit). For testing a ring's writers where there is no GPU (the GPU
// service's gknn.service_cpu_ring); g and vectors must outlive it. Throws
// Error(InvalidArgument) for a ring it cannot serve.
class CpuGraphServer {
 public:
  CpuGraphServer(const Graph& g, const float* vectors, int dim, Metric metric, const RingSpec& ring,
                 const SearchParams& sp);
  ~CpuGraphServer();  // stops its thread and waits for it
  CpuGraphServer(const CpuGraphServer&) = delete;
  CpuGraphServer& operator=(const CpuGraphServer&) = delete;
  void keep_alive();  // Error(DeviceFault) once its thread failed

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

// ---------------------------------------------------------------------------
// Maintenance: pure functions on in-memory lists. The access method reads the
// rows and vectors it needs from pages, calls these, and writes the rows they
// return. One rule, prune_list, shapes every list: the build's, an inserted
// node's, and a repaired one's.
// ---------------------------------------------------------------------------

// Sorts candidates (ids[i], distances[i]), i < m, by (distance, id) with NaN
// last (distances made canonical), and removes duplicate ids and `owner`
// (pass kNoNode for none). Returns the new count; both arrays are rewritten
// in place.
int order_candidates(std::uint32_t owner, std::uint32_t* ids, double* distances, int m);

// CAGRA's rank-based pruning of one node's candidate list to `degree`.
//
// candidates: m distinct ids (not the owner) in order of (distance to owner,
// id) (see order_candidates); candidate i has rank i. candidate_rows: m x
// row_len ids, row i = candidate i's own out-neighbours in rank order (a
// graph row, or a kNN list), kNoNode-padded; a row the caller does not have
// may be all kNoNode (that candidate then offers no detours).
//
// A route owner -> c_i -> c_j is detourable when c_j is in c_i's row at rank
// p with max(i, p) < j. Candidates are kept by (number of detourable routes,
// rank) ascending: the min(m, degree) kept are written to out (degree slots)
// in rank order, the rest kNoNode. Returns the number kept.
int prune_list(const std::uint32_t* candidates, int m, const std::uint32_t* candidate_rows, int row_len,
               int degree, std::uint32_t* out);

// Adds the edge owner -> x (x_distance = distance(owner, x)) to owner's row,
// the reverse edge of an inserted node x.
//
// row: `degree` slots in row order (kNoNode at the end); row_distances:
// distance(owner, row[i]) for the occupied slots (the caller computes them
// from the vectors; entries past the last occupied slot are ignored).
// x_row: x's own out-row (x_row_len ids, kNoNode-padded), used for the
// detour rule.
//
// Rule: x already in the row, or x == owner: no change. A free slot: x is
// inserted at its (distance, id) position. A full row: an entry w farther
// than x that x detours (w in x_row) is dropped, the farthest such, since
// owner -> x -> w still reaches it, and x goes in at its position;
// otherwise, with `force`, the last (farthest) entry is dropped for x,
// which goes in at its position (the last slot if it is the farthest): use
// it so an inserted node gets at least one in-edge, on its nearest
// neighbour when no other list took it; otherwise no change. Returns true
// when row (and row_distances) changed.
bool add_reverse_edge(std::uint32_t* row, double* row_distances, int degree, std::uint32_t owner,
                      std::uint32_t x, double x_distance, const std::uint32_t* x_row, int x_row_len,
                      bool force = false);

// The candidates for repairing owner's row after some of its neighbours
// were deleted: its live entries, then the live entries of the deleted
// entries' rows (neighbours of the deleted neighbours, which the deletion
// would otherwise disconnect), then the live entries of the live entries'
// rows (when the first two give fewer than 2 * degree), deduplicated, owner
// excluded, in that order (not by distance).
//
// row: owner's `degree` slots. rows_of_row: degree x degree ids, the rows
// of row[0..degree) (all kNoNode for an empty slot, or for a row the caller
// did not read). deleted(id): whether a node is deleted; it is called for
// ids found in these rows only. Returns the candidate ids; the caller then
// computes their distances to owner, calls order_candidates, keeps at most
// intermediate-degree-many, reads their rows and calls prune_list: the
// repaired row. Nothing deleted in the row: returns the row's entries.
std::vector<std::uint32_t> repair_candidates(std::uint32_t owner, const std::uint32_t* row, int degree,
                                             const std::uint32_t* rows_of_row,
                                             const std::function<bool(std::uint32_t)>& deleted);

// In-memory drivers of the rules above (used by tests, and by the access
// method's docs as the reference sequence of calls):
//
// insert_node: node x = n (vectors must already hold n + 1 rows) is added
// to g: a search of ef from x's vector gives its candidates, prune_list its
// row, add_reverse_edge the reverse edges (forced on the nearest candidate
// when no list took x). g.n grows by one.
void insert_node(Graph& g, const float* vectors, int dim, Metric metric, int ef, std::uint64_t seed);

// repair_deleted: every row with a deleted entry is repaired
// (repair_candidates, distances, order_candidates, at most 2 * degree
// candidates, prune_list), and deleted nodes' own rows are cleared to
// kNoNode; then a walk from the first live node finds live parts that no
// longer have a way in (their in-edges all came from deleted nodes) and
// links each to its nearest reached node both ways (add_reverse_edge with
// force), as the build does for clusters its kNN graph left apart, and
// g.entries is recomputed as the build computes it (a deleted entry would
// leave its part without one). The
// access method needs the whole graph in memory for that last pass (one
// walk over the rows; one search per part found). `deleted`: n flags.
// Node ids are not renumbered.
void repair_deleted(Graph& g, const float* vectors, int dim, Metric metric, const std::uint8_t* deleted);

// Throws Error(InvalidArgument) when some row of g is not in (distance to
// its owner, id) order. For tests and debugging.
void check_row_order(const Graph& g, const float* vectors, int dim, Metric metric);

}  // namespace gknn::graph
