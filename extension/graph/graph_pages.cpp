// gpu_graph page helpers and checked reads (layout in graph_format.h).
#include <cstring>

#include "graph.h"

extern "C" {
#include "storage/lmgr.h"
}

// graph_format.h mirrors PostgreSQL's page layout; these say it is the same.
static_assert(kGraphBlockSize == BLCKSZ && kGraphPageHeaderSize == SizeOfPageHeaderData &&
              kGraphContentOffset == MAXALIGN(SizeOfPageHeaderData) &&
              kGraphSpecialOffset == BLCKSZ - MAXALIGN(sizeof(GraphPageOpaque)));
static_assert(offsetof(PageHeaderData, pd_lower) == offsetof(GraphPageHeader, lower) &&
              offsetof(PageHeaderData, pd_upper) == offsetof(GraphPageHeader, upper) &&
              offsetof(PageHeaderData, pd_special) == offsetof(GraphPageHeader, special) &&
              offsetof(PageHeaderData, pd_pagesize_version) == offsetof(GraphPageHeader, pagesize_version) &&
              PG_PAGE_LAYOUT_VERSION == 4);
static_assert(sizeof(ItemPointerData) == kGraphTidBytes && offsetof(ItemPointerData, ip_posid) == 4 &&
              InvalidBlockNumber == kGraphNoBlock && MaxOffsetNumber == kGraphBlockSize / 4);
static_assert(kGraphNoNode == gknn::graph::kNoNode && kGraphMaxDegree == gknn::graph::kMaxDegree &&
              kGraphMaxIntermediateDegree == gknn::graph::kMaxIntermediateDegree);
static_assert(kGraphMaxDim == 16000);

void graph_init_page(Page page, GraphPageKind kind) {
  PageInit(page, BLCKSZ, sizeof(GraphPageOpaque));
  GraphPageOpaque* o = graph_opaque(page);
  o->kind = kind;
  o->page_id = kGraphPageId;
  o->unused = 0;
}

void graph_set_contents_size(Page page, Size bytes) {
  auto* h = reinterpret_cast<PageHeader>(page);
  h->pd_lower = static_cast<LocationIndex>(reinterpret_cast<char*>(PageGetContents(page)) + bytes - page);
}

void graph_init_meta_page(Page page, const GraphMeta& meta) {
  graph_init_page(page, kGraphPageMeta);
  memcpy(graph_meta(page), &meta, sizeof(GraphMeta));
  graph_set_contents_size(page, sizeof(GraphMeta));
}

Buffer graph_new_buffer(Relation index) {
  LockRelationForExtension(index, ExclusiveLock);
  Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  UnlockRelationForExtension(index, ExclusiveLock);
  return buf;
}

void graph_corrupted(Relation index, BlockNumber blk, const char* problem) {
  ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                  errmsg("gpu_graph index \"%s\" is corrupted: block %u: %s", RelationGetRelationName(index),
                         blk, problem),
                  errhint("REINDEX the index.")));
  pg_unreachable();
}

namespace {

const unsigned char* bytes(Page page) { return reinterpret_cast<const unsigned char*>(page); }

}  // namespace

void graph_check_meta(Relation index, const GraphMeta* meta) {
  if (meta->magic != kGraphMagic)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("index \"%s\" is not a gpu_graph index", RelationGetRelationName(index))));
  if (meta->version != kGraphVersion)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("gpu_graph index \"%s\" has format version %u, this gknn reads version %u",
                           RelationGetRelationName(index), meta->version, kGraphVersion),
                    errhint("REINDEX the index.")));
  // Read after the metapage, so every block it names is inside.
  BlockNumber nblocks = RelationGetNumberOfBlocks(index);
  if (const char* problem = graph_meta_problem(*meta, nblocks))
    graph_corrupted(index, kGraphMetaBlock, problem);
}

Buffer graph_lock_meta(Relation index, int mode, GraphMeta* out) {
  if (RelationGetNumberOfBlocks(index) == 0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("gpu_graph index \"%s\" is not built", RelationGetRelationName(index)),
                    errhint("REINDEX the index.")));
  Buffer buf = ReadBuffer(index, kGraphMetaBlock);
  LockBuffer(buf, mode);
  Page page = BufferGetPage(buf);
  const char* problem = graph_page_problem(bytes(page), kGraphPageMeta);
  if (problem == nullptr &&
      reinterpret_cast<PageHeader>(page)->pd_lower < kGraphContentOffset + sizeof(GraphMeta))
    problem = "metapage is too short";
  if (problem != nullptr) graph_corrupted(index, kGraphMetaBlock, problem);
  memcpy(out, graph_meta(page), sizeof(GraphMeta));
  graph_check_meta(index, out);
  return buf;
}

void graph_read_meta(Relation index, GraphMeta* out) {
  UnlockReleaseBuffer(graph_lock_meta(index, BUFFER_LOCK_SHARE, out));
}

void graph_check_node_page(Relation index, const GraphMeta& meta, BlockNumber blk, Page page) {
  if (const char* problem = graph_node_page_problem(bytes(page), meta, blk, meta.nodes))
    graph_corrupted(index, blk, problem);
}
