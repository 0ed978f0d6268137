// gpu_graph: per-backend cache of searchable images, keyed by index oid,
// relfilenode and the metapage's generation. An image is the graph over the
// live nodes with a vector (rows, renumbered densely in node order; edges to
// NULL and dead nodes dropped, the rest kept in their order), the vectors,
// each row's heap TID and node number, and the NULL nodes' TIDs.
//
// The graph's entries are the rows of the nodes flagged as entries.
//
// A load holds the metapage's share lock from start to end; inserts and
// VACUUM change node pages only under its exclusive lock, so an image is one
// consistent state of the index. An insert made by this backend brings its
// own image to the new generation in place (graph_image_apply_insert), so a
// session inserting many rows does not read the index again for each; a
// change made by another backend makes the next scan read it whole.
//
// Images live on the C++ heap, owned by this file's static slots (never by a
// stack frame): every container is sized inside core_call before pages are
// read, the page reads then only write through raw pointers, and an ERROR
// while a slot is being filled leaves it invalid, freed at its next use.
#include <cstring>
#include <vector>

#include "graph.h"

namespace {

struct ImageData {
  gknn::graph::Graph graph;
  std::vector<float> vectors;
  std::vector<int64> ids;
  std::vector<uint32> row_node;
  std::vector<uint32> node_row;  // per node: its row, or kGraphNoNode
  std::vector<int64> nulls;
};

constexpr int kSlots = 4;

struct ImageSlot {
  bool valid;
  Oid oid;
  RelFileNode node;
  uint64 generation;
  uint64 used;
  ImageData* data;
  GraphImage image;
};

ImageSlot slots[kSlots];
uint64 clock_tick = 0;

void free_slot(ImageSlot* s) {
  s->valid = false;
  ImageData* d = s->data;
  s->data = nullptr;
  gknn_pg::core_call([&] { delete d; });
}

ImageSlot* pick_slot(Oid oid) {
  ImageSlot* victim = &slots[0];
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].oid == oid) return &slots[i];
    if (slots[i].used < victim->used) victim = &slots[i];
  }
  return victim;
}

void publish(ImageSlot* s, const GraphMeta& meta) {
  ImageData* d = s->data;
  s->image.meta = meta;
  s->image.graph = &d->graph;
  s->image.vectors = d->vectors.data();
  s->image.ids = d->ids.data();
  s->image.row_node = d->row_node.data();
  s->image.node_row = d->node_row.data();
  s->image.rows = d->graph.n;
  s->image.nulls = d->nulls.data();
  s->image.nnulls = static_cast<int64>(d->nulls.size());
}

// Node numbers of a row -> rows, in place: entries that are not rows (NULL,
// dead) dropped, the others kept in order, kNoNode after them.
void remap_row(uint32* row, int degree, const uint32* node_row, int64 nodes) {
  int kept = 0;
  for (int j = 0; j < degree; ++j) {
    uint32 t = row[j];
    if (t == kGraphNoNode || static_cast<int64>(t) >= nodes) continue;
    uint32 r = node_row[t];
    if (r != kGraphNoNode) row[kept++] = r;
  }
  for (int j = kept; j < degree; ++j) row[j] = kGraphNoNode;
}

// Reads every node page into `d` (sized for meta.nodes); the caller holds
// the metapage's lock.
void read_nodes(Relation index, const GraphMeta& meta, ImageData* d) {
  const int dim = meta.dim, degree = meta.degree;
  float* vectors = d->vectors.data();
  int64* ids = d->ids.data();
  uint32* row_node = d->row_node.data();
  uint32* node_row = d->node_row.data();
  uint32* edges = d->graph.edges.data();
  int64* nulls = d->nulls.data();
  uint32* entries = d->graph.entries.data();
  int64 rows = 0, nnulls = 0, nentries = 0;
  graph_for_each_node(index, meta, nullptr, graph_check_interrupts, [&](uint64 node, char* slot) {
    const uint16 flags = graph_slot_flags(slot);
    node_row[node] = kGraphNoNode;
    if (flags & kGraphNodeNull) {
      nulls[nnulls++] = heap_tid_to_id(graph_slot_tid(slot));
    } else if (!(flags & kGraphNodeDead)) {
      node_row[node] = static_cast<uint32>(rows);
      memcpy(vectors + rows * dim, graph_slot_vector(slot), sizeof(float) * dim);
      memcpy(edges + rows * degree, graph_slot_adjacency(slot, meta), sizeof(uint32) * degree);
      ids[rows] = heap_tid_to_id(graph_slot_tid(slot));
      row_node[rows] = static_cast<uint32>(node);
      if (flags & kGraphNodeEntry) entries[nentries++] = static_cast<uint32>(rows);  // ascending
      ++rows;
    }
  });
  for (int64 r = 0; r < rows; ++r) remap_row(edges + r * degree, degree, node_row, meta.nodes);
  d->graph.n = rows;
  d->graph.degree = degree;
  // Shrinking: no allocation.
  d->vectors.resize(static_cast<size_t>(rows) * dim);
  d->ids.resize(rows);
  d->row_node.resize(rows);
  d->graph.edges.resize(static_cast<size_t>(rows) * degree);
  d->nulls.resize(nnulls);
  d->graph.entries.resize(nentries);
}

