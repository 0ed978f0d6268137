// libFuzzer target: the checks every gpu_ivfpq page reader runs
// (extension/ivfpq/ivfpq_format.cpp) before it trusts a page.
//
// The input describes a small, valid index (dimension, m, nbits, lists,
// items per chain), which is built page by page as ambuild lays it out,
// then corrupted by the rest of the input (bytes overwritten in headers,
// line pointers, the special space, the metapage and its change log,
// anywhere; or whole pages of input bytes). The readers of the extension are
// replayed on it: the metapage, the change log and the pages it names, the
// quantizer pages, the directory, every chain (lists, pending,
// NULLs) walked back to its first page and its items copied out, and
// PageAddItem's sanity test on a chain's last page as aminsert meets it.
// Each page lives in its own 8 KiB heap block, so ASan reports any read
// past a page; whatever a check lets through must be readable, and a
// corrupted page may only be refused (an ERROR XX002 in the server).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ivfpq/ivfpq_format.h"

namespace {

using Page = std::unique_ptr<unsigned char[]>;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "ivfpq_pages_fuzz: %s\n", what);
  __builtin_trap();
}

IvfpqPageHeader* header(unsigned char* page) { return reinterpret_cast<IvfpqPageHeader*>(page); }

// Pages are 8 KiB heap blocks (ASan's redzones around each) kept from one
// input to the next: freeing and zeroing fresh ones made the allocator hand
// memory back to the kernel and fault it in again, most of the run time.
std::vector<Page> spare;

Page fresh_page() {
  if (spare.empty()) return Page(new unsigned char[kIvfpqBlockSize]());
  Page p = std::move(spare.back());
  spare.pop_back();
  std::memset(p.get(), 0, kIvfpqBlockSize);
  return p;
}

// PageInit plus gpu_ivfpq's special space (ivfpq_init_page).
Page new_page(IvfpqPageKind kind, std::uint32_t prev) {
  Page p = fresh_page();
  IvfpqPageHeader* h = header(p.get());
  h->lower = kIvfpqPageHeaderSize;
  h->upper = h->special = kIvfpqSpecialOffset;
  h->pagesize_version = kIvfpqBlockSize | 4;
  IvfpqPageOpaque o{prev, kind, kIvfpqPageId};
  std::memcpy(p.get() + kIvfpqSpecialOffset, &o, sizeof o);
  return p;
}

void set_contents_size(unsigned char* page, std::size_t bytes) {
  header(page)->lower = static_cast<std::uint16_t>(kIvfpqContentOffset + bytes);
}

// PageAddItem's test before it touches a page (a PANIC in the server).
bool add_item_would_panic(const unsigned char* page) {
  const IvfpqPageHeader* h = ivfpq_page_header(page);
  return h->lower < kIvfpqPageHeaderSize || h->lower > h->upper || h->upper > h->special ||
         h->special > kIvfpqBlockSize;
}

// PageAddItem at the end, as the build and inserts add items.
bool add_item(unsigned char* page, const unsigned char* item, std::size_t len) {
  IvfpqPageHeader* h = header(page);
  const std::size_t aligned = ivfpq_maxalign(len);
  if (h->upper < aligned || h->upper - aligned < h->lower + sizeof(IvfpqLinePointer)) return false;
  h->upper = static_cast<std::uint16_t>(h->upper - aligned);
  IvfpqLinePointer lp{h->upper, kIvfpqLpNormal, static_cast<unsigned>(len)};
  std::memcpy(page + h->lower, &lp, sizeof lp);
  h->lower = static_cast<std::uint16_t>(h->lower + sizeof lp);
  std::memcpy(page + h->upper, item, len);
  return true;
}

struct Index {
  std::vector<Page> pages;
  Index() = default;
  Index(Index&&) = default;
  ~Index() {
    for (Page& p : pages) spare.push_back(std::move(p));
  }
  std::uint32_t append(Page p) {
    pages.push_back(std::move(p));
    return static_cast<std::uint32_t>(pages.size() - 1);
  }
};

