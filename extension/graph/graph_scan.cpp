// gpu_graph ordered scans: ORDER BY column <op> value.
//
// Round r asks the core's graph search for want = k x 2^r rows with a
// candidate list of max(gknn.graph_ef_search x 2^r, want) (k: the LIMIT +
// OFFSET found by the ExecutorStart hook, else kGraphDefaultK), and returns
// the rows not returned before in (distance, TID) order; distances are the
// operator's values from the vectors the index stores, so no row is read
// here (the executor fetches each and decides its visibility). When the
// executor wants more rows (a WHERE clause rejected them, tuples were dead),
// the next round doubles both. A round that asks for every row, or follows a
// search that found fewer rows than it asked for (parts of the graph it
// cannot reach), ranks every row of the index exactly instead; then the
// rows whose vector is NULL follow (a sort puts NULL distances last). So a
// scan never returns fewer rows than the index holds.
//
// Order: exact within a round; a later round can find a row nearer than one
// an earlier round returned (the search is approximate), and returns it then.
//
// Where the search runs (gknn_service_route, once per scan): in the GPU
// service, which holds the index's graph for every session (the first
// backend that finds it missing ships it there) and batches the searches of
// all sessions (gknn::graph::DeviceGraph on its GPU, search_cpu with
// gknn.service = cpu: the same rows and distances), or on this backend's CPU
// (search_cpu). Through the service a scan needs no image of its own: the
// service answers with heap TIDs, and the metapage's counts say how many
// rows there are; this backend reads the index only to ship it, for an
// exhaustive round, for the NULL rows, and for a round whose candidate list
// exceeds what the GPU search takes (kMaxDeviceEf). With gknn.device = auto,
// a service that stops mid-scan leaves the rest of the scan to the CPU.
#include <cstring>

#include "am/heap_id.h"
#include "am/ordered_scan.h"
#include "device.h"
#include "graph.h"
#include "service/service.h"
#include "types/vector.h"

extern "C" {
#include "utils/memutils.h"
}

namespace {

// The shared state (ordered_scan.h) and a graph search's.
struct GraphScan : OrderedScan {
  int64 want;       // rows the next round asks for
  int64 ef;         // its candidate list
  bool exhaustive;  // the next round ranks every row
  bool index_done;
  bool nulls_done;
};

// OrderedScanMethods::start: the query's floats, the first round's sizes.
void start_scan(IndexScanDesc scan, OrderedScan* os) {
  auto* so = static_cast<GraphScan*>(os);
  if (!so->query_null) {
    const Vector* v = DatumGetVector(scan->orderByData[0].sk_argument);
    // A stored value of an impossible dimension (older gknn versions' avg
    // made them) must not size a copy.
    if (v->dim < 1 || v->dim > kGraphMaxDim)
      ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                      errmsg("gpu_graph cannot search for a vector of %d dimensions", v->dim)));
    so->qdim = v->dim;
    so->query = static_cast<float*>(palloc(sizeof(float) * Max(v->dim, 1)));
    memcpy(so->query, v->x, sizeof(float) * v->dim);
  }
  so->want = so->k;
  so->ef = Max(static_cast<int64>(gknn_graph_ef_search), so->k);
  so->exhaustive = false;
  so->index_done = so->nulls_done = false;
}

// Times a round ships the index's image and asks again before it gives up
// (an image that does not stay resident: a budget too small for it, or a
// stream of changes that outruns the shipping).
constexpr int kShipAttempts = 4;

// Live rows of the index by its metapage: every node but the dead and the
// NULL ones (the rows of its image).
int64 live_rows(const GraphMeta& meta) { return Max(meta.nodes - meta.dead - meta.nulls, int64{0}); }

// Ships this backend's image of `index` (its current generation) to the
// service, then lets this backend's copy go (the service searches it).
// Returns the generation shipped.
uint64 ship_image(Relation index, OrderedScanStats* st) {
  const GraphImage* image = graph_image_get(index);
  ServiceGraphImage ship;
  ship.rows = image->rows;
  ship.degree = image->meta.degree;
  ship.dim = image->meta.dim;
  ship.metric = image->meta.metric;
  ship.seed = image->meta.seed;
  ship.edges = image->graph->edges.data();
  ship.entries = image->graph->entries.data();
  ship.nentries = static_cast<int64>(image->graph->entries.size());
  ship.vectors = image->vectors;
  ship.ids = image->ids;
  const uint64 generation = image->meta.generation;
  st->images_shipped++;
  gknn_service_graph_load(RelationGetRelid(index), index->rd_node, generation, ship);
  graph_image_release(index);
  return generation;
}

