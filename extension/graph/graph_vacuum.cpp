// gpu_graph VACUUM.
//
// ambulkdelete, in two passes:
//   1. Mark: every node whose heap TID is dead gets the dead flag (page by
//      page, each page rewritten under the metapage's exclusive lock with the
//      generation bumped in the same Generic WAL record). From then on no
//      image has the node, so no scan returns its TID (which the heap may
//      give to a new row once VACUUM is done).
//   2. Repair (when pass 1 marked nodes): under the metapage's exclusive lock
//      for the whole pass (inserts and image loads wait), every node's row
//      and vector is read, the core repairs every row that points to a dead
//      node (gknn::graph::repair_deleted: the neighbours of the deleted
//      neighbours as candidates, pruned by the build's rule), links parts
//      that lost their way in, recomputes the entries (node flags) and
//      clears the dead nodes' rows, and the rows that changed are written back, a few
//      pages a Generic WAL record, the first with the generation bumped.
// Dead nodes keep their numbers and slots (the index does not shrink;
// REINDEX compacts it).
#include <cstring>

#include "context_owned.h"
#include "graph.h"

extern "C" {
#include "access/generic_xlog.h"
#include "commands/vacuum.h"
#include "utils/memutils.h"
}

namespace {

// The graph of every node, owned by a memory context (an ERROR frees it).
using GraphHolder = ContextOwned<gknn::graph::Graph>;

// Pass 1 on one page: marks the nodes whose TIDs the callback calls dead.
int64 mark_page(Relation index, BlockNumber blk, BufferAccessStrategy strategy,
                IndexBulkDeleteCallback callback, void* state, int64* remaining) {
  GraphMeta meta;
  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
  int64 marked = 0;
  if (blk < kGraphFirstNodeBlock + graph_node_pages(meta, meta.nodes)) {
    Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, blk, RBM_NORMAL, strategy);
    LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
    Page page = BufferGetPage(buf);
    graph_check_node_page(index, meta, blk, page);
    const uint32 count = graph_nodes_on_page(meta, blk, meta.nodes);
    const uint64 first = uint64{blk - kGraphFirstNodeBlock} * meta.nodes_per_page;
    bool* dead = static_cast<bool*>(palloc0(sizeof(bool) * Max(count, 1u)));
    for (uint32 i = 0; i < count; ++i) {
      char* slot = graph_slot(page, meta, first + i);
      if (graph_slot_flags(slot) & kGraphNodeDead) continue;
      dead[i] = callback(graph_slot_tid(slot), state);
      if (dead[i])
        ++marked;
      else
        ++*remaining;
    }
    if (marked > 0) {
      GenericXLogState* xs = GenericXLogStart(index);
      Page mpage = GenericXLogRegisterBuffer(xs, mbuf, 0);
      Page wpage = GenericXLogRegisterBuffer(xs, buf, 0);
      int64 nulls = 0;
      for (uint32 i = 0; i < count; ++i) {
        if (!dead[i]) continue;
        char* slot = graph_slot(wpage, meta, first + i);
        uint16 flags = graph_slot_flags(slot);
        if (flags & kGraphNodeNull) ++nulls;
        graph_slot_set_flags(slot, kGraphNodeDead);  // no longer a NULL row either
      }
      GraphMeta* wmeta = graph_meta(mpage);
      wmeta->dead += marked;
      wmeta->nulls -= nulls;
      wmeta->generation++;
      GenericXLogFinish(xs);
    }
    pfree(dead);
    UnlockReleaseBuffer(buf);
  }
  UnlockReleaseBuffer(mbuf);
  return marked;
}

// Pass 2: reads every node into memory (the caller holds the metapage's
// exclusive lock): vectors (zeros for NULL and dead nodes), rows, and the
// deleted flags the core repairs around (dead and NULL nodes).
void read_all(Relation index, const GraphMeta& meta, BufferAccessStrategy strategy, float* vectors,
              uint8* deleted, bool* entry, gknn::graph::Graph* g) {
  graph_for_each_node(index, meta, strategy, vacuum_delay_point, [&](uint64 node, char* slot) {
    const uint16 flags = graph_slot_flags(slot);
    deleted[node] = (flags & (kGraphNodeDead | kGraphNodeNull)) ? 1 : 0;
    entry[node] = !deleted[node] && (flags & kGraphNodeEntry);
    memcpy(vectors + node * meta.dim, graph_slot_vector(slot), sizeof(float) * meta.dim);
    memcpy(g->row(node), graph_slot_adjacency(slot, meta), sizeof(uint32) * meta.degree);
  });
}

