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
  ivfpq_set_contents_size(page, sizeof(IvfpqMeta));
}

Buffer ivfpq_new_buffer(Relation index) {
  LockRelationForExtension(index, ExclusiveLock);
  Buffer buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  UnlockRelationForExtension(index, ExclusiveLock);
  return buf;
}

void ivfpq_check_meta(Relation index, const IvfpqMeta* meta) {
  if (meta->magic != kIvfpqMagic)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("index \"%s\" is not a gpu_ivfpq index", RelationGetRelationName(index))));
  if (meta->version != kIvfpqVersion)
    ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                    errmsg("gpu_ivfpq index \"%s\" has format version %u, this gknn reads version %u",
                           RelationGetRelationName(index), meta->version, kIvfpqVersion),
                    errhint("REINDEX the index.")));
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
  memcpy(out, ivfpq_meta(page), sizeof(IvfpqMeta));
  UnlockReleaseBuffer(buf);
  ivfpq_check_meta(index, out);
}

void ivfpq_read_floats(Relation index, BlockNumber start, float* dst, int64 count) {
  BlockNumber blk = start;
  for (int64 done = 0; done < count; ++blk) {
    int64 n = Min(count - done, static_cast<int64>(kIvfpqFloatsPerPage));
    Buffer buf = ReadBuffer(index, blk);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    if (ivfpq_opaque(page)->kind != kIvfpqPageFloats) {
      UnlockReleaseBuffer(buf);
      ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                      errmsg("gpu_ivfpq index \"%s\": block %u is not a quantizer page",
                             RelationGetRelationName(index), blk)));
    }
    memcpy(dst + done, PageGetContents(page), n * sizeof(float));
    UnlockReleaseBuffer(buf);
    done += n;
  }
}

BlockNumber ivfpq_dir_block_of(const IvfpqMeta& meta, int list) {
  return meta.directory_start + static_cast<BlockNumber>(list / kIvfpqDirPerPage);
}

BlockNumber ivfpq_read_dir_entry(Relation index, const IvfpqMeta& meta, int list) {
  Buffer buf = ReadBuffer(index, ivfpq_dir_block_of(meta, list));
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  BlockNumber last =
      reinterpret_cast<BlockNumber*>(PageGetContents(BufferGetPage(buf)))[list % kIvfpqDirPerPage];
  UnlockReleaseBuffer(buf);
  return last;
}

BlockNumber* ivfpq_read_directory(Relation index, const IvfpqMeta& meta) {
  BlockNumber* out = static_cast<BlockNumber*>(palloc(sizeof(BlockNumber) * Max(meta.lists, 1)));
  for (uint32 p = 0; p < meta.directory_pages; ++p) {
    int first = static_cast<int>(p * kIvfpqDirPerPage);
    int n = Min(meta.lists - first, static_cast<int>(kIvfpqDirPerPage));
    Buffer buf = ReadBuffer(index, meta.directory_start + p);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    if (ivfpq_opaque(page)->kind != kIvfpqPageDirectory) {
      UnlockReleaseBuffer(buf);
      ereport(ERROR, (errcode(ERRCODE_INDEX_CORRUPTED),
                      errmsg("gpu_ivfpq index \"%s\": block %u is not a directory page",
                             RelationGetRelationName(index), meta.directory_start + p)));
    }
    memcpy(out + first, PageGetContents(page), n * sizeof(BlockNumber));
    UnlockReleaseBuffer(buf);
  }
  return out;
}
