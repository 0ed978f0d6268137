// gpu_graph build: read every row's vector (NULLs kept aside), build the
// graph with the core library, write the node pages and the metapage, then
// WAL-log every page once (log_newpage_range).
//
// Node numbers: the rows with a vector are nodes 0..n-1 in heap order (row i
// of the core's graph is node i), the NULL rows follow them. The dimension
// is the column's typmod, else the first vector's, and is fixed for the
// index's life (every node slot has room for it).
//
// Where the graph is built (build_graph() is the one place that chooses):
// in the GPU service when gknn_service_route() says so (gknn.device = auto
// with the service serving, or gpu: the service on a GPU, else ERROR 55000),
// as gpu_ivfpq's builds go: the vectors shipped in pieces, build_gpu on the
// service's device (build_cpu when it runs on the CPU), the graph's rows and
// entries fetched back (service_build_client.cpp). Otherwise, and when the
// service stops midway under auto, the core's build_cpu in this backend:
// the same seed, the same graph as the service's CPU build.
//
// Cancel: in this backend the core's progress callback only reads the
// interrupt flags and answers false, the core throws Cancelled, and the
// interrupt is raised once its frames are gone
// (ivfpq_core_call_cancellable). Waiting for the service, the wait serves
// the interrupt and withdraws the request; the service's build stops at its
// next progress report.
#include <cmath>
#include <cstring>

#include "am/index_build.h"
#include "context_owned.h"
#include "graph.h"
#include "service/service.h"
#include "types/vector.h"

extern "C" {
#include "access/tableam.h"
#include "access/xloginsert.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "pgstat.h"
#include "utils/backend_progress.h"
#include "utils/memutils.h"
}

namespace {

// The graph lives on the C++ heap; the build's memory context owns it
// (context_owned.h), so an ERROR anywhere frees it.
using GraphHolder = ContextOwned<gknn::graph::Graph>;

struct BuildState {
  Relation index;
  int dim;  // 0 until known (the column's typmod, or the first vector)
  int degree;
  MemoryContext tmp;
  MemoryContext keep;  // where the arrays below live
  float* vectors;
  ItemPointerData* tids;
  int64 n;
  int64 cap;
  ItemPointerData* null_tids;
  int64 nnull;
  int64 null_cap;
};

// Grows a huge array of `elem` bytes per entry to hold one more.
void* grow(MemoryContext cxt, void* p, int64* cap, int64 used, Size elem) {
  if (used < *cap) return p;
  int64 next = Max(*cap * 2, int64{1024});
  if (next >= static_cast<int64>(kGraphNoNode))
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("gpu_graph indexes fewer than %u rows", kGraphNoNode)));
  *cap = next;
  Size bytes = static_cast<Size>(next) * elem;
  return p == nullptr ? MemoryContextAllocHuge(cxt, bytes) : repalloc_huge(p, bytes);
}

void build_callback(Relation, ItemPointer tid, Datum* values, bool* isnull, bool, void* state) {
  auto* st = static_cast<BuildState*>(state);
  if (isnull[0]) {
    st->null_tids = static_cast<ItemPointerData*>(
        grow(st->keep, st->null_tids, &st->null_cap, st->nnull, sizeof(ItemPointerData)));
    st->null_tids[st->nnull++] = *tid;
    return;
  }
  MemoryContext old = MemoryContextSwitchTo(st->tmp);
  const Vector* v = DatumGetVector(values[0]);
  if (st->dim == 0) {
    graph_check_dim(v->dim, st->degree);
    st->dim = v->dim;
  }
  if (v->dim != st->dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("gpu_graph: expected %d dimensions, not %d", st->dim, v->dim),
                    errdetail("All vectors of a gpu_graph index have the same dimension.")));
  if (st->n == st->cap) {
    int64 cap = st->cap;
    st->tids = static_cast<ItemPointerData*>(grow(st->keep, st->tids, &cap, st->n, sizeof(ItemPointerData)));
    st->vectors = static_cast<float*>(grow(st->keep, st->vectors, &st->cap, st->n, sizeof(float) * st->dim));
  }
  memcpy(st->vectors + st->n * st->dim, v->x, sizeof(float) * st->dim);
  st->tids[st->n++] = *tid;
  MemoryContextSwitchTo(old);
  MemoryContextReset(st->tmp);
  if ((st->n & 1023) == 0) {
    pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, st->n + st->nnull);
    CHECK_FOR_INTERRUPTS();
  }
}

