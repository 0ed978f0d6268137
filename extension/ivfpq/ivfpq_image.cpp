// gpu_ivfpq: per-backend cache of images, keyed by index oid, relfilenode and
// the metapage's generation, and of quantizers (for inserts), keyed by oid and
// relfilenode. An image always has the metapage and the pending and null
// chains (small); its coded entries (the host Image, with the map of the
// pages they came from) are read only when this backend searches on its CPU
// or ships them to the GPU service, which keeps the searchable copy for every
// session. No backend opens a GPU to search.
//
// A newer generation is read as a delta where the metapage's change log
// proves it (ivfpq_delta.cpp): only the pages that changed are read, the
// host Image is brought up to date from them (ivfpq_pagemap.h), and the
// TID-only chains are read again only when they changed. Otherwise (no log,
// too many changes since, a page that disagrees) the image is read whole.
//
// Images live on the C++ heap, owned by this file's static slots (never by a
// stack frame), so an ERROR while one is being filled from pages leaks
// nothing: the half-filled slot is marked invalid and freed on next use.
// A load holds the metapage's share lock from start to end; inserts and
// vacuum change pages only under its exclusive lock, so an image is one
// consistent state of the index.
#include <algorithm>
#include <cstring>

#include "ivfpq.h"

extern "C" {
#include "utils/memutils.h"
}

namespace {

constexpr int kSlots = 8;

struct ImageSlot {
  bool valid;
  Oid oid;
  RelFileNode node;
  uint64 generation;
  uint64 used;
  gknn::ivfpq::Image* host;                // null until asked for (and when untrained)
  IvfpqPageMap* pages;                     // where host's entries came from (with host)
  gknn_service::ExactBoundsCache* bounds;  // host's (with host)
  MemoryContext cxt;                       // pending and null TIDs
  IvfpqImage image;
};

struct QuantizerSlot {
  bool valid;
  Oid oid;
  RelFileNode node;
  uint64 used;
  gknn::ivfpq::Quantizer* q;
};

ImageSlot image_slots[kSlots];
QuantizerSlot quantizer_slots[kSlots];
uint64 clock_tick = 0;

void free_host(ImageSlot* s) {
  gknn::ivfpq::Image* host = s->host;
  IvfpqPageMap* pages = s->pages;
  gknn_service::ExactBoundsCache* bounds = s->bounds;
  s->host = nullptr;
  s->pages = nullptr;
  s->bounds = nullptr;
  s->image.host = nullptr;
  s->image.pages = nullptr;
  s->image.exact_bounds = nullptr;
  s->image.entries = 0;
  gknn_pg::core_call([&] {
    delete host;
    delete pages;
    delete bounds;
  });
}

void free_image_slot(ImageSlot* s) {
  free_host(s);
  s->valid = false;
  if (s->cxt) MemoryContextReset(s->cxt);
}

template <typename Slot>
Slot* pick_slot(Slot* slots, Oid oid) {
  Slot* victim = &slots[0];
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].oid == oid) return &slots[i];
    if (slots[i].used < victim->used) victim = &slots[i];
  }
  return victim;
}

gknn::ivfpq::Params params_of(const IvfpqMeta& meta) {
  gknn::ivfpq::Params p;
  p.dim = meta.dim;
  p.lists = meta.lists;
  p.m = meta.m;
  p.nbits = meta.nbits;
  p.metric = static_cast<gknn::Metric>(meta.metric);
  p.kmeans_iters = meta.kmeans_iters;
  p.seed = meta.seed;
  return p;
}

int64 centroid_floats(const IvfpqMeta& meta) { return static_cast<int64>(meta.lists) * meta.dim; }
int64 codebook_floats(const IvfpqMeta& meta) { return static_cast<int64>(meta.dim) << meta.nbits; }

// Blocks of a chain, first page first.
struct ChainPages {
  BlockNumber* blocks;
  int n;
};

