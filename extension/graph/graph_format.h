// gpu_graph's page format and the checks a reader runs on a page before
// trusting anything in it, free of PostgreSQL headers: the extension's
// readers (graph_pages.cpp) call these checks on every page they read and
// raise XX002 (index corrupted) with the problem they name. PostgreSQL's
// page header is mirrored as in ivfpq_format.h (graph_pages.cpp asserts the
// mirror is PostgreSQL's layout).
//
// The layout:
//   block 0        metapage (GraphMeta): parameters, generation, node count
//   blocks 1..     node pages: fixed-size node slots packed from the page's
//                  contents on, no line pointers; node i is slot
//                  i % nodes_per_page of block 1 + i / nodes_per_page, so a
//                  node's place is computed from its number alone
//
// A node slot: the heap TID (6 bytes), flags (uint16: dead, NULL, entry),
// the vector (dim floats), then the adjacency (degree uint32 node numbers, kGraphNoNode in
// the unused slots at the end). A row whose vector is NULL is a node with
// the null flag: no vector, no edges, no edges to it; a scan returns it last
// (as a sort places NULL distances last). VACUUM sets the dead flag on a
// node whose heap tuple is gone and takes it out of every list.
#pragma once

#include <cstddef>
#include <cstdint>

constexpr std::uint32_t kGraphMagic = 0x47475246;  // "GGRF"
constexpr std::uint32_t kGraphVersion = 1;
constexpr std::uint32_t kGraphMetaBlock = 0;
constexpr std::uint32_t kGraphFirstNodeBlock = 1;
constexpr std::uint16_t kGraphPageId = 0xFF8B;       // in every page's special space
constexpr std::uint32_t kGraphNoNode = 0xFFFFFFFFu;  // an empty adjacency slot (gknn::graph::kNoNode)
constexpr std::uint32_t kGraphNoBlock = 0xFFFFFFFFu;
constexpr int kGraphMaxDegree = 128;              // gknn::graph::kMaxDegree
constexpr int kGraphMaxIntermediateDegree = 256;  // gknn::graph::kMaxIntermediateDegree
constexpr int kGraphMaxDim = 16000;
constexpr int kGraphMetricCount = 3;  // L2, inner product, cosine

enum GraphPageKind : std::uint16_t {
  kGraphPageMeta = 1,
  kGraphPageNodes = 2,
};

// The special space of every page.
struct GraphPageOpaque {
  std::uint16_t kind;     // GraphPageKind
  std::uint16_t page_id;  // kGraphPageId
  std::uint32_t unused;
};

struct GraphMeta {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t dim;                  // fixed at the build (the column's typmod or the first vector)
  std::int32_t metric;               // gknn::Metric
  std::int32_t degree;               // out-degree of every node's list
  std::int32_t intermediate_degree;  // the build's initial kNN graph (0: 2 x degree)
  std::uint64_t seed;                // the build's and searches' randomness
  std::uint64_t generation;          // bumped by every change after the build
  std::int64_t nodes;                // node numbers in use: 0..nodes-1
  std::int64_t dead;                 // nodes VACUUM marked dead
  std::int64_t nulls;                // nodes of NULL vectors
  std::int64_t build_rows;           // non-NULL vectors the build indexed
  std::uint32_t entry;               // a node near the centre of the data (kGraphNoNode: none yet)
  std::uint32_t node_bytes;          // bytes of one node slot
  std::uint32_t nodes_per_page;
  std::uint32_t unused;
};
static_assert(sizeof(GraphMeta) == 88, "the metapage's layout is on disk");

// Node flags.
constexpr std::uint16_t kGraphNodeDead = 1;
constexpr std::uint16_t kGraphNodeNull = 2;
// One of the graph's entries (gknn::graph::Graph::entries): where every
// search starts, besides a seeded sample; one node of each part of the
// graph the build (or VACUUM's repair) found unreachable from the others.
constexpr std::uint16_t kGraphNodeEntry = 4;
constexpr std::uint16_t kGraphNodeFlags = kGraphNodeDead | kGraphNodeNull | kGraphNodeEntry;

