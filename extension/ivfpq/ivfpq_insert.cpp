// gpu_ivfpq aminsert: encode the vector on the CPU (one vector: no transfer
// is worth it), append (TID, code [, the vector as its type stores it]) to
// its list's last page or a new page, bump the generation and log where the
// item went (the metapage's change log, which lets cached images read just
// that item); one Generic WAL record.
//
// Locks, always in this order: metapage (exclusive: inserts are serialised
// and an image loader, holding it shared, sees a stable index), directory
// page, the chain's last page, the new page.
#include <cstring>

#include "ivfpq.h"

extern "C" {
#include "access/generic_xlog.h"
#include "utils/memutils.h"
}

namespace {

enum class Chain { List, Pending, Nulls };

void append_item(Relation index, Chain chain, int list, const char* item, Size size, int dim) {
  Buffer mbuf = ReadBuffer(index, kIvfpqMetaBlock);
  LockBuffer(mbuf, BUFFER_LOCK_EXCLUSIVE);
  IvfpqMeta* meta = ivfpq_meta(BufferGetPage(mbuf));
  ivfpq_check_meta(index, meta);

  // Pages are checked before anything is read from them or added to them
  // (PageAddItem PANICs on a corrupted page header).
  BlockNumber nblocks = 0;
  Buffer dbuf = InvalidBuffer;
  BlockNumber last;
  if (chain == Chain::List) {
    BlockNumber dblk = ivfpq_dir_block_of(*meta, list);
    dbuf = ReadBuffer(index, dblk);
    LockBuffer(dbuf, BUFFER_LOCK_EXCLUSIVE);
    ivfpq_check_directory_page(index, *meta, dblk, BufferGetPage(dbuf), &nblocks);
    last = reinterpret_cast<BlockNumber*>(PageGetContents(BufferGetPage(dbuf)))[list % kIvfpqDirPerPage];
  } else {
    last = chain == Chain::Pending ? meta->pending_last : meta->null_last;
  }
  Buffer lbuf = InvalidBuffer;
  bool fits = false;
  if (BlockNumberIsValid(last)) {
    lbuf = ReadBuffer(index, last);
    LockBuffer(lbuf, BUFFER_LOCK_EXCLUSIVE);
    ivfpq_check_list_page(index, last, BufferGetPage(lbuf), size, &nblocks);
    fits = PageGetFreeSpace(BufferGetPage(lbuf)) >= MAXALIGN(size);
  }
  Buffer nbuf = fits ? InvalidBuffer : ivfpq_new_buffer(index);

  GenericXLogState* xs = GenericXLogStart(index);
  Page mpage = GenericXLogRegisterBuffer(xs, mbuf, 0);
  IvfpqMeta* wmeta = ivfpq_meta(mpage);
  Page target;
  if (fits) {
    target = GenericXLogRegisterBuffer(xs, lbuf, 0);
  } else {
    target = GenericXLogRegisterBuffer(xs, nbuf, GENERIC_XLOG_FULL_IMAGE);
    ivfpq_init_page(target, kIvfpqPageList, last);
    BlockNumber blk = BufferGetBlockNumber(nbuf);
    if (chain == Chain::List) {
      Page dpage = GenericXLogRegisterBuffer(xs, dbuf, 0);
      reinterpret_cast<BlockNumber*>(PageGetContents(dpage))[list % kIvfpqDirPerPage] = blk;
    } else if (chain == Chain::Pending) {
      wmeta->pending_last = blk;
    } else {
      wmeta->null_last = blk;
    }
  }
  BlockNumber blk = BufferGetBlockNumber(fits ? lbuf : nbuf);
  OffsetNumber off = PageAddItem(target, (Item)item, size, InvalidOffsetNumber, false, false);
  if (off == InvalidOffsetNumber) elog(ERROR, "gpu_ivfpq: could not add an item to block %u", blk);
  if (wmeta->dim == 0 && dim > 0) wmeta->dim = dim;
  wmeta->generation++;
  int32 chain_id = chain == Chain::List      ? list
                   : chain == Chain::Pending ? kIvfpqChainPending
                                             : kIvfpqChainNulls;
  ivfpq_log_change(mpage, chain_id, blk, off, fits ? kIvfpqLogAppend : kIvfpqLogNewPage);
  GenericXLogFinish(xs);

  if (BufferIsValid(nbuf)) UnlockReleaseBuffer(nbuf);
  if (BufferIsValid(lbuf)) UnlockReleaseBuffer(lbuf);
  if (BufferIsValid(dbuf)) UnlockReleaseBuffer(dbuf);
  UnlockReleaseBuffer(mbuf);
}

}  // namespace

bool ivfpq_insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation,
                  IndexUniqueCheck, bool, IndexInfo*) {
  MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "gpu_ivfpq insert", ALLOCSET_SMALL_SIZES);
  MemoryContext old = MemoryContextSwitchTo(tmp);

  IvfpqMeta meta;
  ivfpq_read_meta(index, &meta);
  if (isnull[0]) {
    append_item(index, Chain::Nulls, -1, reinterpret_cast<const char*>(heap_tid), sizeof(ItemPointerData), 0);
  } else {
    IvfpqElement element = ivfpq_meta_element(meta);
    IvfpqValue v = ivfpq_value(element, values[0]);
    // An empty untrained index takes its dimension from this vector.
    if (meta.dim == 0) ivfpq_check_vector_dim(v.dim);
    if (meta.dim > 0 && v.dim != meta.dim)
      ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                      errmsg("gpu_ivfpq: expected %d dimensions, not %d", meta.dim, v.dim),
                      errdetail("All vectors of a gpu_ivfpq index have the same dimension.")));
    if (!meta.trained) {
      append_item(index, Chain::Pending, -1, reinterpret_cast<const char*>(heap_tid), sizeof(ItemPointerData),
                  v.dim);
    } else {
      const gknn::ivfpq::Quantizer* q = ivfpq_quantizer_get(index, meta);
      Size size = ivfpq_list_item_size(meta);
      char* item = static_cast<char*>(palloc0(size));
      memcpy(item, heap_tid, sizeof(ItemPointerData));
      if (meta.stores_vectors)
        memcpy(item + ivfpq_vector_offset(meta.code_size), v.elements, ivfpq_element_bytes(element, v.dim));
      auto* code = reinterpret_cast<std::uint8_t*>(item + sizeof(ItemPointerData));
      std::int32_t list = -1;
      float* x = static_cast<float*>(palloc(sizeof(float) * v.dim));
      ivfpq_value_floats(element, v, x);
      gknn_pg::core_call([&] { gknn::ivfpq::encode(*q, x, 1, gknn::ivfpq::kCpu, &list, code); });
      if (list < 0 || list >= meta.lists)
        elog(ERROR, "gpu_ivfpq: encode returned list %d of %d", list, meta.lists);
      append_item(index, Chain::List, list, item, size, v.dim);
    }
  }

  MemoryContextSwitchTo(old);
  MemoryContextDelete(tmp);
  return false;
}
