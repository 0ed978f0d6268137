// gpu_ivfpq ordered scans: ORDER BY column <op> value.
//
// Round 1 asks the core for refine x k candidates by PQ distance from
// gknn.ivfpq_probes lists (k: the LIMIT found by the ExecutorStart hook, or
// kIvfpqDefaultK), adds the pending chain (rows inserted while the index had
// no quantizer), reads each candidate's vector from the heap (the indexed
// column, or the indexed expression computed on the row), and returns
// them ordered by their exact distance (the operator's own value; no
// recheck). When the executor wants more rows (quals rejected them, tuples
// were dead), the next round doubles both the candidates and the probes,
// skipping TIDs already returned, until a round covers every list and entry;
// then the rows whose vector is NULL follow (a sort puts NULL distances
// last). So a scan never returns fewer rows than the index holds.
//
// Order: exact within a round; a later round can find a row nearer than one
// an earlier round returned (the search is approximate), and returns it then.
//
// Where the PQ search runs (gknn_service_route, once per scan): in the GPU
// service, which holds the index image for every session (the first backend
// that finds it missing ships it there), or on this backend's CPU. With
// gknn.device = auto, a service that stops mid-scan leaves the rest of the
// scan to the CPU.
#include "am/heap_id.h"
#include "am/ordered_scan.h"
#include "device.h"
#include "ivfpq.h"
#include "service/service.h"
#include "service/service_images.h"

