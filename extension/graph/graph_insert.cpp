// gpu_graph aminsert: the new row becomes node N = the metapage's node count.
//
//   1. Its candidates: a graph search from its vector in this backend's image
//      (intermediate-degree rows, candidate list max(that, ef_search)),
//      ordered (order_candidates) and pruned to `degree` by the core's rule
//      (prune_list, the build's own), with the candidates' rows as the image
//      has them.
//   2. Under the metapage's exclusive lock (inserts and VACUUM are
//      serialised; scans load images under its share lock, so they see an
//      insert whole or not at all): the candidates VACUUM has marked dead
//      since the image was read are dropped, the node is written, then each
//      neighbour's current row is read from its page and the reverse edge
//      added (add_reverse_edge, forced on the nearest neighbour when no list
//      took the node, so it has an in-edge).
//   3. WAL: Generic WAL, up to MAX_GENERIC_XLOG_PAGES pages a record: the
//      metapage (node count, generation) with the node's page first, then
//      the neighbours' pages. A crash between them leaves a node with fewer
//      in-edges, never an edge to a node that does not exist.
// This backend's image is brought to the new generation in place.
#include <cstring>

#include "graph.h"
#include "types/vector.h"

extern "C" {
#include "access/generic_xlog.h"
#include "utils/memutils.h"
}