// Items of one chain written as the build writes them, pages holding at
// most per_page items (vacuum leaves pages part empty); returns its last page.
std::uint32_t write_chain(Index& ix, FuzzedDataProvider& in, int items, std::size_t item_size) {
  std::uint32_t last = kIvfpqNoBlock;
  Page page;
  std::vector<unsigned char> item(item_size);
  int per_page = in.ConsumeBool() ? 1 << 16 : in.ConsumeIntegralInRange<int>(1, 8);
  if (items > 8 * per_page) per_page = 1 << 16;  // at most 8 part-empty pages (speed)
  for (int i = 0, on_page = 0; i < items; ++i, ++on_page) {
    if (page && on_page == per_page) {
      last = ix.append(std::move(page));
      on_page = 0;
    }
    const std::uint32_t blk = in.ConsumeIntegralInRange<std::uint32_t>(0, 100000);
    const std::uint16_t tid[3] = {static_cast<std::uint16_t>(blk >> 16), static_cast<std::uint16_t>(blk),
                                  in.ConsumeIntegralInRange<std::uint16_t>(1, 291)};
    std::memcpy(item.data(), tid, kIvfpqTidBytes);
    for (std::size_t b = kIvfpqTidBytes; b < item_size; ++b) item[b] = in.ConsumeIntegral<unsigned char>();
    if (!page) page = new_page(kIvfpqPageList, last);
    if (!add_item(page.get(), item.data(), item_size)) {  // full
      last = ix.append(std::move(page));
      page = new_page(kIvfpqPageList, last);
      add_item(page.get(), item.data(), item_size);
      on_page = 0;
    }
  }
  if (page) last = ix.append(std::move(page));
  return last;
}

std::uint32_t write_floats(Index& ix, std::size_t count, std::uint32_t* npages) {
  std::uint32_t first = kIvfpqNoBlock;
  *npages = 0;
  for (std::size_t done = 0; done < count; ++*npages) {
    const std::size_t n = count - done < kIvfpqFloatsPerPage ? count - done : kIvfpqFloatsPerPage;
    Page p = new_page(kIvfpqPageFloats, kIvfpqNoBlock);
    for (std::size_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(done + i);
      std::memcpy(p.get() + kIvfpqContentOffset + i * sizeof x, &x, sizeof x);
    }
    set_contents_size(p.get(), n * sizeof(float));
    const std::uint32_t blk = ix.append(std::move(p));
    if (first == kIvfpqNoBlock) first = blk;
    done += n;
  }
  return first;
}

// The metapage's change log, as inserts write it: a few items appended to
// chains' last pages `last` (list l's, or the NULL chain's for -1; the
// generation counts them).
void write_log(Index& ix, FuzzedDataProvider& in, IvfpqMeta& meta, const std::vector<std::uint32_t>& last) {
  unsigned char* contents = ix.pages[0].get() + kIvfpqContentOffset;
  const IvfpqLogHeader h{kIvfpqLogMagic, kIvfpqLogCapacity, meta.generation};
  std::memcpy(contents + kIvfpqLogOffset, &h, sizeof h);
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n; ++i) {
    const int chain = meta.trained ? in.ConsumeIntegralInRange<int>(0, meta.lists - 1) : kIvfpqChainNulls;
    const std::uint32_t block = chain >= 0 ? last[chain] : meta.null_last;
    if (block == kIvfpqNoBlock) continue;
    const std::uint64_t g = ++meta.generation;
    const IvfpqLogRecord r{static_cast<std::uint32_t>(g), chain, block, 1, kIvfpqLogAppend};
    std::memcpy(contents + kIvfpqLogOffset + sizeof h + (g % kIvfpqLogCapacity) * sizeof r, &r, sizeof r);
  }
}