extern "C" {
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

namespace {

// The shared state (ordered_scan.h; its round context also holds the
// round's detoasted vectors) and an IVF-PQ search's.
struct IvfpqScan : OrderedScan {
  int metric;
  IvfpqElement element;
  int64 entries;  // coded entries of the index, when known (-1: not yet)
  int64 want;     // candidates the next round asks for
  int probes;     // lists the next round searches
  bool index_done;
  bool pending_done;
  bool nulls_done;
  IndexFetchTableData* fetch;
  TupleTableSlot* slot;
  AttrNumber attno;  // the indexed column; 0: an expression, computed with
  IndexInfo* info;   // the index's expression (made with the fetch state)
  EState* estate;
};

// Times in a row a scan round ships its image (or a delta) and asks again
// while the service's copy makes no progress, before it gives up (an image
// that does not stay resident). Tries in which the service's copy moved on
// (other sessions shipped newer generations: a stream of inserts) do not
// count, up to kMaxShipAttempts in all.
constexpr int kShipAttempts = 4;
constexpr int kMaxShipAttempts = 1000;

// OrderedScanMethods::start: the query's floats, the first round's sizes.
void start_scan(IndexScanDesc scan, OrderedScan* os) {
  auto* so = static_cast<IvfpqScan*>(os);
  so->element = ivfpq_index_opclass(scan->indexRelation).element;
  if (!so->query_null) {
    IvfpqValue q = ivfpq_value(so->element, scan->orderByData[0].sk_argument);
    so->qdim = q.dim;
    so->query = static_cast<float*>(palloc(sizeof(float) * q.dim));
    ivfpq_value_floats(so->element, q, so->query);
  }
  int64 refine = gknn_ivfpq_exact ? 1 : gknn_ivfpq_refine;  // exact: the k nearest, then more
  so->want = so->k > PG_INT64_MAX / refine ? PG_INT64_MAX / 2 : so->k * refine;
  so->probes = gknn_ivfpq_probes;
  so->entries = -1;
  so->index_done = so->pending_done = so->nulls_done = false;
}

// What reading candidates from the heap needs: a fetch state and a slot,
// and for an expression index, the expression and an executor state to
// compute it on the fetched row (as the index build did).
void begin_fetch(IndexScanDesc scan, IvfpqScan* so) {
  MemoryContext c = MemoryContextSwitchTo(so->cxt);
  so->fetch = table_index_fetch_begin(scan->heapRelation);
  so->slot = table_slot_create(scan->heapRelation, nullptr);
  if (so->attno == 0) {
    so->info = BuildIndexInfo(scan->indexRelation);
    so->estate = CreateExecutorState();
    GetPerTupleExprContext(so->estate)->ecxt_scantuple = so->slot;
  }
  MemoryContextSwitchTo(c);
}

// OrderedScanMethods::release: the heap fetch state (not in the scan's
// memory context).
void end_fetch(OrderedScan* os) {
  auto* so = static_cast<IvfpqScan*>(os);
  if (so->estate) FreeExecutorState(so->estate);
  so->estate = nullptr;
  so->info = nullptr;
  if (so->fetch) {
    table_index_fetch_end(so->fetch);
    ExecDropSingleTupleTableSlot(so->slot);
  }
  so->fetch = nullptr;
  so->slot = nullptr;
}

// The indexed value of the fetched row: its column, or the index's
// expression computed on it (in the per-tuple context, reset by the caller).
Datum indexed_value(IvfpqScan* so, bool* isnull) {
  if (so->attno != 0) return slot_getattr(so->slot, so->attno, isnull);
  Datum value;
  FormIndexDatum(so->info, so->slot, so->estate, &value, isnull);
  return value;
}

// The exact distance of the row at `id`; false when there is no such row for
// this scan's snapshot (dead, never committed, removed).
bool exact_distance(IvfpqScan* so, int64 id, BlockNumber heap_blocks, Snapshot snapshot, ScanCandidate* out) {
  heap_id_to_tid(id, &out->tid);
  if (ItemPointerGetBlockNumber(&out->tid) >= heap_blocks) return false;
  bool call_again = false, all_dead = false;
  if (!table_index_fetch_tuple(so->fetch, &out->tid, snapshot, so->slot, &call_again, &all_dead))
    return false;
  bool isnull;
  Datum d = indexed_value(so, &isnull);
  bool ok = false;
  if (!isnull) {
    IvfpqValue v = ivfpq_value(so->element, d);
    if (v.dim != so->qdim) ivfpq_dimension_mismatch(so->element, v.dim, so->qdim);
    out->distance = ivfpq_value_distance(static_cast<gknn::Metric>(so->metric), so->element, v, so->query);
    out->isnull = false;
    ok = true;
  }
  if (so->estate) ResetPerTupleExprContext(so->estate);
  ExecClearTuple(so->slot);
  return ok;
}

// The search mode of a round: an index that stores vectors ranks by exact
// distance where the search runs (every entry with gknn.ivfpq_exact, else the
// PQ candidates), so no candidate is read from the heap; one that does not
// (over about 2,000 dimensions) returns PQ candidates the scan re-ranks from
// the heap.
int search_mode(Relation index, const IvfpqMeta& meta) {
  if (meta.stores_vectors) return gknn_ivfpq_exact ? GKNN_SEARCH_EXACT : GKNN_SEARCH_REFINED;
  if (gknn_ivfpq_exact && meta.trained)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("gpu_ivfpq index \"%s\" stores no vectors, which gknn.ivfpq_exact needs",
                           RelationGetRelationName(index)),
                    errdetail("Indexes of vectors over about 2,000 dimensions keep only PQ codes."),
                    errhint("Set gknn.ivfpq_exact = off, or disable index scans for an exact answer.")));
  return GKNN_SEARCH_PQ;
}

// Gives the service the current image of `index`: what changed since the
// generation it holds (held) where it holds one and the change log proves
// the changes (only the changed pages' entries travel), else the whole
// image; *image becomes the generation shipped. A delta the service could
// not apply (another session moved its image on meanwhile) is not followed
// by the whole image at once: the next try learns the generation held now,
// unless it is the one the delta failed on (*failed_from), which only a
// whole image mends. Counts what it shipped in *st.
void ship_image(Relation index, const IvfpqImage** image, const ServiceHeld& held, uint64* failed_from,
                OrderedScanStats* st) {
  Oid oid = RelationGetRelid(index);
  if (held.resident && held.generation != *failed_from) {
    IvfpqDelta* delta = nullptr;
    *image = ivfpq_image_get_delta(index, held.generation, &delta);
    const IvfpqMeta& meta = (*image)->meta;
    if (meta.generation == held.generation) return;  // shipped by another backend meanwhile
    if (delta) {
      st->deltas_shipped++;
      if (!gknn_service_ivfpq_delta(oid, index->rd_node, *delta, meta.code_size,
                                    meta.stores_vectors ? meta.dim : 0, ivfpq_meta_element(meta)))
        *failed_from = held.generation;
      return;
    }
  }
  *image = ivfpq_image_get(index, true);
  st->images_shipped++;
  gknn_service_ivfpq_load(oid, index->rd_node, (*image)->meta.generation, *(*image)->host, *(*image)->pages);
  ivfpq_image_release_host(index);
}