namespace {

// Pages this insert holds exclusively locked, by block.
struct Locked {
  BlockNumber blk;
  Buffer buf;
  bool changed;
};

struct InsertState {
  Relation index;
  GraphMeta meta;  // as locked
  const GraphImage* image;
  Locked* pages;
  int npages;
  int cap;
};

Locked* find_locked(InsertState* st, BlockNumber blk) {
  for (int i = 0; i < st->npages; ++i)
    if (st->pages[i].blk == blk) return &st->pages[i];
  return nullptr;
}

// Node page `blk`, exclusively locked and checked (locked once per insert).
Locked* lock_page(InsertState* st, BlockNumber blk) {
  if (Locked* l = find_locked(st, blk)) return l;
  if (st->npages == st->cap) {
    st->cap *= 2;
    st->pages = static_cast<Locked*>(repalloc(st->pages, sizeof(Locked) * st->cap));
  }
  Buffer buf = ReadBuffer(st->index, blk);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  Locked* l = &st->pages[st->npages++];
  l->blk = blk;
  l->buf = buf;
  l->changed = false;
  graph_check_node_page(st->index, st->meta, blk, BufferGetPage(buf));
  return l;
}

// The slot of an existing node (its page locked).
char* node_slot(InsertState* st, uint32 node) {
  Locked* l = lock_page(st, graph_node_block(node, st->meta.nodes_per_page));
  return graph_slot(BufferGetPage(l->buf), st->meta, node);
}

// The vector of an existing node: from the image where it has the node,
// else from its page (vectors never change once written).
const float* node_vector(InsertState* st, uint32 node) {
  const GraphImage* im = st->image;
  if (static_cast<int64>(node) < im->meta.nodes && im->node_row[node] != kGraphNoNode)
    return im->vectors + static_cast<int64>(im->node_row[node]) * st->meta.dim;
  return graph_slot_vector(node_slot(st, node));
}

double dist(const InsertState* st, const float* a, const float* b) {
  return gknn::distance(static_cast<gknn::Metric>(st->meta.metric), a, b, st->meta.dim);
}

// 1. The new node's row (node numbers, kNoNode-padded), from the image.
void choose_neighbours(const GraphImage* im, const float* v, uint32* row) {
  const GraphMeta& meta = im->meta;
  const int degree = meta.degree;
  for (int j = 0; j < degree; ++j) row[j] = kGraphNoNode;
  if (im->rows == 0) return;
  int m = meta.intermediate_degree > 0 ? meta.intermediate_degree : 2 * degree;
  m = static_cast<int>(Min(static_cast<int64>(m), im->rows));
  int64* ids = static_cast<int64*>(palloc(sizeof(int64) * m));
  double* d = static_cast<double*>(palloc(sizeof(double) * m));
  uint32* cand = static_cast<uint32*>(palloc(sizeof(uint32) * m));
  uint32* rows = static_cast<uint32*>(palloc(sizeof(uint32) * m * degree));
  gknn::graph::SearchParams sp;
  sp.k = m;
  sp.ef = Max(m, gknn_graph_ef_search);
  sp.seed = meta.seed;
  sp.width = gknn::graph::kInsertWidth;  // as insert_node: the query default must not move the edges
  const auto metric = static_cast<gknn::Metric>(meta.metric);
  int n = 0;
  gknn_pg::core_call([&] {
    gknn::graph::search_cpu(*im->graph, im->vectors, meta.dim, metric, v, 1, sp, ids, d);
    // Rows and node numbers: candidates in node numbers, their rows too.
    for (int i = 0; i < m && ids[i] >= 0 && ids[i] < im->rows; ++i) {
      cand[n] = im->row_node[ids[i]];
      d[n] = d[i];
      ++n;
    }
    n = gknn::graph::order_candidates(gknn::graph::kNoNode, cand, d, n);
    for (int i = 0; i < n; ++i) {
      const uint32* r = im->graph->row(im->node_row[cand[i]]);
      for (int j = 0; j < degree; ++j)
        rows[i * degree + j] = r[j] == kGraphNoNode ? r[j] : im->row_node[r[j]];
    }
    gknn::graph::prune_list(cand, n, rows, degree, degree, row);
  });
}

// Drops entries that are dead now (VACUUM since the image), keeping order.
void drop_dead(InsertState* st, uint32* row) {
  int kept = 0;
  for (int j = 0; j < st->meta.degree; ++j) {
    if (row[j] == kGraphNoNode || static_cast<int64>(row[j]) >= st->meta.nodes) continue;
    if (graph_slot_flags(node_slot(st, row[j])) & (kGraphNodeDead | kGraphNodeNull)) continue;
    row[kept++] = row[j];
  }
  for (int j = kept; j < st->meta.degree; ++j) row[j] = kGraphNoNode;
}

// The reverse edge owner -> x in owner's current row (page locked); true
// when the row changed (written to new_row).
bool reverse_edge(InsertState* st, uint32 owner, uint32 x, const float* xv, const uint32* x_row, bool force,
                  uint32* new_row) {
  const int degree = st->meta.degree;
  char* slot = node_slot(st, owner);
  if (graph_slot_flags(slot) & (kGraphNodeDead | kGraphNodeNull)) return false;
  memcpy(new_row, graph_slot_adjacency(slot, st->meta), sizeof(uint32) * degree);
  const float* ov = graph_slot_vector(slot);
  double row_d[kGraphMaxDegree];
  for (int j = 0; j < degree && new_row[j] != kGraphNoNode; ++j)
    row_d[j] = dist(st, ov, node_vector(st, new_row[j]));
  double xd = dist(st, ov, xv);
  bool changed = false;
  gknn_pg::core_call([&] {
    changed = gknn::graph::add_reverse_edge(new_row, row_d, degree, owner, x, xd, x_row, degree, force);
  });
  return changed;
}

// The page of new node `node`: an existing block (a node page with room,
// or one a crashed insert left past the last node), or a new one.
Buffer node_page_buffer(Relation index, BlockNumber blk, bool* fresh) {
  *fresh = false;
  if (blk < RelationGetNumberOfBlocks(index)) {
    Buffer buf = ReadBuffer(index, blk);
    LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
    return buf;
  }
  for (;;) {
    Buffer buf = graph_new_buffer(index);
    if (BufferGetBlockNumber(buf) == blk) {
      *fresh = true;
      return buf;
    }
    // A block below it (extended by an insert that failed): a node page of
    // no nodes, so that the index has no uninitialised pages.
    GenericXLogState* xs = GenericXLogStart(index);
    graph_init_page(GenericXLogRegisterBuffer(xs, buf, GENERIC_XLOG_FULL_IMAGE), kGraphPageNodes);
    GenericXLogFinish(xs);
    UnlockReleaseBuffer(buf);
  }
}

// Writes node N (the metapage's node count) with the metapage, one record.
void write_node(InsertState* st, Buffer mbuf, const ItemPointerData* tid, const float* v, const uint32* row) {
  const GraphMeta& meta = st->meta;
  const uint32 node = static_cast<uint32>(meta.nodes);
  const BlockNumber blk = graph_node_block(node, meta.nodes_per_page);
  bool fresh;
  Buffer buf = node_page_buffer(st->index, blk, &fresh);
  // A page first used here (or left past the last node by a crash) starts
  // over; one with nodes is checked before anything is written to it.
  const bool init = fresh || node % meta.nodes_per_page == 0;
  if (!init) graph_check_node_page(st->index, meta, blk, BufferGetPage(buf));
  GenericXLogState* xs = GenericXLogStart(st->index);
  Page mpage = GenericXLogRegisterBuffer(xs, mbuf, 0);
  Page page = GenericXLogRegisterBuffer(xs, buf, init ? GENERIC_XLOG_FULL_IMAGE : 0);
  if (init) graph_init_page(page, kGraphPageNodes);
  char* slot = graph_slot(page, meta, node);
  memset(slot, 0, meta.node_bytes);
  *graph_slot_tid(slot) = *tid;
  uint32* adj = graph_slot_adjacency(slot, meta);
  if (v != nullptr) {
    memcpy(graph_slot_vector(slot), v, sizeof(float) * meta.dim);
    memcpy(adj, row, sizeof(uint32) * meta.degree);
  } else {
    graph_slot_set_flags(slot, kGraphNodeNull);
    for (int j = 0; j < meta.degree; ++j) adj[j] = kGraphNoNode;
  }
  graph_set_contents_size(page, (node % meta.nodes_per_page + 1) * meta.node_bytes);
  GraphMeta* wmeta = graph_meta(mpage);
  wmeta->nodes = node + 1;
  if (v == nullptr) wmeta->nulls++;
  if (v != nullptr && wmeta->entry == kGraphNoNode) wmeta->entry = node;
  wmeta->generation++;
  GenericXLogFinish(xs);
  UnlockReleaseBuffer(buf);
}

// Writes the changed rows into their locked pages, a few pages a record.
void write_rows(InsertState* st, const uint32* nodes, const uint32* rows, int n) {
  const int degree = st->meta.degree;
  for (int i = 0; i < n;) {
    GenericXLogState* xs = GenericXLogStart(st->index);
    Locked* in_record[MAX_GENERIC_XLOG_PAGES];
    Page images[MAX_GENERIC_XLOG_PAGES];
    int used = 0;
    for (; i < n; ++i) {
      Locked* l = find_locked(st, graph_node_block(nodes[i], st->meta.nodes_per_page));
      int at = 0;
      while (at < used && in_record[at] != l) ++at;
      if (at == used) {
        if (used == MAX_GENERIC_XLOG_PAGES) break;
        in_record[used] = l;
        images[used] = GenericXLogRegisterBuffer(xs, l->buf, 0);
        ++used;
      }
      memcpy(graph_slot_adjacency(graph_slot(images[at], st->meta, nodes[i]), st->meta), rows + i * degree,
             sizeof(uint32) * degree);
    }
    GenericXLogFinish(xs);
  }
}

void insert_vector(Relation index, const ItemPointerData* tid, const float* v, int dim) {
  InsertState st{};
  st.index = index;
  st.image = graph_image_get(index);
  if (dim != st.image->meta.dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("gpu_graph: expected %d dimensions, not %d", st.image->meta.dim, dim),
                    errdetail("All vectors of a gpu_graph index have the same dimension.")));
  const int degree = st.image->meta.degree;
  uint32* row = static_cast<uint32*>(palloc(sizeof(uint32) * degree));
  choose_neighbours(st.image, v, row);

  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_EXCLUSIVE, &st.meta);
  if (st.meta.nodes + 1 >= static_cast<int64>(kGraphNoNode))
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("gpu_graph index \"%s\" has no node numbers left", RelationGetRelationName(index)),
                    errhint("REINDEX the index.")));
  st.cap = degree + 2;
  st.pages = static_cast<Locked*>(palloc(sizeof(Locked) * st.cap));
  drop_dead(&st, row);
  const uint64 before = st.meta.generation;
  const uint32 x = static_cast<uint32>(st.meta.nodes);

  // Reverse edges, computed against the current rows before anything is
  // written (the new node's page may be one of the neighbours').
  uint32* changed_nodes = static_cast<uint32*>(palloc(sizeof(uint32) * (degree + 1)));
  uint32* changed_rows = static_cast<uint32*>(palloc(sizeof(uint32) * (degree + 1) * degree));
  int nchanged = 0;
  for (int j = 0; j < degree && row[j] != kGraphNoNode; ++j)
    if (reverse_edge(&st, row[j], x, v, row, false, changed_rows + nchanged * degree))
      changed_nodes[nchanged++] = row[j];
  if (nchanged == 0 && row[0] != kGraphNoNode &&
      reverse_edge(&st, row[0], x, v, row, true, changed_rows + nchanged * degree))
    changed_nodes[nchanged++] = row[0];

  // The node's page is already locked here when a node read above lives on it.
  const BlockNumber nblk = graph_node_block(x, st.meta.nodes_per_page);
  if (Locked* l = find_locked(&st, nblk)) {
    // Same page as a neighbour: write the node through that buffer.
    GenericXLogState* xs = GenericXLogStart(index);
    Page mpage = GenericXLogRegisterBuffer(xs, mbuf, 0);
    Page page = GenericXLogRegisterBuffer(xs, l->buf, 0);
    char* slot = graph_slot(page, st.meta, x);
    memset(slot, 0, st.meta.node_bytes);
    *graph_slot_tid(slot) = *tid;
    memcpy(graph_slot_vector(slot), v, sizeof(float) * dim);
    memcpy(graph_slot_adjacency(slot, st.meta), row, sizeof(uint32) * degree);
    graph_set_contents_size(page, (x % st.meta.nodes_per_page + 1) * st.meta.node_bytes);
    GraphMeta* wmeta = graph_meta(mpage);
    wmeta->nodes = x + 1;
    if (wmeta->entry == kGraphNoNode) wmeta->entry = x;
    wmeta->generation++;
    GenericXLogFinish(xs);
  } else {
    write_node(&st, mbuf, tid, v, row);
  }
  write_rows(&st, changed_nodes, changed_rows, nchanged);
  for (int i = 0; i < st.npages; ++i) UnlockReleaseBuffer(st.pages[i].buf);
  UnlockReleaseBuffer(mbuf);

  GraphInsertChange c{};
  c.generation_before = before;
  c.generation_after = before + 1;
  c.node = x;
  c.id = heap_tid_to_id(tid);
  c.vector = v;
  c.adjacency = row;
  c.nchanged = nchanged;
  c.changed_nodes = changed_nodes;
  c.changed_lists = changed_rows;
  graph_image_apply_insert(index, c);
}

