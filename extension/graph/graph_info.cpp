// gknn_graph_info(index regclass): what a gpu_graph index holds, read from
// its pages (for monitoring and tests), for callers who may read its table.
#include "am/am_info.h"
#include "am/am_opclass.h"
#include "graph.h"

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "funcapi.h"
#include "miscadmin.h"
}

namespace {

struct Counts {
  int64 live, dead, nulls;
  int64 edges;        // edges between live nodes
  int64 dead_edges;   // edges from live nodes to dead ones (none after VACUUM)
  int64 no_in_edges;  // live nodes no live node points to
  int64 entries;      // live nodes flagged as the graph's entries
};

Counts count_nodes(Relation index, const GraphMeta& meta) {
  Counts c{};
  uint8* flags = static_cast<uint8*>(palloc0(Max(meta.nodes, int64{1})));
  bool* pointed = static_cast<bool*>(palloc0(Max(meta.nodes, int64{1})));
  graph_for_each_node(index, meta, nullptr, graph_check_interrupts,
                      [&](uint64 node, char* slot) { flags[node] = graph_slot_flags(slot); });
  graph_for_each_node(index, meta, nullptr, graph_check_interrupts, [&](uint64 node, char* slot) {
    if (flags[node] & kGraphNodeNull) {
      c.nulls++;
      return;
    }
    if (flags[node] & kGraphNodeDead) {
      c.dead++;
      return;
    }
    c.live++;
    if (flags[node] & kGraphNodeEntry) c.entries++;
    const uint32* adj = graph_slot_adjacency(slot, meta);
    for (int j = 0; j < meta.degree; ++j) {
      if (adj[j] == kGraphNoNode) continue;
      if (flags[adj[j]] & kGraphNodeDead) {
        c.dead_edges++;
      } else if (!(flags[adj[j]] & kGraphNodeNull)) {
        c.edges++;
        pointed[adj[j]] = true;
      }
    }
  });
  for (int64 i = 0; i < meta.nodes; ++i)
    if (!(flags[i] & (kGraphNodeDead | kGraphNodeNull)) && !pointed[i]) c.no_in_edges++;
  return c;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(gknn_graph_info);
Datum gknn_graph_info(PG_FUNCTION_ARGS) {
  Oid indexoid = PG_GETARG_OID(0);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "return type must be a row type");
  Relation index = am_info_open(indexoid, "gpu_graph");
  GraphMeta meta;
  Buffer mbuf = graph_lock_meta(index, BUFFER_LOCK_SHARE, &meta);
  Counts c = count_nodes(index, meta);
  UnlockReleaseBuffer(mbuf);
  BlockNumber pages = RelationGetNumberOfBlocks(index);
  relation_close(index, AccessShareLock);

  Datum values[13] = {Int32GetDatum(meta.dim),
                      Int32GetDatum(meta.degree),
                      CStringGetTextDatum(am_metric_name(meta.metric)),
                      Int64GetDatum(static_cast<int64>(meta.generation)),
                      Int64GetDatum(meta.nodes),
                      Int64GetDatum(c.live),
                      Int64GetDatum(c.dead),
                      Int64GetDatum(c.nulls),
                      Int64GetDatum(c.edges),
                      Int64GetDatum(c.dead_edges),
                      Int64GetDatum(c.no_in_edges),
                      Int64GetDatum(c.entries),
                      Int64GetDatum(static_cast<int64>(pages))};
  bool nullflags[13] = {};
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nullflags)));
}

}  // extern "C"