// Blocks of a chain, every page checked as a list page of item_size items
// (ivfpq_chain_next: XX002 on a corrupted page or a loop).
ChainPages chain_pages(Relation index, BlockNumber last, Size item_size) {
  int cap = 16, n = 0;
  BlockNumber* rev = static_cast<BlockNumber*>(palloc(sizeof(BlockNumber) * cap));
  IvfpqChainWalk walk;
  ivfpq_chain_begin(&walk, index, last, item_size);
  for (Buffer buf; BufferIsValid(buf = ivfpq_chain_next(&walk));) {
    if (n == cap) {
      cap *= 2;
      rev = static_cast<BlockNumber*>(repalloc(rev, sizeof(BlockNumber) * cap));
    }
    rev[n++] = BufferGetBlockNumber(buf);
    UnlockReleaseBuffer(buf);
  }
  for (int i = 0; i < n / 2; ++i) std::swap(rev[i], rev[n - 1 - i]);
  return ChainPages{rev, n};
}

int64 page_items(Relation index, BlockNumber blk) {
  Buffer buf = ReadBuffer(index, blk);
  LockBuffer(buf, BUFFER_LOCK_SHARE);
  int64 n = PageGetMaxOffsetNumber(BufferGetPage(buf));
  UnlockReleaseBuffer(buf);
  return n;
}

// Where a chain's items are copied: TIDs, codes (when not null) and stored
// vectors (when not null), in chain order.
struct ChainOut {
  int64* ids;
  uint8* codes;
  int code_size;
  char* vectors;  // vector_dim elements of `element` per item
  int vector_dim;
  IvfpqElement element;
};

int64 read_chain(Relation index, const ChainPages& chain, const ChainOut& out, int64 cap) {
  int64 n = 0;
  BlockNumber nblocks = 0;
  const int code_size = out.code_size;
  const Size vector_bytes = out.vectors ? ivfpq_element_bytes(out.element, out.vector_dim) : 0;
  Size item_size = out.codes ? ivfpq_item_size(code_size, out.vectors ? out.vector_dim : 0, out.element)
                             : ivfpq_item_size(0);
  for (int i = 0; i < chain.n; ++i) {
    Buffer buf = ReadBuffer(index, chain.blocks[i]);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buf);
    // Checked again: the walk saw it, but a page read twice is checked twice.
    ivfpq_check_list_page(index, chain.blocks[i], page, item_size, &nblocks);
    OffsetNumber max = PageGetMaxOffsetNumber(page);
    if (n + max > cap) {
      UnlockReleaseBuffer(buf);
      elog(ERROR, "gpu_ivfpq index \"%s\" changed while it was being loaded", RelationGetRelationName(index));
    }
    for (OffsetNumber off = FirstOffsetNumber; off <= max; ++off) {
      out.ids[n] = heap_tid_to_id(ivfpq_item_tid(page, off));
      if (out.codes) memcpy(out.codes + n * code_size, ivfpq_item_code(page, off), code_size);
      if (out.vectors)
        memcpy(out.vectors + n * vector_bytes, ivfpq_item_vector(page, off, code_size), vector_bytes);
      ++n;
    }
    UnlockReleaseBuffer(buf);
  }
  return n;
}

int64* read_tid_chain(Relation index, BlockNumber last, MemoryContext cxt, int64* count) {
  ChainPages chain = chain_pages(index, last, ivfpq_item_size(0));
  int64 total = 0;
  for (int i = 0; i < chain.n; ++i) total += page_items(index, chain.blocks[i]);
  int64* ids = static_cast<int64*>(MemoryContextAllocHuge(cxt, sizeof(int64) * Max(total, int64{1})));
  *count = read_chain(index, chain, ChainOut{ids, nullptr, 0, nullptr, 0, kIvfpqFloat32}, total);
  return ids;
}

// Fills `s`'s metapage and chains from the pages; the caller holds the
// metapage's share lock.
void load_chains(Relation index, const IvfpqMeta& meta, ImageSlot* s) {
  s->image.meta = meta;
  s->image.host = nullptr;
  s->image.pages = nullptr;
  s->image.exact_bounds = nullptr;
  s->image.entries = 0;
  s->image.pending = read_tid_chain(index, meta.pending_last, s->cxt, &s->image.npending);
  s->image.nulls = read_tid_chain(index, meta.null_last, s->cxt, &s->image.nnulls);
}