// The size of a list item of an index with this metapage, as
// ivfpq_list_item_size (ivfpq_pages.h) computes it: TID + code [+ the
// vector's elements from a 4-byte boundary].
std::size_t list_item_size(const IvfpqMeta& meta) {
  return meta.stores_vectors ? ivfpq_vector_item_bytes(meta.code_size, meta.dim, ivfpq_meta_element(meta))
                             : kIvfpqTidBytes + meta.code_size;
}

// A valid index of the input's shape.
Index build(FuzzedDataProvider& in) {
  Index ix;
  ix.append(new_page(kIvfpqPageMeta, kIvfpqNoBlock));
  IvfpqMeta meta;
  std::memset(&meta, 0, sizeof meta);
  meta.magic = kIvfpqMagic;
  // float (version 2), binary16 or bit strings (version 3, the element named)
  const auto element = static_cast<IvfpqElement>(in.ConsumeIntegralInRange<int>(0, kIvfpqElementCount - 1));
  meta.version = ivfpq_version_for(element);
  meta.element = element;
  meta.metric = in.ConsumeIntegralInRange<int>(0, kIvfpqMetricCount - 1);
  meta.generation = 1;
  meta.centroid_start = meta.codebook_start = meta.directory_start = kIvfpqNoBlock;
  meta.trained = in.ConsumeIntegralInRange<int>(0, 3) != 0;
  // Now and then a chain that fills pages (677 TIDs to a page).
  const int tid_items =
      in.ConsumeIntegralInRange<int>(0, 15) == 0 ? 1400 : in.ConsumeIntegralInRange<int>(0, 40);
  if (meta.trained) {
    meta.m = in.ConsumeIntegralInRange<int>(1, 4);
    meta.dim = meta.m * in.ConsumeIntegralInRange<int>(1, 2);
    meta.nbits = in.ConsumeIntegralInRange<int>(4, 8);
    meta.lists = in.ConsumeIntegralInRange<int>(1, 6);
    meta.kmeans_iters = 10;
    meta.code_size = (meta.m * meta.nbits + 7) / 8;
    meta.stores_vectors = in.ConsumeBool() && ivfpq_vectors_fit(meta.code_size, meta.dim, element);
    meta.centroid_start =
        write_floats(ix, static_cast<std::size_t>(meta.lists) * meta.dim, &meta.centroid_pages);
    meta.codebook_start =
        write_floats(ix, static_cast<std::size_t>(meta.dim) << meta.nbits, &meta.codebook_pages);
    Page dir = new_page(kIvfpqPageDirectory, kIvfpqNoBlock);
    std::vector<std::uint32_t> last(meta.lists);
    for (auto& l : last) l = write_chain(ix, in, in.ConsumeIntegralInRange<int>(0, 40), list_item_size(meta));
    std::memcpy(dir.get() + kIvfpqContentOffset, last.data(), last.size() * sizeof(std::uint32_t));
    set_contents_size(dir.get(), last.size() * sizeof(std::uint32_t));
    meta.directory_pages = 1;
    meta.directory_start = ix.append(std::move(dir));
    meta.null_last = write_chain(ix, in, tid_items, kIvfpqTidBytes);
    meta.pending_last = kIvfpqNoBlock;
    write_log(ix, in, meta, last);
  } else {
    meta.dim = in.ConsumeIntegralInRange<int>(0, 16);
    meta.pending_last = write_chain(ix, in, tid_items, kIvfpqTidBytes);
    meta.null_last = write_chain(ix, in, in.ConsumeIntegralInRange<int>(0, 20), kIvfpqTidBytes);
    write_log(ix, in, meta, {});
  }
  std::memcpy(ix.pages[0].get() + kIvfpqContentOffset, &meta, sizeof meta);
  set_contents_size(ix.pages[0].get(), kIvfpqMetaContentBytes);
  return ix;
}