// PostgreSQL's page: BLCKSZ bytes, a 24-byte header, the contents, the
// special space from pd_special to the end.
constexpr std::size_t kGraphBlockSize = 8192;
constexpr std::size_t graph_maxalign(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

struct GraphPageHeader {  // PageHeaderData
  std::uint32_t lsn_hi, lsn_lo;
  std::uint16_t checksum;
  std::uint16_t flags;
  std::uint16_t lower;  // end of the used contents
  std::uint16_t upper;
  std::uint16_t special;
  std::uint16_t pagesize_version;
  std::uint32_t prune_xid;
};
constexpr std::size_t kGraphPageHeaderSize = 24;  // SizeOfPageHeaderData
constexpr std::size_t kGraphContentOffset = graph_maxalign(kGraphPageHeaderSize);
constexpr std::size_t kGraphSpecialOffset = kGraphBlockSize - graph_maxalign(sizeof(GraphPageOpaque));
constexpr std::size_t kGraphContentBytes = kGraphSpecialOffset - kGraphContentOffset;
constexpr std::size_t kGraphTidBytes = 6;      // ItemPointerData
constexpr std::size_t kGraphVectorOffset = 8;  // TID, flags, then the vector

// A node slot's size and where its adjacency starts.
constexpr std::size_t graph_node_bytes(int dim, int degree) {
  return kGraphVectorOffset + 4 * static_cast<std::size_t>(dim) + 4 * static_cast<std::size_t>(degree);
}
constexpr std::size_t graph_adjacency_offset(int dim) {
  return kGraphVectorOffset + 4 * static_cast<std::size_t>(dim);
}
// Slots per node page (0: a node does not fit a page).
constexpr std::uint32_t graph_nodes_per_page(int dim, int degree) {
  return static_cast<std::uint32_t>(kGraphContentBytes / graph_node_bytes(dim, degree));
}
// The block and byte offset (from the page's start) of node `node`.
inline std::uint32_t graph_node_block(std::uint64_t node, std::uint32_t per_page) {
  return kGraphFirstNodeBlock + static_cast<std::uint32_t>(node / per_page);
}
inline std::size_t graph_node_offset(std::uint64_t node, std::uint32_t per_page, std::size_t node_bytes) {
  return kGraphContentOffset + static_cast<std::size_t>(node % per_page) * node_bytes;
}

// ---- checks: each returns null when the page can be read as asked, else
// what is wrong with it (a static string). None reads outside the page. ----

// The metapage's contents: magic, version and parameters that agree with one
// another; every node page inside [1, nblocks).
const char* graph_meta_problem(const GraphMeta& meta, std::uint32_t nblocks);

// A page of `kind`: PostgreSQL's header bounds, gpu_graph's special space.
const char* graph_page_problem(const unsigned char* page, GraphPageKind kind);

// Node page `blk` of an index with this (checked) metapage, of which the
// first `nodes` nodes exist (meta.nodes, or more when the reader's copy of
// the metapage is older than the page): its header covers the slots of the
// nodes on it, and each of those slots is well formed (known flags; a heap
// TID a scan may fetch; every adjacency entry kGraphNoNode or below `nodes`;
// no edges on a null node).
const char* graph_node_page_problem(const unsigned char* page, const GraphMeta& meta, std::uint32_t blk,
                                    std::int64_t nodes);

// The nodes, of the first `nodes`, held by node page `blk` (0 past the end).
std::uint32_t graph_nodes_on_page(const GraphMeta& meta, std::uint32_t blk, std::int64_t nodes);
// Node pages holding `nodes` nodes.
std::uint32_t graph_node_pages(const GraphMeta& meta, std::int64_t nodes);

// ---- reading a page that passed its check ----

inline const GraphPageHeader* graph_page_header(const unsigned char* page) {
  return reinterpret_cast<const GraphPageHeader*>(page);
}
inline const GraphPageOpaque* graph_page_opaque(const unsigned char* page) {
  return reinterpret_cast<const GraphPageOpaque*>(page + kGraphSpecialOffset);
}