bool build_progress(const char* phase, std::int64_t done, std::int64_t total) {
  // Shared-memory counters only: nothing here can raise an error.
  build_progress_report(strcmp(phase, gknn::graph::kPhaseKnn) == 0 ? kGraphPhaseKnn : kGraphPhaseOptimize,
                        total, done);
  return !ivfpq_interrupt_pending();
}

// The service's progress reports, shown as this backend's own (the wait
// serves interrupts itself).
void service_progress(int phase, int64 done, int64 total) {
  build_progress_report(phase == kServiceGraphPhaseKnn ? kGraphPhaseKnn : kGraphPhaseOptimize, total, done);
}

// The graph over the n vectors, into holder->object. The one place that decides
// where a build runs: the service when `use_service` (and it stays), else
// this backend's CPU.
void build_graph(const BuildState& st, const gknn::graph::BuildParams& p, bool use_service,
                 GraphHolder* holder) {
  const float* vectors = st.vectors;
  const int64 n = st.n;
  gknn_pg::core_call([&] {
    gknn::graph::validate(p);
    holder->object = new gknn::graph::Graph();
  });
  bool built =
      use_service && n > 0 && gknn_service_build_graph(p, vectors, n, service_progress, holder->object);
  if (built)
    gknn_pg::core_call([&] { gknn::graph::validate(*holder->object); });
  else
    ivfpq_core_call_cancellable([&] {
      *holder->object = gknn::graph::build_cpu(vectors, n, p, build_progress);
      gknn::graph::validate(*holder->object);  // what the pages will hold: ids in range, rows well formed
    });
  const gknn::graph::Graph* g = holder->object;
  if (g->n != n || g->degree != p.degree || g->edges.size() != static_cast<size_t>(n) * p.degree)
    elog(ERROR, "gpu_graph: the core built a graph of an unexpected shape");
}

// The node nearest (L2) to the vectors' mean: the metapage's entry node.
uint32 central_node(const float* vectors, int64 n, int dim) {
  if (n == 0) return kGraphNoNode;
  double* mean = static_cast<double*>(palloc0(sizeof(double) * dim));
  for (int64 i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j) mean[j] += vectors[i * dim + j];
  float* c = static_cast<float*>(palloc(sizeof(float) * dim));
  for (int j = 0; j < dim; ++j) c[j] = static_cast<float>(mean[j] / n);
  uint32 best = 0;
  double best_d = 0;
  for (int64 i = 0; i < n; ++i) {
    double d = gknn::distance(gknn::Metric::L2, vectors + i * dim, c, dim);
    if (i == 0 || d < best_d) {
      best = static_cast<uint32>(i);
      best_d = d;
    }
  }
  pfree(mean);
  pfree(c);
  return best;
}

// Appends a page image at the end of the index.
// Node pages: the vectors' nodes with their graph rows, then the NULLs.
void write_nodes(Relation index, const GraphMeta& meta, const BuildState& st, const gknn::graph::Graph* g) {
  Page page = static_cast<Page>(palloc(BLCKSZ));
  // The core's entries (ascending node ids) become flags of their nodes.
  size_t next_entry = 0;
  const int64 total = st.n + st.nnull;
  for (int64 first = 0; first < total; first += meta.nodes_per_page) {
    graph_init_page(page, kGraphPageNodes);
    int64 count = Min(total - first, static_cast<int64>(meta.nodes_per_page));
    memset(PageGetContents(page), 0, count * meta.node_bytes);
    for (int64 node = first; node < first + count; ++node) {
      char* slot = graph_slot(page, meta, node);
      uint32* adj = graph_slot_adjacency(slot, meta);
      if (node < st.n) {
        *graph_slot_tid(slot) = st.tids[node];
        memcpy(graph_slot_vector(slot), st.vectors + node * st.dim, sizeof(float) * st.dim);
        memcpy(adj, g->row(node), sizeof(uint32) * meta.degree);
        if (next_entry < g->entries.size() && g->entries[next_entry] == node) {
          graph_slot_set_flags(slot, kGraphNodeEntry);
          ++next_entry;
        }
      } else {
        *graph_slot_tid(slot) = st.null_tids[node - st.n];
        graph_slot_set_flags(slot, kGraphNodeNull);
        for (int j = 0; j < meta.degree; ++j) adj[j] = kGraphNoNode;
      }
    }
    graph_set_contents_size(page, count * meta.node_bytes);
    index_build_append_page(index, page);
    pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, first + count);
    CHECK_FOR_INTERRUPTS();
  }
  pfree(page);
}

