// gpu_ivfpq: what changed in an index since generation `base`, read from the
// metapage's change log and the pages it names (ivfpq_format.h,
// ivfpq_pagemap.h). Its caller holds the metapage's share lock, under which
// no page changes, so the pages read are those of the metapage's generation.
//
// The log proves the changes only when it holds a record for every
// generation after `base`: an index older than its log, a base further back
// than the log's capacity, or a record that is not the one of its slot's
// generation make the caller load the whole image instead, as does a page
// that does not hold what the log says (never trusted: checked first).
#include <cstring>

#include "ivfpq.h"

namespace {

// A changed list page while the log is read: its kind so far, whether
// items were added to it, and the first offset appended.
struct Touched {
  int32 list;
  BlockNumber block;
  uint32 kind;
  bool added_items;
  uint32 first_offset;
};

// Adds record `r` to `pages` (distinct pages, in the order first named).
void note_page(const IvfpqLogRecord& r, Touched* pages, int* npages) {
  Touched* t = nullptr;
  for (int i = 0; i < *npages && t == nullptr; ++i)
    if (pages[i].block == r.block && pages[i].list == r.chain) t = &pages[i];
  if (t == nullptr) {
    t = &pages[(*npages)++];
    *t = Touched{r.chain, r.block, kIvfpqItemsAppended, false, r.offset};
  }
  t->added_items |= r.kind != kIvfpqLogRewrite;
  // A new page carries all its items, whatever happened to it after; a
  // page VACUUM rewrote, only the ids of those it kept, unless items were
  // also added to it (then all of them).
  if (r.kind == kIvfpqLogNewPage)
    t->kind = kIvfpqPageAdded;
  else if (t->kind != kIvfpqPageAdded && (r.kind == kIvfpqLogRewrite || t->kind != kIvfpqItemsAppended))
    t->kind = t->added_items ? kIvfpqPageRewritten : kIvfpqPageShrunk;
}

// The list pages the log names after `base` (null when it cannot prove
// them), and whether the TID-only chains changed.
Touched* read_log(const unsigned char* contents, Size covered, const IvfpqMeta& meta, uint64 base,
                  int* npages, bool* pending_changed, bool* nulls_changed) {
  *npages = 0;
  *pending_changed = *nulls_changed = false;
  if (base > meta.generation || ivfpq_log_problem(contents, covered) != nullptr) return nullptr;
  const IvfpqLogHeader h = ivfpq_log_header(contents);
  if (base < h.from || meta.generation - base > kIvfpqLogCapacity) return nullptr;
  Touched* pages = static_cast<Touched*>(palloc(sizeof(Touched) * Max(meta.generation - base, uint64{1})));
  for (uint64 g = base + 1; g <= meta.generation; ++g) {
    const IvfpqLogRecord* r = ivfpq_log_record(contents, g, meta.trained ? meta.lists : 0);
    if (r == nullptr) return nullptr;
    if (r->chain == kIvfpqChainPending)
      *pending_changed = true;
    else if (r->chain == kIvfpqChainNulls)
      *nulls_changed = true;
    else
      note_page(*r, pages, npages);
  }
  return pages;
}

// Growing arrays of the delta's entries, and of the ids shrunk pages kept.
struct Items {
  int64 n, cap;
  int64* ids;
  uint8* codes;
  char* vectors;  // stored vectors, vector_bytes each
  int64 nkept, kept_cap;
  int64* kept;
};

void reserve(Items* it, int64 more, int code_size, Size vector_bytes) {
  if (it->n + more <= it->cap) return;
  int64 cap = Max(it->cap * 2, it->n + more);
  it->ids = static_cast<int64*>(repalloc_huge(it->ids, sizeof(int64) * cap));
  it->codes = static_cast<uint8*>(repalloc_huge(it->codes, Max(Size(code_size) * cap, Size(1))));
  if (it->vectors) it->vectors = static_cast<char*>(repalloc_huge(it->vectors, vector_bytes * cap));
  it->cap = cap;
}

// The ids of a shrunk page's items, into it->kept.
void read_kept(Page page, OffsetNumber max, Items* it, int64* first) {
  if (it->nkept + max > it->kept_cap) {
    it->kept_cap = Max(it->kept_cap * 2, it->nkept + max);
    it->kept = static_cast<int64*>(repalloc_huge(it->kept, sizeof(int64) * it->kept_cap));
  }
  *first = it->nkept;
  for (OffsetNumber off = FirstOffsetNumber; off <= max; ++off)
    it->kept[it->nkept++] = heap_tid_to_id(ivfpq_item_tid(page, off));
}

// Copies page `t`'s items (all, or appended ones from its first offset, or
// the ids of a shrunk page's) into `it`; false when the page does not hold
// what the log says.
bool read_page(Relation index, const IvfpqMeta& meta, const Touched& t, Items* it, IvfpqPageChange* change,
               BlockNumber* nblocks) {
  const Size vector_bytes = meta.stores_vectors ? ivfpq_element_bytes(ivfpq_meta_element(meta), meta.dim) : 0;
  // A block past the index (as last read, then as now) is a corrupted log.
  if (t.block >= *nblocks && (*nblocks = RelationGetNumberOfBlocks(index)) <= t.block)
    ivfpq_corrupted(index, kIvfpqMetaBlock, "change log names a block past the end of the index");
  Buffer buf = ReadBuffer(index, t.block);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  Page page = BufferGetPage(buf);
  ivfpq_check_list_page(index, t.block, page, ivfpq_list_item_size(meta), nblocks);
  const OffsetNumber max = PageGetMaxOffsetNumber(page);
  if (t.kind == kIvfpqPageShrunk) {
    int64 kept_first;
    read_kept(page, max, it, &kept_first);
    *change = IvfpqPageChange{t.list, t.block, t.kind, FirstOffsetNumber, kept_first, max};
    UnlockReleaseBuffer(buf);
    return true;
  }
  const OffsetNumber first = t.kind == kIvfpqItemsAppended ? t.first_offset : FirstOffsetNumber;
  if (t.kind == kIvfpqItemsAppended && (first < FirstOffsetNumber || first > max)) {
    UnlockReleaseBuffer(buf);
    return false;
  }
  const int64 n = max >= first ? max - first + 1 : 0;
  reserve(it, n, meta.code_size, vector_bytes);
  *change = IvfpqPageChange{t.list, t.block, t.kind, first, it->n, n};
  for (OffsetNumber off = first; off <= max; ++off, ++it->n) {
    it->ids[it->n] = heap_tid_to_id(ivfpq_item_tid(page, off));
    memcpy(it->codes + it->n * meta.code_size, ivfpq_item_code(page, off), meta.code_size);
    if (vector_bytes > 0)
      memcpy(it->vectors + it->n * vector_bytes, ivfpq_item_vector(page, off, meta.code_size), vector_bytes);
  }
  UnlockReleaseBuffer(buf);
  return true;
}

}  // namespace

