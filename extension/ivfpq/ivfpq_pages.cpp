// gpu_ivfpq page helpers (layout in ivfpq_pages.h).
#include <cstring>

#include "ivfpq.h"

extern "C" {
#include "storage/lmgr.h"
#include "utils/rel.h"
}

void ivfpq_init_page(Page page, IvfpqPageKind kind, BlockNumber prev) {
  PageInit(page, BLCKSZ, sizeof(IvfpqPageOpaque));
  IvfpqPageOpaque* o = ivfpq_opaque(page);
  o->prev = prev;
  o->kind = kind;
  o->page_id = kIvfpqPageId;
}

void ivfpq_set_contents_size(Page page, Size bytes) {
  reinterpret_cast<PageHeader>(page)->pd_lower =
      static_cast<LocationIndex>(reinterpret_cast<char*>(PageGetContents(page)) + bytes - page);
}

void ivfpq_init_meta_page(Page page, const IvfpqMeta& meta) {
  ivfpq_init_page(page, kIvfpqPageMeta, InvalidBlockNumber);
  memcpy(ivfpq_meta(page), &meta, sizeof(IvfpqMeta));
  ivfpq_log_init(page, meta.generation);
}

Buffer ivfpq_new_buffer(Relation index) {
  LockRelationForExtension(index, ExclusiveLock);
  Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  UnlockRelationForExtension(index, ExclusiveLock);
  return buf;
}

// ivfpq_format.h mirrors PostgreSQL's page layout; these say it is the same.
static_assert(kIvfpqBlockSize == BLCKSZ && kIvfpqPageHeaderSize == SizeOfPageHeaderData &&
              kIvfpqContentOffset == MAXALIGN(SizeOfPageHeaderData) &&
              kIvfpqSpecialOffset == BLCKSZ - MAXALIGN(sizeof(IvfpqPageOpaque)));
static_assert(offsetof(PageHeaderData, pd_lower) == offsetof(IvfpqPageHeader, lower) &&
              offsetof(PageHeaderData, pd_upper) == offsetof(IvfpqPageHeader, upper) &&
              offsetof(PageHeaderData, pd_special) == offsetof(IvfpqPageHeader, special) &&
              offsetof(PageHeaderData, pd_pagesize_version) == offsetof(IvfpqPageHeader, pagesize_version) &&
              offsetof(PageHeaderData, pd_linp) == kIvfpqPageHeaderSize);
static_assert(sizeof(ItemIdData) == sizeof(IvfpqLinePointer) && LP_NORMAL == kIvfpqLpNormal &&
              PG_PAGE_LAYOUT_VERSION == 4);
static_assert(sizeof(ItemPointerData) == kIvfpqTidBytes && offsetof(ItemPointerData, ip_posid) == 4 &&
              offsetof(BlockIdData, bi_lo) == 2 && InvalidBlockNumber == kIvfpqNoBlock &&
              MaxOffsetNumber == kIvfpqBlockSize / sizeof(IvfpqLinePointer));

void ivfpq_corrupted(Relation index, BlockNumber blk, const char* problem) {
  ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                  errmsg("gpu_ivfpq index \"%s\" is corrupted: block %u: %s", RelationGetRelationName(index),
                         blk, problem),
                  errhint("REINDEX the index.")));
  pg_unreachable();
}

namespace {

const unsigned char* bytes(Page page) { return reinterpret_cast<const unsigned char*>(page); }

// Runs check(nblocks); a failure is checked again against the index's
// current length (it may have grown since *nblocks was read) before it is
// reported.
template <typename Check>
void check_with_length(Relation index, BlockNumber blk, BlockNumber* nblocks, Check check) {
  const char* problem = check(*nblocks);
  if (problem == nullptr) return;
  *nblocks = RelationGetNumberOfBlocks(index);
  problem = check(*nblocks);
  if (problem != nullptr) ivfpq_corrupted(index, blk, problem);
}

}  // namespace

void ivfpq_check_meta(Relation index, const IvfpqMeta* meta) {
  if (meta->magic != kIvfpqMagic)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("index \"%s\" is not a gpu_ivfpq index", RelationGetRelationName(index))));
  if (meta->version != kIvfpqVersion && meta->version != kIvfpqVersionTyped)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("gpu_ivfpq index \"%s\" has format version %u, this gknn reads versions %u and %u",
                           RelationGetRelationName(index), meta->version, kIvfpqVersion, kIvfpqVersionTyped),
                    errhint("REINDEX the index.")));
  // Read after the metapage, so every block it names is inside.
  BlockNumber nblocks = RelationGetNumberOfBlocks(index);
  if (const char* problem = ivfpq_meta_problem(*meta, nblocks))
    ivfpq_corrupted(index, kIvfpqMetaBlock, problem);
}