// Overwrites bytes where corruption does the most harm, or anywhere.
void corrupt(Index& ix, FuzzedDataProvider& in) {
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n && in.remaining_bytes() > 0; ++i) {
    unsigned char* page = ix.pages[in.ConsumeIntegralInRange<std::size_t>(0, ix.pages.size() - 1)].get();
    std::size_t at;
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:  // page header
        at = in.ConsumeIntegralInRange<std::size_t>(0, kIvfpqPageHeaderSize - 1);
        break;
      case 1:  // line pointers
        at = kIvfpqPageHeaderSize + in.ConsumeIntegralInRange<std::size_t>(0, 64);
        break;
      case 2:  // special space
        at = in.ConsumeIntegralInRange<std::size_t>(kIvfpqSpecialOffset, kIvfpqBlockSize - 1);
        break;
      case 3:  // metapage fields, directory entries, first floats
        at = kIvfpqContentOffset + in.ConsumeIntegralInRange<std::size_t>(0, sizeof(IvfpqMeta) - 1);
        break;
      case 5:  // the metapage's change log
        at = kIvfpqContentOffset + kIvfpqLogOffset +
             in.ConsumeIntegralInRange<std::size_t>(0, sizeof(IvfpqLogHeader) + 16 * sizeof(IvfpqLogRecord));
        break;
      case 4:  // whole page from the input
        for (std::size_t b = 0; b < kIvfpqBlockSize; ++b) page[b] = in.ConsumeIntegral<unsigned char>();
        continue;
      default:
        at = in.ConsumeIntegralInRange<std::size_t>(0, kIvfpqBlockSize - 1);
    }
    const std::size_t len = in.ConsumeIntegralInRange<std::size_t>(1, 4);
    for (std::size_t b = 0; b < len && at + b < kIvfpqBlockSize; ++b)
      page[at + b] = in.ConsumeIntegral<unsigned char>();
  }
  // Sometimes a page goes missing: the index is shorter than its metapage says.
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0 && ix.pages.size() > 1) {
    spare.push_back(std::move(ix.pages.back()));
    ix.pages.pop_back();
  }
}

// ivfpq_read_delta: the change log back from the metapage's generation (as
// far as it proves the changes), and the list pages it names, checked before
// their items are read. False where the server raises XX002.
bool read_log(const Index& ix, const IvfpqMeta& meta) {
  const std::uint32_t nblocks = static_cast<std::uint32_t>(ix.pages.size());
  const unsigned char* metapage = ix.pages[kIvfpqMetaBlock].get();
  const unsigned char* contents = ivfpq_page_contents(metapage);
  if (ivfpq_log_problem(contents, ivfpq_page_header(metapage)->lower - kIvfpqContentOffset)) return true;
  const IvfpqLogHeader h = ivfpq_log_header(contents);
  const std::size_t item_size = meta.trained ? list_item_size(meta) : kIvfpqTidBytes;
  std::vector<unsigned char> items;
  for (std::uint64_t g = meta.generation; g > h.from && meta.generation - g < kIvfpqLogCapacity; --g) {
    const IvfpqLogRecord* r = ivfpq_log_record(contents, g, meta.trained ? meta.lists : 0);
    if (r == nullptr) return true;  // not proven: the image is read whole
    if (r->chain < 0) continue;     // TID chains are read whole
    if (r->block >= nblocks) return false;
    const unsigned char* page = ix.pages[r->block].get();
    if (ivfpq_list_page_problem(page, item_size, nblocks)) return false;
    const int n = ivfpq_page_items(page);
    for (int i = r->kind == kIvfpqLogRewrite ? 0 : r->offset - 1; i >= 0 && i < n; ++i) {
      const unsigned char* item = ivfpq_page_item(page, i);
      items.insert(items.end(), item, item + item_size);
    }
  }
  return true;
}