// This round's candidates (ids, distances: up to `want`, best first), from
// the GPU service or this backend's CPU; sets so->entries. *image may be
// replaced by a newer one (the index changed while its image was shipped).
int64 round_candidates(IndexScanDesc scan, IvfpqScan* so, const IvfpqImage** image, int mode, int probes,
                       int64 want, int64* ids, double* dist) {
  Relation index = scan->indexRelation;
  // A missing image is shipped (or what changed since the generation the
  // service holds), then asked for again; the retries cover an eviction or
  // a newer generation arriving in between (inserts in other sessions).
  uint64 failed_from = PG_UINT64_MAX;  // the held generation a delta failed on
  ServiceHeld last{false, 0};
  for (int attempt = 0, stalls = 0;
       so->route.use_service && attempt < kMaxShipAttempts && stalls < kShipAttempts; ++attempt) {
    CHECK_FOR_INTERRUPTS();
    int64 count = 0, entries = 0;
    bool gone = false;
    ServiceHeld held;
    ServiceTrip trip;
    if (gknn_service_ivfpq_search(RelationGetRelid(index), index->rd_node, (*image)->meta.generation,
                                  so->query, so->qdim, probes, mode, want, ids, dist, &count, &entries, &gone,
                                  &trip, &held)) {
      so->entries = entries;
      scan_stats_count_service(&so->stats, trip, count);
      return count;
    }
    if (gone) {
      so->route.use_service = false;  // gknn.device = auto: the CPU takes over
      so->stats.cpu_reason = "the gknn service stopped during the scan";
      break;
    }
    const bool moved = held.resident && (!last.resident || held.generation > last.generation);
    stalls = moved ? 0 : stalls + 1;
    last = held;
    ship_image(index, image, held, &failed_from, &so->stats);
  }
  if (so->route.use_service)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("gpu_ivfpq index \"%s\" could not be kept resident in the gknn GPU service",
                           RelationGetRelationName(index)),
                    errhint("Raise gknn.gpu_memory_limit, or set gknn.device = cpu.")));
  *image = ivfpq_image_get(index, true);
  const gknn::ivfpq::Image* host = (*image)->host;
  gknn_service::ExactBoundsCache* bounds = (*image)->exact_bounds;
  const uint64 generation = (*image)->meta.generation;
  so->entries = (*image)->entries;
  if (so->entries == 0) return 0;
  gknn::ivfpq::SearchParams sp;
  sp.k = static_cast<int>(Min(want, so->entries));
  sp.probes = probes;
  sp.refine = mode == GKNN_SEARCH_REFINED ? 1 : 0;
  const float* query = so->query;
  gknn_pg::core_call(
      [&] { gknn_service::search_image_cpu(*host, mode, query, 1, sp, ids, dist, bounds, generation); });
  int64 n = 0;
  while (n < sp.k && ids[n] >= 0) ++n;
  so->stats.cpu_searches++;
  so->stats.cpu_candidates += n;
  return n;
}