IvfpqDelta* ivfpq_read_delta(Relation index, Page metapage, const IvfpqMeta& meta, uint64 base,
                             bool with_items) {
  const auto* contents = reinterpret_cast<const unsigned char*>(PageGetContents(metapage));
  const Size lower = reinterpret_cast<PageHeader>(metapage)->pd_lower;
  IvfpqDelta* d = static_cast<IvfpqDelta*>(palloc0(sizeof(IvfpqDelta)));
  int npages;
  Touched* pages = read_log(contents, lower > kIvfpqContentOffset ? lower - kIvfpqContentOffset : 0, meta,
                            base, &npages, &d->pending_changed, &d->nulls_changed);
  if (pages == nullptr) return nullptr;
  d->base = base;
  d->generation = meta.generation;
  if (!with_items) {
    d->nchanges = npages;
    return d;
  }
  IvfpqPageChange* changes = static_cast<IvfpqPageChange*>(palloc(sizeof(IvfpqPageChange) * Max(npages, 1)));
  Items it{0, 16, nullptr, nullptr, nullptr, 0, 16, nullptr};
  it.ids = static_cast<int64*>(palloc(sizeof(int64) * it.cap));
  it.kept = static_cast<int64*>(palloc(sizeof(int64) * it.kept_cap));
  it.codes = static_cast<uint8*>(palloc(Max(Size(meta.code_size) * it.cap, Size(1))));
  if (meta.stores_vectors)
    it.vectors = static_cast<char*>(palloc(ivfpq_element_bytes(ivfpq_meta_element(meta), meta.dim) * it.cap));
  BlockNumber nblocks = 0;
  for (int i = 0; i < npages; ++i)
    if (!read_page(index, meta, pages[i], &it, &changes[i], &nblocks)) return nullptr;
  d->nchanges = npages;
  d->changes = changes;
  d->entries = it.n;
  d->ids = it.ids;
  d->codes = it.codes;
  d->vectors = it.vectors;
  d->nkept = it.nkept;
  d->kept = it.kept;
  return d;
}