// The extension's readers, in the order a scan's image load and an insert
// run them. Returns false where the server raises XX002.
bool read_index(const Index& ix) {
  const std::uint32_t nblocks = static_cast<std::uint32_t>(ix.pages.size());
  const unsigned char* metapage = ix.pages[kIvfpqMetaBlock].get();
  if (ivfpq_page_problem(metapage, kIvfpqPageMeta)) return false;  // ivfpq_read_meta
  if (ivfpq_page_header(metapage)->lower < kIvfpqContentOffset + sizeof(IvfpqMeta)) return false;
  IvfpqMeta meta;
  std::memcpy(&meta, ivfpq_page_contents(metapage), sizeof meta);
  if (ivfpq_meta_problem(meta, nblocks)) return false;  // ivfpq_check_meta
  if (!read_log(ix, meta)) return false;

  std::vector<std::uint32_t> heads;  // chain heads and their item sizes
  std::vector<std::size_t> sizes;
  if (meta.trained) {
    // ivfpq_read_floats, into buffers of exactly the metapage's sizes
    const std::size_t counts[2] = {static_cast<std::size_t>(meta.lists) * meta.dim,
                                   static_cast<std::size_t>(meta.dim) << meta.nbits};
    const std::uint32_t starts[2] = {meta.centroid_start, meta.codebook_start};
    for (int q = 0; q < 2; ++q) {
      std::unique_ptr<float[]> dst(new float[counts[q]]);
      std::uint32_t blk = starts[q];
      for (std::size_t done = 0; done < counts[q]; ++blk) {
        if (blk >= nblocks) fail("quantizer pages past the end passed the metapage check");
        const std::size_t n = counts[q] - done < kIvfpqFloatsPerPage ? counts[q] - done : kIvfpqFloatsPerPage;
        if (ivfpq_floats_page_problem(ix.pages[blk].get(), n)) return false;
        std::memcpy(dst.get() + done, ivfpq_page_contents(ix.pages[blk].get()), n * sizeof(float));
        done += n;
      }
    }
    // ivfpq_read_directory
    std::unique_ptr<std::uint32_t[]> dir(new std::uint32_t[meta.lists]);
    for (std::uint32_t p = 0; p < meta.directory_pages; ++p) {
      const std::uint32_t blk = meta.directory_start + p;
      if (blk >= nblocks) fail("directory pages past the end passed the metapage check");
      const std::size_t first = p * kIvfpqDirPerPage;
      const std::size_t n = meta.lists - first < kIvfpqDirPerPage ? meta.lists - first : kIvfpqDirPerPage;
      if (ivfpq_directory_page_problem(ix.pages[blk].get(), n, nblocks)) return false;
      std::memcpy(dir.get() + first, ivfpq_page_contents(ix.pages[blk].get()), n * sizeof(std::uint32_t));
    }
    for (int l = 0; l < meta.lists; ++l) {
      heads.push_back(dir[l]);
      sizes.push_back(list_item_size(meta));
    }
  }
  heads.push_back(meta.pending_last);
  heads.push_back(meta.null_last);
  sizes.push_back(kIvfpqTidBytes);
  sizes.push_back(kIvfpqTidBytes);

  // ivfpq_chain_next over every chain; items copied out as the image load does.
  for (std::size_t c = 0; c < heads.size(); ++c) {
    std::vector<unsigned char> items;
    std::uint32_t pages = 0;
    for (std::uint32_t blk = heads[c]; blk != kIvfpqNoBlock;) {
      if (blk >= nblocks || blk == kIvfpqMetaBlock)
        fail("followed a link that its check should have refused");
      const unsigned char* page = ix.pages[blk].get();
      if (ivfpq_list_page_problem(page, sizes[c], nblocks)) return false;
      if (++pages > nblocks) return false;  // a loop
      if (pages == 1 && add_item_would_panic(page)) fail("a checked chain end would make PageAddItem PANIC");
      for (int i = 0, n = ivfpq_page_items(page); i < n; ++i) {
        const unsigned char* item = ivfpq_page_item(page, i);
        items.insert(items.end(), item, item + sizes[c]);
      }
      blk = ivfpq_page_opaque(page)->prev;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool corrupted = in.ConsumeBool();
  Index ix = build(in);
  if (corrupted) {
    corrupt(ix, in);
  } else if (!read_index(ix)) {
    fail("refused an index as the build writes it");
  }
  read_index(ix);
  return 0;
}