void ivfpq_read_meta(Relation index, IvfpqMeta* out) {
  Buffer buf = ReadBuffer(index, kIvfpqMetaBlock);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  if (ivfpq_opaque(page)->page_id != kIvfpqPageId || ivfpq_opaque(page)->kind != kIvfpqPageMeta) {
    UnlockReleaseBuffer(buf);
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("index \"%s\" has no gpu_ivfpq metapage", RelationGetRelationName(index))));
  }
  const char* problem = ivfpq_page_problem(bytes(page), kIvfpqPageMeta);
  if (problem == nullptr &&
      reinterpret_cast<PageHeader>(page)->pd_lower < kIvfpqContentOffset + sizeof(IvfpqMeta))
    problem = "metapage is too short";
  if (problem != nullptr) ivfpq_corrupted(index, kIvfpqMetaBlock, problem);
  memcpy(out, ivfpq_meta(page), sizeof(IvfpqMeta));
  UnlockReleaseBuffer(buf);
  ivfpq_check_meta(index, out);
}

void ivfpq_check_list_page(Relation index, BlockNumber blk, Page page, Size item_size, BlockNumber* nblocks) {
  check_with_length(index, blk, nblocks,
                    [&](BlockNumber n) { return ivfpq_list_page_problem(bytes(page), item_size, n); });
}

namespace {

// Directory page p holds the entries of lists [p x kIvfpqDirPerPage, ...).
Size directory_entries(const IvfpqMeta& meta, uint32 p) {
  return static_cast<Size>(Min(static_cast<int64>(meta.lists) - static_cast<int64>(p) * kIvfpqDirPerPage,
                               static_cast<int64>(kIvfpqDirPerPage)));
}

}  // namespace

void ivfpq_check_directory_page(Relation index, const IvfpqMeta& meta, BlockNumber blk, Page page,
                                BlockNumber* nblocks) {
  Size entries = directory_entries(meta, blk - meta.directory_start);
  check_with_length(index, blk, nblocks,
                    [&](BlockNumber n) { return ivfpq_directory_page_problem(bytes(page), entries, n); });
}

void ivfpq_read_floats(Relation index, BlockNumber start, float* dst, int64 count) {
  BlockNumber blk = start;
  for (int64 done = 0; done < count; ++blk) {
    int64 n = Min(count - done, static_cast<int64>(kIvfpqFloatsPerPage));
    Buffer buf = ReadBuffer(index, blk);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    if (const char* problem = ivfpq_floats_page_problem(bytes(page), n)) ivfpq_corrupted(index, blk, problem);
    memcpy(dst + done, PageGetContents(page), n * sizeof(float));
    UnlockReleaseBuffer(buf);
    done += n;
  }
}

BlockNumber ivfpq_dir_block_of(const IvfpqMeta& meta, int list) {
  return meta.directory_start + static_cast<BlockNumber>(list / kIvfpqDirPerPage);
}

BlockNumber ivfpq_read_dir_entry(Relation index, const IvfpqMeta& meta, int list) {
  BlockNumber blk = ivfpq_dir_block_of(meta, list), nblocks = 0;
  Buffer buf = ReadBuffer(index, blk);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  ivfpq_check_directory_page(index, meta, blk, page, &nblocks);
  BlockNumber last = reinterpret_cast<BlockNumber*>(PageGetContents(page))[list % kIvfpqDirPerPage];
  UnlockReleaseBuffer(buf);
  return last;
}

BlockNumber* ivfpq_read_directory(Relation index, const IvfpqMeta& meta) {
  BlockNumber* out = static_cast<BlockNumber*>(palloc(sizeof(BlockNumber) * Max(meta.lists, 1)));
  BlockNumber nblocks = 0;
  for (uint32 p = 0; p < meta.directory_pages; ++p) {
    BlockNumber blk = meta.directory_start + p;
    Buffer buf = ReadBuffer(index, blk);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    ivfpq_check_directory_page(index, meta, blk, page, &nblocks);
    memcpy(out + p * kIvfpqDirPerPage, PageGetContents(page),
           directory_entries(meta, p) * sizeof(BlockNumber));
    UnlockReleaseBuffer(buf);
  }
  return out;
}