// Reads the TID-only chains again where `d` says they changed.
void reload_changed_chains(Relation index, const IvfpqMeta& meta, const IvfpqDelta& d, ImageSlot* s) {
  if (d.pending_changed) {
    pfree(const_cast<int64*>(s->image.pending));
    s->image.pending = read_tid_chain(index, meta.pending_last, s->cxt, &s->image.npending);
  }
  if (d.nulls_changed) {
    pfree(const_cast<int64*>(s->image.nulls));
    s->image.nulls = read_tid_chain(index, meta.null_last, s->cxt, &s->image.nnulls);
  }
}

// Brings `s`'s host Image and page map up to date with `d`; false when the
// delta does not fit them (then the image is read whole).
bool apply_to_host(const IvfpqMeta& meta, const IvfpqDelta& d, ImageSlot* s) {
  bool fits = true;
  gknn::ivfpq::Image* host = s->host;
  IvfpqPageMap* pages = s->pages;
  int code_size = meta.code_size;
  int vector_dim = meta.stores_vectors ? meta.dim : 0;
  IvfpqElement element = ivfpq_meta_element(meta);
  gknn_pg::core_call([&] {
    try {
      IvfpqPageMap next;
      auto read_ids = [&](std::int64_t first, std::int64_t count, std::int64_t* out) {
        if (first < 0 || count < 0 || first + count > static_cast<std::int64_t>(host->ids.size()))
          throw gknn::Error(gknn::ErrorCode::InvalidArgument, "gpu_ivfpq delta: ids past the image");
        std::copy_n(host->ids.data() + first, count, out);
      };
      const gknn::ivfpq::ImageDelta delta =
          ivfpq_plan_changes(*pages, d, code_size, vector_dim, element, read_ids, &next);
      gknn::ivfpq::apply_delta_in_place(*host, delta);
      if (s->bounds) s->bounds->advance(*s->bounds, d.base, delta, *host, d.generation);
      *pages = std::move(next);
    } catch (const gknn::Error& e) {
      if (e.code() != gknn::ErrorCode::InvalidArgument) throw;
      fits = false;
    }
  });
  s->image.entries = fits ? static_cast<int64>(host->ids.size()) : 0;
  return fits;
}

// Brings slot `s` (valid, same relfilenode, an older generation) up to
// `meta`'s generation from the pages the change log names; false when the
// log cannot prove the changes or they do not fit (the caller reads it
// whole). The caller holds the metapage's share lock (`metapage`).
bool refresh_slot(Relation index, Page metapage, const IvfpqMeta& meta, ImageSlot* s) {
  IvfpqDelta* d = ivfpq_read_delta(index, metapage, meta, s->generation, s->host != nullptr);
  if (d == nullptr) return false;
  s->valid = false;  // until it is done (an ERROR leaves it invalid)
  if (s->host != nullptr && !apply_to_host(meta, *d, s)) return false;
  reload_changed_chains(index, meta, *d, s);
  elog(DEBUG1,
       "gpu_ivfpq index \"%s\": image of generation " UINT64_FORMAT " brought to " UINT64_FORMAT
       " from %lld changed list pages%s",
       RelationGetRelationName(index), s->generation, meta.generation, static_cast<long long>(d->nchanges),
       s->host ? "" : " (no entries held)");
  s->image.meta = meta;
  s->generation = meta.generation;
  s->valid = true;
  return true;
}