// Writes the rows (and entry flags) of `changed` nodes back, a few pages a
// record.
void write_back(Relation index, Buffer mbuf, const GraphMeta& meta, const gknn::graph::Graph* g,
                const bool* changed, const bool* entry, BufferAccessStrategy strategy) {
  const uint32 pages = graph_node_pages(meta, meta.nodes);
  bool bumped = false;
  uint32 p = 0;
  while (p < pages) {
    GenericXLogState* xs = nullptr;
    Buffer held[MAX_GENERIC_XLOG_PAGES];
    int used = 0;
    if (!bumped) {
      xs = GenericXLogStart(index);
      graph_meta(GenericXLogRegisterBuffer(xs, mbuf, 0))->generation++;
      bumped = true;
      held[used++] = InvalidBuffer;  // the metapage's place in the record
    }
    for (; p < pages && used < MAX_GENERIC_XLOG_PAGES; ++p) {
      const uint32 count = graph_nodes_on_page(meta, kGraphFirstNodeBlock + p, meta.nodes);
      const uint64 first = uint64{p} * meta.nodes_per_page;
      bool any = false;
      for (uint32 i = 0; i < count && !any; ++i) any = changed[first + i];
      if (!any) continue;
      Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, kGraphFirstNodeBlock + p, RBM_NORMAL, strategy);
      LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
      if (xs == nullptr) xs = GenericXLogStart(index);
      Page page = GenericXLogRegisterBuffer(xs, buf, 0);
      for (uint32 i = 0; i < count; ++i) {
        if (!changed[first + i]) continue;
        char* slot = graph_slot(page, meta, first + i);
        memcpy(graph_slot_adjacency(slot, meta), g->row(first + i), sizeof(uint32) * meta.degree);
        const uint16 flags = graph_slot_flags(slot) & ~kGraphNodeEntry;
        graph_slot_set_flags(slot, entry[first + i] ? flags | kGraphNodeEntry : flags);
      }
      held[used++] = buf;
    }
    if (xs != nullptr) GenericXLogFinish(xs);
    for (int i = 0; i < used; ++i)
      if (BufferIsValid(held[i])) UnlockReleaseBuffer(held[i]);
    vacuum_delay_point();
  }
}

void repair(Relation index, BufferAccessStrategy strategy) {
  GraphMeta meta;
  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
  const int64 n = meta.nodes;
  float* vectors = static_cast<float*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(n, int64{1}) * meta.dim));
  uint8* deleted = static_cast<uint8*>(palloc0(Max(n, int64{1})));
  bool* changed = static_cast<bool*>(palloc0(sizeof(bool) * Max(n, int64{1})));
  bool* entry = static_cast<bool*>(palloc0(sizeof(bool) * Max(n, int64{1})));
  bool* entry_after = static_cast<bool*>(palloc0(sizeof(bool) * Max(n, int64{1})));
  uint32* before = static_cast<uint32*>(
      MemoryContextAllocHuge(CurrentMemoryContext, sizeof(uint32) * Max(n, int64{1}) * meta.degree));
  GraphHolder* holder = context_owned_new<gknn::graph::Graph>();
  const int degree = meta.degree;
  gknn_pg::core_call([&] {
    holder->object = new gknn::graph::Graph();
    holder->object->n = n;
    holder->object->degree = degree;
    holder->object->edges.resize(static_cast<size_t>(n) * degree);
  });
  gknn::graph::Graph* g = holder->object;
  read_all(index, meta, strategy, vectors, deleted, entry, g);
  memcpy(before, g->edges.data(), sizeof(uint32) * n * degree);
  const int dim = meta.dim;
  const auto metric = static_cast<gknn::Metric>(meta.metric);
  gknn_pg::core_call([&] {
    for (int64 i = 0; i < n; ++i)
      if (entry[i]) g->entries.push_back(static_cast<uint32>(i));  // ascending
    gknn::graph::repair_deleted(*g, vectors, dim, metric, deleted);
    for (uint32 e : g->entries)
      if (static_cast<int64>(e) < n) entry_after[e] = true;
  });
  for (int64 i = 0; i < n; ++i)
    changed[i] =
        memcmp(before + i * degree, g->row(i), sizeof(uint32) * degree) != 0 || entry[i] != entry_after[i];
  write_back(index, mbuf, meta, g, changed, entry_after, strategy);
  UnlockReleaseBuffer(mbuf);
  context_owned_free<gknn::graph::Graph>(holder);
}

}  // namespace

IndexBulkDeleteResult* graph_bulkdelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                        IndexBulkDeleteCallback callback, void* callback_state) {
  Relation index = info->index;
  if (stats == nullptr) stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
  GraphMeta meta;
  graph_read_meta(index, &meta);
  // Nodes added after this point are new rows, not dead ones: the pages of
  // the nodes that exist now are enough.
  const uint32 pages = graph_node_pages(meta, meta.nodes);
  int64 marked = 0, remaining = 0;
  for (uint32 p = 0; p < pages; ++p) {
    vacuum_delay_point();
    marked +=
        mark_page(index, kGraphFirstNodeBlock + p, info->strategy, callback, callback_state, &remaining);
  }
  if (marked > 0) repair(index, info->strategy);
  stats->tuples_removed += marked;
  stats->num_index_tuples = remaining;
  stats->num_pages = RelationGetNumberOfBlocks(index);
  stats->estimated_count = false;
  return stats;
}

IndexBulkDeleteResult* graph_vacuumcleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats) {
  if (info->analyze_only) return stats;
  Relation index = info->index;
  if (stats == nullptr) {
    // No bulk delete ran: the live and NULL nodes, from the metapage.
    stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
    GraphMeta meta;
    graph_read_meta(index, &meta);
    stats->num_index_tuples = static_cast<double>(meta.nodes - meta.dead);
  }
  stats->num_pages = RelationGetNumberOfBlocks(index);
  stats->estimated_count = false;
  return stats;
}