void insert_null(Relation index, const ItemPointerData* tid) {
  InsertState st{};
  st.index = index;
  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_EXCLUSIVE, &st.meta);
  if (st.meta.nodes + 1 >= static_cast<int64>(kGraphNoNode))
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("gpu_graph index \"%s\" has no node numbers left", RelationGetRelationName(index)),
                    errhint("REINDEX the index.")));
  const uint64 before = st.meta.generation;
  const uint32 x = static_cast<uint32>(st.meta.nodes);
  write_node(&st, mbuf, tid, nullptr, nullptr);
  UnlockReleaseBuffer(mbuf);
  GraphInsertChange c{};
  c.generation_before = before;
  c.generation_after = before + 1;
  c.node = x;
  c.id = heap_tid_to_id(tid);
  graph_image_apply_insert(index, c);
}

}  // namespace

bool graph_insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation,
                  IndexUniqueCheck, bool, IndexInfo*) {
  MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "gpu_graph insert", ALLOCSET_DEFAULT_SIZES);
  MemoryContext old = MemoryContextSwitchTo(tmp);
  if (isnull[0]) {
    insert_null(index, heap_tid);
  } else {
    const Vector* v = DatumGetVector(values[0]);
    insert_vector(index, heap_tid, v->x, v->dim);
  }
  MemoryContextSwitchTo(old);
  MemoryContextDelete(tmp);
  return false;
}