// Fills `s`'s host Image (a trained index's coded entries) from the pages;
// the caller holds the metapage's share lock.
void load_host(Relation index, const IvfpqMeta& meta, ImageSlot* s) {
  MemoryContext tmp =
      AllocSetContextCreate(CurrentMemoryContext, "gpu_ivfpq image load", ALLOCSET_DEFAULT_SIZES);
  MemoryContext old = MemoryContextSwitchTo(tmp);
  BlockNumber* dir = ivfpq_read_directory(index, meta);
  ChainPages* chains = static_cast<ChainPages*>(palloc(sizeof(ChainPages) * meta.lists));
  int64* counts = static_cast<int64*>(palloc0(sizeof(int64) * meta.lists));
  int64 total = 0, npages = 0;
  for (int l = 0; l < meta.lists; ++l) {
    chains[l] = chain_pages(index, dir[l], ivfpq_list_item_size(meta));
    npages += chains[l].n;
  }
  // Items per page, lists' pages in chain order (the page map).
  uint32* page_counts = static_cast<uint32*>(palloc(sizeof(uint32) * Max(npages, int64{1})));
  for (int l = 0, p = 0; l < meta.lists; ++l)
    for (int i = 0; i < chains[l].n; ++i, ++p) {
      page_counts[p] = static_cast<uint32>(page_items(index, chains[l].blocks[i]));
      counts[l] += page_counts[p];
      total += page_counts[p];
    }

  gknn::ivfpq::Image* host = nullptr;
  IvfpqPageMap* pages = nullptr;
  gknn::ivfpq::Params p = params_of(meta);
  int lists = meta.lists;
  int code_size = meta.code_size;
  int vector_dim = meta.stores_vectors ? meta.dim : 0;
  IvfpqElement element = ivfpq_meta_element(meta);
  int64 nc = centroid_floats(meta), nb = codebook_floats(meta);
  gknn_pg::core_call([&] {
    host = new gknn::ivfpq::Image;
    s->host = host;  // owned by the slot at once: a failed resize leaks nothing
    pages = new IvfpqPageMap;
    s->pages = pages;
    s->bounds = new gknn_service::ExactBoundsCache;
    host->quantizer.params = p;
    host->quantizer.centroids.resize(nc);
    host->quantizer.codebooks.resize(nb);
    host->offsets.resize(lists + 1);
    host->codes.resize(static_cast<size_t>(total) * code_size);
    host->ids.resize(total);
    if (vector_dim > 0 && element == kIvfpqFloat16)
      host->half_vectors.resize(static_cast<size_t>(total) * vector_dim);
    else if (vector_dim > 0 && element == kIvfpqBit)
      host->bit_vectors.resize(static_cast<size_t>(total) * ivfpq_element_bytes(element, vector_dim));
    else if (vector_dim > 0)
      host->vectors.resize(static_cast<size_t>(total) * vector_dim);
    pages->list_pages.resize(lists + 1);
    pages->blocks.resize(npages);
    pages->items.assign(page_counts, page_counts + npages);
  });
  for (int l = 0, p = 0; l < lists; ++l) {
    pages->list_pages[l] = p;
    for (int i = 0; i < chains[l].n; ++i) pages->blocks[p++] = chains[l].blocks[i];
  }
  pages->list_pages[lists] = npages;
  ivfpq_read_floats(index, meta.centroid_start, host->quantizer.centroids.data(), nc);
  ivfpq_read_floats(index, meta.codebook_start, host->quantizer.codebooks.data(), nb);
  int64 at = 0;
  const Size vector_bytes = ivfpq_element_bytes(element, vector_dim);
  char* all_vectors = vector_dim == 0            ? nullptr
                      : element == kIvfpqFloat16 ? reinterpret_cast<char*>(host->half_vectors.data())
                      : element == kIvfpqBit     ? reinterpret_cast<char*>(host->bit_vectors.data())
                                                 : reinterpret_cast<char*>(host->vectors.data());
  for (int l = 0; l < lists; ++l) {
    host->offsets[l] = at;
    ChainOut out{host->ids.data() + at,
                 host->codes.data() + at * code_size,
                 code_size,
                 all_vectors ? all_vectors + at * vector_bytes : nullptr,
                 vector_dim,
                 element};
    int64 n = read_chain(index, chains[l], out, counts[l]);
    if (n != counts[l])
      elog(ERROR, "gpu_ivfpq index \"%s\" changed while it was being loaded", RelationGetRelationName(index));
    at += n;
  }
  host->offsets[lists] = at;
  s->image.host = host;
  s->image.pages = pages;
  s->image.exact_bounds = s->bounds;
  s->image.entries = at;
  MemoryContextSwitchTo(old);
  MemoryContextDelete(tmp);
}

}  // namespace