int typmod_dim(Relation index) {
  int32 typmod = TupleDescAttr(RelationGetDescr(index), 0)->atttypmod;
  return typmod > 0 ? typmod : 0;
}

GraphMeta new_meta(int dim, int metric, const GraphOptions& o) {
  GraphMeta meta;
  memset(&meta, 0, sizeof(meta));  // padding included: the metapage is written whole
  meta.magic = kGraphMagic;
  meta.version = kGraphVersion;
  meta.dim = dim;
  meta.metric = metric;
  meta.degree = o.degree;
  meta.intermediate_degree = o.intermediate_degree;
  meta.seed = kGraphSeed;
  meta.generation = 1;
  meta.entry = kGraphNoNode;
  meta.node_bytes = static_cast<uint32>(graph_node_bytes(dim, o.degree));
  meta.nodes_per_page = graph_nodes_per_page(dim, o.degree);
  return meta;
}

}  // namespace

IndexBuildResult* graph_build(Relation heap, Relation index, IndexInfo* info) {
  index_build_begin(index);
  GraphOptions opt = graph_get_options(index);
  graph_check_options(opt);
  // Decided once, before the rows are read: gknn.device = gpu without a
  // GPU service is an ERROR (55000) saying why.
  const bool use_service = gknn_service_route().use_service;
  gknn::Metric metric = graph_index_metric(index);

  BuildState st{};
  st.index = index;
  st.degree = opt.degree;
  st.dim = typmod_dim(index);
  if (st.dim > 0) graph_check_dim(st.dim, opt.degree);
  st.keep = CurrentMemoryContext;
  st.tmp = AllocSetContextCreate(CurrentMemoryContext, "gpu_graph build", ALLOCSET_DEFAULT_SIZES);

  // 1. Every row's vector.
  pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, kGraphPhaseLoad);
  table_index_build_scan(heap, index, info, false, true, build_callback, &st, nullptr);
  if (st.dim == 0)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("gpu_graph index \"%s\" needs the vectors' dimension", RelationGetRelationName(index)),
             errdetail("The column has no dimension (vector(n)) and the table no vector."),
             errhint("Declare the column as vector(n), or build the index once the table has rows.")));

  // 2. The graph.
  GraphHolder* holder = context_owned_new<gknn::graph::Graph>();
  gknn::graph::BuildParams p;
  p.dim = st.dim;
  p.metric = metric;
  p.degree = opt.degree;
  p.intermediate_degree = opt.intermediate_degree;
  p.seed = kGraphSeed;
  pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, kGraphPhaseKnn);
  build_graph(st, p, use_service, holder);
  CHECK_FOR_INTERRUPTS();

  // 3. Pages: the metapage (block 0) last, once everything is known.
  GraphMeta meta = new_meta(st.dim, static_cast<int>(metric), opt);
  meta.nodes = st.n + st.nnull;
  meta.nulls = st.nnull;
  meta.build_rows = st.n;
  meta.entry = central_node(st.vectors, st.n, st.dim);
  Page page = static_cast<Page>(palloc0(BLCKSZ));
  graph_init_meta_page(page, new_meta(st.dim, static_cast<int>(metric), opt));
  index_build_append_page(index, page);
  pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, kGraphPhaseWrite);
  pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, meta.nodes);
  write_nodes(index, meta, st, holder->object);
  graph_init_meta_page(page, meta);
  index_build_overwrite_page(index, kGraphMetaBlock, page);
  context_owned_free<gknn::graph::Graph>(holder);

  // 4. WAL: every page as a full image, once.
  MemoryContextDelete(st.tmp);
  return index_build_finish(index, kGraphPhaseWal, static_cast<double>(st.n + st.nnull),
                            static_cast<double>(st.n + st.nnull));
}

// Unlogged indexes: the init fork holds an index of no nodes with the main
// fork's parameters (ambuild has just written them).
void graph_buildempty(Relation index) {
  GraphMeta built;
  graph_read_meta(index, &built);
  GraphOptions o{};
  o.degree = built.degree;  // as built (ALTER INDEX ... SET changes rd_options only)
  o.intermediate_degree = built.intermediate_degree;
  GraphMeta meta = new_meta(built.dim, built.metric, o);
  Buffer buf = ReadBufferExtended(index, INIT_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  START_CRIT_SECTION();
  graph_init_meta_page(BufferGetPage(buf), meta);
  MarkBufferDirty(buf);
  log_newpage_buffer(buf, true);
  END_CRIT_SECTION();
  UnlockReleaseBuffer(buf);
}