// OrderedScanMethods::next_round: the next batch; false when the scan has
// nothing more.
bool next_round(IndexScanDesc scan, OrderedScan* os) {
  auto* so = static_cast<IvfpqScan*>(os);
  if (so->nulls_done) return false;
  // Entries are needed here only to list them all (NULL query) or to search
  // on this backend's CPU.
  const IvfpqImage* image =
      ivfpq_image_get(scan->indexRelation, so->query_null || (!so->route.use_service && !so->index_done));
  so->metric = image->meta.metric;

  if (so->index_done) {
    // Last: the rows whose vector is NULL.
    ordered_scan_null_batch(so, image->nulls, image->nnulls, nullptr, 0);
    so->nulls_done = true;
    return true;
  }

  if (so->query_null) {
    // ORDER BY column <-> NULL: every distance is NULL, any order is right.
    ordered_scan_null_batch(so, image->entries > 0 ? image->host->ids.data() : nullptr, image->entries,
                            image->pending, image->npending);
    so->index_done = so->pending_done = true;
    return true;
  }

  if (image->meta.dim > 0 && image->meta.dim != so->qdim)
    ivfpq_dimension_mismatch(so->element, image->meta.dim, so->qdim);

  // Candidates by PQ distance.
  int64 ncand = 0;
  int64* ids = nullptr;
  double* dist = nullptr;
  int mode = search_mode(scan->indexRelation, image->meta);
  if (image->meta.trained) {
    int probes = Min(so->probes, image->meta.lists);
    int64 want = Min(so->want, static_cast<int64>(PG_INT32_MAX));
    if (so->entries >= 0) want = Min(want, Max(so->entries, int64{1}));
    ids = static_cast<int64*>(MemoryContextAllocHuge(so->round_cxt, sizeof(int64) * want));
    dist = static_cast<double*>(MemoryContextAllocHuge(so->round_cxt, sizeof(double) * want));
    ncand = round_candidates(scan, so, &image, mode, probes, want, ids, dist);
    bool all_lists = probes >= image->meta.lists || mode == GKNN_SEARCH_EXACT;
    if (all_lists && want >= so->entries) so->index_done = true;
  } else {
    so->index_done = true;
  }
  so->want = so->want > PG_INT64_MAX / 2 ? so->want : so->want * 2;
  so->probes = so->probes > PG_INT32_MAX / 2 ? PG_INT32_MAX : so->probes * 2;
  int64 npending = so->pending_done ? 0 : image->npending;
  so->pending_done = true;

  // Exact distances from the heap.
  Relation heap = scan->heapRelation;
  if (so->fetch == nullptr) begin_fetch(scan, so);
  Snapshot snapshot = IsMVCCSnapshot(scan->xs_snapshot) ? scan->xs_snapshot : SnapshotAny;
  BlockNumber heap_blocks = RelationGetNumberOfBlocks(heap);
  so->batch = static_cast<ScanCandidate*>(
      MemoryContextAllocHuge(so->round_cxt, sizeof(ScanCandidate) * Max(ncand + npending, int64{1})));
  for (int64 i = 0; i < ncand + npending; ++i) {
    int64 id = i < ncand ? ids[i] : image->pending[i - ncand];
    if (id < 0) continue;
    ScanCandidate c;
    heap_id_to_tid(id, &c.tid);
    if (!ordered_scan_claim(so, &c.tid)) continue;
    if (i < ncand && mode != GKNN_SEARCH_PQ) {
      // Ranked by the stored vector: the operator's value, no heap access
      // (the executor still fetches the row and decides its visibility).
      if (ItemPointerGetBlockNumber(&c.tid) >= heap_blocks) continue;
      c.distance = dist[i];
      c.isnull = false;
      so->batch[so->nbatch++] = c;
    } else if (exact_distance(so, id, heap_blocks, snapshot, &c)) {
      so->batch[so->nbatch++] = c;
    }
    if ((i & 255) == 255) CHECK_FOR_INTERRUPTS();
  }
  return true;
}

const OrderedScanMethods kIvfpqScan = {"gpu_ivfpq",
                                       "gpu_ivfpq scan",
                                       "gpu_ivfpq scan round",
                                       "gpu_ivfpq returned TIDs",
                                       kIvfpqDefaultK,
                                       start_scan,
                                       next_round,
                                       end_fetch};

}  // namespace

IndexScanDesc ivfpq_beginscan(Relation index, int nkeys, int norderbys) {
  IndexScanDesc scan = ordered_scan_begin(index, nkeys, norderbys, sizeof(IvfpqScan), &kIvfpqScan);
  auto* so = static_cast<IvfpqScan*>(scan->opaque);
  so->entries = -1;
  so->attno = index->rd_index->indkey.values[0];
  return scan;
}