// A graph the core would refuse (a self edge, a repeated neighbour) is a
// corrupted index.
void check_graph(Relation index, const gknn::graph::Graph& g) {
  bool bad = false;
  char why[256] = "";
  gknn_pg::core_call([&] {
    try {
      gknn::graph::validate(g);
    } catch (const gknn::Error& e) {
      if (e.code() != gknn::ErrorCode::InvalidArgument) throw;
      bad = true;
      strlcpy(why, e.what(), sizeof why);
    }
  });
  if (bad)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("gpu_graph index \"%s\" is corrupted: %s", RelationGetRelationName(index), why),
                    errhint("REINDEX the index.")));
}

void load(Relation index, ImageSlot* s, const GraphMeta& meta) {
  free_slot(s);
  const int64 nodes = meta.nodes;
  const int dim = meta.dim, degree = meta.degree;
  ImageData* d = nullptr;
  gknn_pg::core_call([&] {
    d = new ImageData();
    d->vectors.resize(static_cast<size_t>(nodes) * dim);
    d->ids.resize(nodes);
    d->row_node.resize(nodes);
    d->node_row.resize(nodes);
    d->graph.edges.resize(static_cast<size_t>(nodes) * degree);
    d->nulls.resize(nodes);
    d->graph.entries.resize(nodes);
  });
  s->data = d;  // owned by the slot from here on: an ERROR below leaks nothing
  read_nodes(index, meta, d);
  check_graph(index, d->graph);
}

}  // namespace

const GraphImage* graph_image_get(Relation index) {
  GraphMeta meta;
  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_SHARE, &meta);
  Oid oid = RelationGetRelid(index);
  ImageSlot* s = pick_slot(oid);
  const bool current = s->valid && s->oid == oid && RelFileNodeEquals(s->node, index->rd_node) &&
                       s->generation == meta.generation;
  if (!current) {
    s->valid = false;
    s->oid = oid;
    s->node = index->rd_node;
    load(index, s, meta);
    s->generation = meta.generation;
    publish(s, meta);
    s->valid = true;
  }
  UnlockReleaseBuffer(mbuf);
  s->used = ++clock_tick;
  return &s->image;
}

void graph_image_apply_insert(Relation index, const GraphInsertChange& c) {
  Oid oid = RelationGetRelid(index);
  ImageSlot* s = nullptr;
  for (int i = 0; i < kSlots; ++i)
    if (slots[i].valid && slots[i].oid == oid && RelFileNodeEquals(slots[i].node, index->rd_node))
      s = &slots[i];
  if (s == nullptr) return;
  if (s->generation != c.generation_before) {
    free_slot(s);  // stale: read whole at its next use
    return;
  }
  ImageData* d = s->data;
  if (d->node_row.size() != c.node) {
    free_slot(s);  // not the state this change was made on
    return;
  }
  s->valid = false;  // until the change is applied whole
  GraphMeta meta = s->image.meta;
  const int dim = meta.dim, degree = meta.degree;
  gknn_pg::core_call([&] {
    if (c.vector == nullptr) {
      d->node_row.push_back(kGraphNoNode);
      d->nulls.push_back(c.id);
      return;
    }
    const uint32 row = static_cast<uint32>(d->graph.n);
    d->node_row.push_back(row);
    d->vectors.insert(d->vectors.end(), c.vector, c.vector + dim);
    d->ids.push_back(c.id);
    d->row_node.push_back(c.node);
    d->graph.edges.insert(d->graph.edges.end(), c.adjacency, c.adjacency + degree);
    d->graph.n++;
  });
  const int64 nodes = static_cast<int64>(d->node_row.size());
  if (c.vector != nullptr) remap_row(d->graph.row(d->graph.n - 1), degree, d->node_row.data(), nodes);
  for (int i = 0; i < c.nchanged; ++i) {
    if (static_cast<int64>(c.changed_nodes[i]) >= nodes) continue;
    uint32 r = d->node_row[c.changed_nodes[i]];
    if (r == kGraphNoNode) continue;
    uint32* row = d->graph.row(r);
    memcpy(row, c.changed_lists + static_cast<size_t>(i) * degree, sizeof(uint32) * degree);
    remap_row(row, degree, d->node_row.data(), nodes);
  }
  meta.nodes = nodes;
  meta.generation = c.generation_after;
  if (c.vector == nullptr) meta.nulls++;
  s->generation = c.generation_after;
  publish(s, meta);
  s->valid = true;
}

void graph_image_release(Relation index) {
  Oid oid = RelationGetRelid(index);
  for (int i = 0; i < kSlots; ++i)
    if (slots[i].oid == oid && slots[i].data != nullptr) free_slot(&slots[i]);
}