// One search through the service of `want` rows (ids: heap TIDs as ids,
// best first) of the index at `generation` or newer; -1 when the service
// went away (gknn.device = auto: the caller searches on the CPU).
int64 service_search(Relation index, GraphScan* so, uint64 generation, int64 want, int64 ef, int64* ids,
                     double* dist) {
  for (int attempt = 0; attempt < kShipAttempts; ++attempt) {
    CHECK_FOR_INTERRUPTS();
    int64 count = 0, rows = 0;
    bool gone = false;
    ServiceTrip trip;
    if (gknn_service_graph_search(RelationGetRelid(index), index->rd_node, generation, so->query, so->qdim,
                                  static_cast<int>(Min(ef, static_cast<int64>(PG_INT32_MAX))), want, ids,
                                  dist, &count, &rows, &gone, &trip)) {
      scan_stats_count_service(&so->stats, trip, count);
      return count;
    }
    if (gone) {
      so->route.use_service = false;  // gknn.device = auto: the CPU takes over
      so->stats.cpu_reason = "the gknn service stopped during the scan";
      return -1;
    }
    generation = ship_image(index, &so->stats);
  }
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                  errmsg("gpu_graph index \"%s\" could not be kept resident in the gknn GPU service",
                         RelationGetRelationName(index)),
                  errhint("Raise gknn.gpu_memory_limit, or set gknn.device = cpu.")));
  return -1;
}

// One search on this backend's CPU, as service_search.
int64 cpu_search(Relation index, GraphScan* so, int64 want, int64 ef, int64* ids, double* dist) {
  const GraphImage* image = graph_image_get(index);
  gknn::graph::SearchParams sp;
  sp.k = static_cast<int>(want);
  sp.ef = static_cast<int>(Min(ef, static_cast<int64>(PG_INT32_MAX)));
  sp.seed = image->meta.seed;
  const float* query = so->query;
  const int dim = so->qdim;
  const auto metric = static_cast<gknn::Metric>(image->meta.metric);
  gknn_pg::core_call(
      [&] { gknn::graph::search_cpu(*image->graph, image->vectors, dim, metric, query, 1, sp, ids, dist); });
  int64 n = 0;
  while (n < want && ids[n] >= 0 && ids[n] < image->rows) {
    ids[n] = image->ids[ids[n]];
    ++n;
  }
  so->stats.cpu_searches++;
  so->stats.cpu_candidates += n;
  return n;
}

// One graph search of `want` rows with a candidate list of `ef` (ids: heap
// TIDs as ids, best first); returns how many it found. The one place that
// decides where a round runs: the service (the scan's route), unless it
// went away, or the list is longer than the GPU search takes.
int64 search_round(Relation index, GraphScan* so, const GraphMeta& meta, int64 want, int64 ef, int64* ids,
                   double* dist) {
  if (so->route.use_service) {
    if (so->route.device >= 0 && Max(ef, want) > gknn::graph::kMaxDeviceEf) {
      so->stats.cpu_reason = "a candidate list longer than the GPU search takes (1024)";
    } else {
      int64 n = service_search(index, so, meta.generation, want, ef, ids, dist);
      if (n >= 0) return n;
    }
  }
  return cpu_search(index, so, want, ef, ids, dist);
}

void add_id(GraphScan* so, int64 id, double distance) {
  ScanCandidate c;
  heap_id_to_tid(id, &c.tid);
  c.distance = distance;
  c.isnull = false;
  ordered_scan_add(so, c);
}

void add_row(GraphScan* so, const GraphImage* image, int64 row, double distance) {
  add_id(so, image->ids[row], distance);
}