namespace {

// The image of `index` at its metapage's generation (read whole, or brought
// up to date from the pages that changed); with_host: with its coded
// entries. With `delta`, also what changed since generation `base`, read
// under the same share lock (null when the log cannot prove it).
const IvfpqImage* image_get(Relation index, bool with_host, uint64 base, IvfpqDelta** delta) {
  Oid oid = RelationGetRelid(index);
  ImageSlot* s = pick_slot(image_slots, oid);
  s->used = ++clock_tick;
  if (s->cxt == nullptr)
    s->cxt = AllocSetContextCreate(TopMemoryContext, "gpu_ivfpq image TIDs", ALLOCSET_DEFAULT_SIZES);

  Buffer mbuf = ReadBuffer(index, kIvfpqMetaBlock);
  LockBuffer(mbuf, BUFFER_LOCK_SHARE);
  Page mpage = BufferGetPage(mbuf);
  IvfpqMeta meta;
  memcpy(&meta, ivfpq_meta(mpage), sizeof(meta));
  if (ivfpq_opaque(mpage)->kind != kIvfpqPageMeta) meta.magic = 0;
  ivfpq_check_meta(index, &meta);  // every parameter and block range (XX002)
  bool same = s->valid && s->oid == oid && RelFileNodeEquals(s->node, index->rd_node);
  bool fresh = same && s->generation == meta.generation;
  bool refreshed = !fresh && same && gknn_ivfpq_delta && s->generation < meta.generation &&
                   refresh_slot(index, mpage, meta, s);
  if (!fresh && !refreshed) {
    free_image_slot(s);
    s->oid = oid;
    s->node = index->rd_node;
    load_chains(index, meta, s);
    s->generation = meta.generation;
    s->valid = true;
  }
  // Same lock, same generation: the entries match the chains read above.
  if (with_host && meta.trained && s->host == nullptr) {
    s->valid = false;  // until the load completes (an ERROR leaves it invalid)
    load_host(index, meta, s);
    s->valid = true;
  }
  if (delta) *delta = gknn_ivfpq_delta ? ivfpq_read_delta(index, mpage, meta, base, true) : nullptr;
  UnlockReleaseBuffer(mbuf);
  return &s->image;
}

}  // namespace

const IvfpqImage* ivfpq_image_get(Relation index, bool with_host) {
  return image_get(index, with_host, 0, nullptr);
}

const IvfpqImage* ivfpq_image_get_delta(Relation index, uint64 base, IvfpqDelta** delta) {
  return image_get(index, false, base, delta);
}

void ivfpq_image_release_host(Relation index) {
  Oid oid = RelationGetRelid(index);
  for (ImageSlot& s : image_slots)
    if (s.valid && s.oid == oid) free_host(&s);
}

const gknn::ivfpq::Quantizer* ivfpq_quantizer_get(Relation index, const IvfpqMeta& meta) {
  Oid oid = RelationGetRelid(index);
  QuantizerSlot* s = pick_slot(quantizer_slots, oid);
  s->used = ++clock_tick;
  if (s->valid && s->oid == oid && RelFileNodeEquals(s->node, index->rd_node)) return s->q;
  gknn::ivfpq::Quantizer* q = s->q;
  s->q = nullptr;
  s->valid = false;
  gknn::ivfpq::Params p = params_of(meta);
  int64 nc = centroid_floats(meta), nb = codebook_floats(meta);
  gknn_pg::core_call([&] {
    delete q;
    q = new gknn::ivfpq::Quantizer;
    s->q = q;  // owned by the slot at once (invalid until filled): a failed resize leaks nothing
    q->params = p;
    q->centroids.resize(nc);
    q->codebooks.resize(nb);
  });
  s->oid = oid;
  s->node = index->rd_node;
  ivfpq_read_floats(index, meta.centroid_start, q->centroids.data(), nc);
  ivfpq_read_floats(index, meta.codebook_start, q->codebooks.data(), nb);
  s->valid = true;
  return q;
}
