// gpu_graph page checks (graph_format.h), without PostgreSQL: what every
// reader verifies before it trusts a metapage or a node slot.
#include "graph_format.h"

namespace {

// ItemPointerData as stored: block number (two uint16 halves, high first),
// then the offset number. A scan fetches the heap tuple there: block
// InvalidBlockNumber would be P_NEW to ReadBuffer, offsets are
// 1..MaxOffsetNumber.
bool heap_tid_ok(const unsigned char* slot) {
  std::uint16_t hi, lo, off;
  __builtin_memcpy(&hi, slot, 2);
  __builtin_memcpy(&lo, slot + 2, 2);
  __builtin_memcpy(&off, slot + 4, 2);
  const std::uint32_t blk = std::uint32_t{hi} << 16 | lo;
  return blk != kGraphNoBlock && off >= 1 && off <= kGraphBlockSize / 4;
}

}  // namespace

std::uint32_t graph_node_pages(const GraphMeta& meta, std::int64_t nodes) {
  if (nodes <= 0 || meta.nodes_per_page == 0) return 0;
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(nodes) + meta.nodes_per_page - 1) /
                                    meta.nodes_per_page);
}

std::uint32_t graph_nodes_on_page(const GraphMeta& meta, std::uint32_t blk, std::int64_t nodes) {
  if (blk < kGraphFirstNodeBlock || meta.nodes_per_page == 0) return 0;
  const std::uint64_t first = std::uint64_t{blk - kGraphFirstNodeBlock} * meta.nodes_per_page;
  if (nodes <= 0 || first >= static_cast<std::uint64_t>(nodes)) return 0;
  const std::uint64_t left = static_cast<std::uint64_t>(nodes) - first;
  return left < meta.nodes_per_page ? static_cast<std::uint32_t>(left) : meta.nodes_per_page;
}

const char* graph_meta_problem(const GraphMeta& meta, std::uint32_t nblocks) {
  if (meta.magic != kGraphMagic) return "metapage has the wrong magic number";
  if (meta.version != kGraphVersion) return "metapage has another format version";
  if (meta.metric < 0 || meta.metric >= kGraphMetricCount) return "metapage has an unknown metric";
  if (meta.dim < 1 || meta.dim > kGraphMaxDim) return "metapage has an impossible dimension";
  if (meta.degree < 2 || meta.degree > kGraphMaxDegree || meta.degree % 2 != 0)
    return "metapage has an impossible degree";
  if (meta.intermediate_degree != 0 &&
      (meta.intermediate_degree < meta.degree || meta.intermediate_degree > kGraphMaxIntermediateDegree))
    return "metapage has an impossible intermediate degree";
  if (meta.node_bytes != graph_node_bytes(meta.dim, meta.degree) ||
      meta.nodes_per_page != graph_nodes_per_page(meta.dim, meta.degree) || meta.nodes_per_page == 0)
    return "metapage has an impossible node size";
  // Node numbers are uint32 with kGraphNoNode reserved.
  if (meta.nodes < 0 || meta.nodes >= static_cast<std::int64_t>(kGraphNoNode))
    return "metapage has an impossible node count";
  if (meta.dead < 0 || meta.nulls < 0 || meta.dead + meta.nulls > meta.nodes || meta.build_rows < 0)
    return "metapage has impossible node counts";
  if (meta.entry != kGraphNoNode && meta.entry >= static_cast<std::uint64_t>(meta.nodes))
    return "metapage has an impossible entry node";
  if (std::uint64_t{kGraphFirstNodeBlock} + graph_node_pages(meta, meta.nodes) > nblocks)
    return "metapage counts more nodes than the index has pages";
  return nullptr;
}

const char* graph_page_problem(const unsigned char* page, GraphPageKind kind) {
  const GraphPageHeader* h = graph_page_header(page);
  // PageHeaderIsValid, with the special space where PageInit put ours.
  if (h->lower < kGraphPageHeaderSize || h->lower > h->upper || h->upper > h->special ||
      h->special != kGraphSpecialOffset || h->pagesize_version != (kGraphBlockSize | 4))
    return "page header is corrupted";
  const GraphPageOpaque* o = graph_page_opaque(page);
  if (o->page_id != kGraphPageId) return "page is not a gpu_graph page";
  if (o->kind != kind) return kind == kGraphPageMeta ? "page is not a metapage" : "page is not a node page";
  return nullptr;
}

const char* graph_node_page_problem(const unsigned char* page, const GraphMeta& meta, std::uint32_t blk,
                                    std::int64_t nodes) {
  if (const char* p = graph_page_problem(page, kGraphPageNodes)) return p;
  const std::uint32_t count = graph_nodes_on_page(meta, blk, nodes);
  if (graph_page_header(page)->lower < kGraphContentOffset + std::size_t{count} * meta.node_bytes)
    return "node page holds fewer nodes than the metapage says";
  const std::size_t adjacency = graph_adjacency_offset(meta.dim);
  for (std::uint32_t i = 0; i < count; ++i) {
    const unsigned char* slot = page + kGraphContentOffset + std::size_t{i} * meta.node_bytes;
    std::uint16_t flags;
    __builtin_memcpy(&flags, slot + kGraphTidBytes, 2);
    if ((flags & ~kGraphNodeFlags) != 0) return "node page has a node with unknown flags";
    if (!heap_tid_ok(slot)) return "node page has an impossible heap TID";
    for (int j = 0; j < meta.degree; ++j) {
      std::uint32_t to;
      __builtin_memcpy(&to, slot + adjacency + 4 * std::size_t(j), 4);
      if (to == kGraphNoNode) continue;
      if (static_cast<std::int64_t>(to) >= nodes)
        return "node page has an edge to a node that does not exist";
      if (flags & kGraphNodeNull) return "node page has a NULL node with edges";
    }
  }
  return nullptr;
}