// Every row not returned yet, ranked exactly (on this backend's CPU).
void exhaustive_round(GraphScan* so, const GraphImage* image) {
  if (so->route.use_service) so->stats.cpu_reason = "a last round ranks every row exactly";
  const auto metric = static_cast<gknn::Metric>(image->meta.metric);
  const int dim = image->meta.dim;
  so->batch = static_cast<ScanCandidate*>(
      MemoryContextAllocHuge(so->round_cxt, sizeof(ScanCandidate) * Max(image->rows, int64{1})));
  for (int64 r = 0; r < image->rows; ++r) {
    add_row(so, image, r, gknn::distance(metric, image->vectors + r * dim, so->query, dim));
    if ((r & 4095) == 4095) CHECK_FOR_INTERRUPTS();
  }
  so->stats.cpu_searches++;
  so->stats.cpu_candidates += image->rows;
}

// Every row (and NULL) with a NULL distance: ORDER BY column <-> NULL.
void null_query_round(GraphScan* so, const GraphImage* image) {
  ordered_scan_null_batch(so, image->ids, image->rows, image->nulls, image->nnulls);
  so->index_done = so->nulls_done = true;
}

// Last: the rows whose vector is NULL (read only when the metapage counts any).
void nulls_round(GraphScan* so, Relation index) {
  GraphMeta meta;
  graph_read_meta(index, &meta);
  const GraphImage* image = meta.nulls > 0 ? graph_image_get(index) : nullptr;
  ordered_scan_null_batch(so, image ? image->nulls : nullptr, image ? image->nnulls : 0, nullptr, 0);
  so->nulls_done = true;
}

// A round of the graph search (or, when it asks for every row or the last
// one could not reach enough, of every row ranked exactly).
void index_round(IndexScanDesc scan, GraphScan* so) {
  Relation index = scan->indexRelation;
  GraphMeta meta;
  graph_read_meta(index, &meta);
  if (so->qdim != meta.dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("different vector dimensions %d and %d", meta.dim, so->qdim)));
  if (so->exhaustive || so->want >= live_rows(meta) || so->want > PG_INT32_MAX) {
    exhaustive_round(so, graph_image_get(index));
    so->index_done = true;
  } else {
    int64* ids = static_cast<int64*>(MemoryContextAllocHuge(so->round_cxt, sizeof(int64) * so->want));
    double* dist = static_cast<double*>(MemoryContextAllocHuge(so->round_cxt, sizeof(double) * so->want));
    int64 found = search_round(index, so, meta, so->want, so->ef, ids, dist);
    // Rows of a newer image than the heap this scan knows are skipped (the
    // executor could not fetch them; the scan's snapshot cannot see them).
    const BlockNumber heap_blocks =
        scan->heapRelation ? RelationGetNumberOfBlocks(scan->heapRelation) : InvalidBlockNumber;
    so->batch = static_cast<ScanCandidate*>(palloc(sizeof(ScanCandidate) * Max(found, int64{1})));
    for (int64 i = 0; i < found; ++i)
      if (ids[i] > 0 && (heap_blocks == InvalidBlockNumber || (ids[i] >> 16) < heap_blocks))
        add_id(so, ids[i], dist[i]);
    // Fewer than asked: the rest cannot be reached from where the
    // search starts; the next round ranks every row.
    if (found < so->want) so->exhaustive = true;
  }
  so->want = so->want > PG_INT64_MAX / 4 ? so->want : so->want * 2;
  so->ef = so->ef > PG_INT64_MAX / 4 ? so->ef : so->ef * 2;
}

// OrderedScanMethods::next_round: the next batch; false when the scan has
// nothing more.
bool next_round(IndexScanDesc scan, OrderedScan* os) {
  auto* so = static_cast<GraphScan*>(os);
  if (so->nulls_done) return false;
  if (so->query_null)
    null_query_round(so, graph_image_get(scan->indexRelation));
  else if (so->index_done)
    nulls_round(so, scan->indexRelation);
  else
    index_round(scan, so);
  return true;
}

const OrderedScanMethods kGraphScan = {
    "gpu_graph", "gpu_graph scan", "gpu_graph scan round", "gpu_graph returned TIDs", kGraphDefaultK,
    start_scan,  next_round,       /*release=*/nullptr};

}  // namespace

IndexScanDesc graph_beginscan(Relation index, int nkeys, int norderbys) {
  IndexScanDesc scan = ordered_scan_begin(index, nkeys, norderbys, sizeof(GraphScan), &kGraphScan);
  auto* so = static_cast<GraphScan*>(scan->opaque);
  so->k = Min(so->k, static_cast<int64>(PG_INT32_MAX));  // a search's k is an int
  return scan;
}
