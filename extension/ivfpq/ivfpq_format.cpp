// gpu_ivfpq page checks (ivfpq_format.h), without PostgreSQL: what every
// reader verifies before it follows a block number or copies an item.
#include "ivfpq_format.h"

namespace {

std::uint64_t pages_for(std::uint64_t count, std::uint64_t per_page) {
  return (count + per_page - 1) / per_page;
}

// A chain's end, or a block that exists and is not the metapage.
bool link_ok(std::uint32_t blk, std::uint32_t nblocks) {
  return blk == kIvfpqNoBlock || (blk != kIvfpqMetaBlock && blk < nblocks);
}

// `pages` blocks from `start` on, all past the metapage and inside the index.
bool range_ok(std::uint32_t start, std::uint32_t pages, std::uint32_t nblocks) {
  return start != kIvfpqMetaBlock && std::uint64_t{start} + pages <= nblocks;
}

// ItemPointerData as stored: block number (two uint16 halves, high first),
// then the line pointer's offset number. A scan fetches the heap tuple
// there: block InvalidBlockNumber would be P_NEW to ReadBuffer (it extends
// the table), and offsets are 1..MaxOffsetNumber.
bool heap_tid_ok(const unsigned char* item) {
  std::uint16_t hi, lo, off;
  __builtin_memcpy(&hi, item, 2);
  __builtin_memcpy(&lo, item + 2, 2);
  __builtin_memcpy(&off, item + 4, 2);
  const std::uint32_t blk = std::uint32_t{hi} << 16 | lo;
  return blk != kIvfpqNoBlock && off >= 1 && off <= kIvfpqBlockSize / sizeof(IvfpqLinePointer);
}

// The page's header covers `bytes` of contents.
bool covers(const unsigned char* page, std::size_t bytes) {
  return ivfpq_page_header(page)->lower >= kIvfpqContentOffset + bytes;
}

const char* trained_problem(const IvfpqMeta& meta, std::uint32_t nblocks) {
  if (meta.dim < 1 || meta.dim > kIvfpqMaxDim) return "metapage has an impossible dimension";
  if (meta.lists < 1 || meta.lists > kIvfpqMaxListsOnDisk)
    return "metapage has an impossible number of lists";
  if (meta.m < 1 || meta.dim % meta.m != 0) return "metapage has an impossible m";
  if (meta.nbits < 4 || meta.nbits > 8) return "metapage has an impossible nbits";
  if (meta.kmeans_iters < 1) return "metapage has an impossible kmeans_iters";
  if (meta.code_size != (meta.m * meta.nbits + 7) / 8 || meta.code_size > kIvfpqMaxCodeSize)
    return "metapage has an impossible code size";
  if (meta.stores_vectors != 0 &&
      (meta.stores_vectors != 1 || !ivfpq_vectors_fit(meta.code_size, meta.dim, ivfpq_meta_element(meta))))
    return "metapage has an impossible stores_vectors flag";
  const std::uint64_t centroids = std::uint64_t(meta.lists) * std::uint64_t(meta.dim);
  const std::uint64_t codebooks = std::uint64_t(meta.dim) << meta.nbits;
  if (meta.centroid_pages != pages_for(centroids, kIvfpqFloatsPerPage) ||
      !range_ok(meta.centroid_start, meta.centroid_pages, nblocks))
    return "metapage has impossible centroid pages";
  if (meta.codebook_pages != pages_for(codebooks, kIvfpqFloatsPerPage) ||
      !range_ok(meta.codebook_start, meta.codebook_pages, nblocks))
    return "metapage has impossible codebook pages";
  if (meta.directory_pages != pages_for(std::uint64_t(meta.lists), kIvfpqDirPerPage) ||
      !range_ok(meta.directory_start, meta.directory_pages, nblocks))
    return "metapage has impossible directory pages";
  return nullptr;
}

}  // namespace

const char* ivfpq_meta_problem(const IvfpqMeta& meta, std::uint32_t nblocks) {
  if (meta.magic != kIvfpqMagic) return "metapage has the wrong magic number";
  if (meta.version != kIvfpqVersion && meta.version != kIvfpqVersionTyped)
    return "metapage has another format version";
  if (meta.version == kIvfpqVersionTyped && (meta.element < 0 || meta.element >= kIvfpqElementCount))
    return "metapage has an unknown element type";
  if (meta.metric < 0 || meta.metric >= kIvfpqMetricCount) return "metapage has an unknown metric";
  if (!link_ok(meta.pending_last, nblocks) || !link_ok(meta.null_last, nblocks))
    return "metapage points past the end of the index";
  if (meta.trained == 0)
    return meta.dim < 0 || meta.dim > kIvfpqMaxDim ? "metapage has an impossible dimension" : nullptr;
  if (meta.trained != 1) return "metapage has an impossible trained flag";
  return trained_problem(meta, nblocks);
}

const char* ivfpq_page_problem(const unsigned char* page, IvfpqPageKind kind) {
  const IvfpqPageHeader* h = ivfpq_page_header(page);
  // PageHeaderIsValid, with the special space where PageInit put ours.
  if (h->lower < kIvfpqPageHeaderSize || h->lower > h->upper || h->upper > h->special ||
      h->special != kIvfpqSpecialOffset || h->pagesize_version != (kIvfpqBlockSize | 4))
    return "page header is corrupted";
  const IvfpqPageOpaque* o = ivfpq_page_opaque(page);
  if (o->page_id != kIvfpqPageId) return "page is not a gpu_ivfpq page";
  if (o->kind != kind) {
    switch (kind) {
      case kIvfpqPageMeta:
        return "page is not a metapage";
      case kIvfpqPageFloats:
        return "page is not a quantizer page";
      case kIvfpqPageDirectory:
        return "page is not a directory page";
      case kIvfpqPageList:
        return "page is not a list page";
    }
    return "page is of another kind";
  }
  return nullptr;
}

const char* ivfpq_floats_page_problem(const unsigned char* page, std::size_t floats) {
  if (const char* p = ivfpq_page_problem(page, kIvfpqPageFloats)) return p;
  if (floats > kIvfpqFloatsPerPage || !covers(page, floats * sizeof(float)))
    return "quantizer page holds fewer floats than the metapage says";
  return nullptr;
}

const char* ivfpq_directory_page_problem(const unsigned char* page, std::size_t entries,
                                         std::uint32_t nblocks) {
  if (const char* p = ivfpq_page_problem(page, kIvfpqPageDirectory)) return p;
  if (entries > kIvfpqDirPerPage || !covers(page, entries * sizeof(std::uint32_t)))
    return "directory page holds fewer lists than the metapage says";
  const unsigned char* at = ivfpq_page_contents(page);
  for (std::size_t i = 0; i < entries; ++i) {
    std::uint32_t blk;
    __builtin_memcpy(&blk, at + i * sizeof blk, sizeof blk);
    if (!link_ok(blk, nblocks)) return "directory page points past the end of the index";
  }
  return nullptr;
}

const char* ivfpq_list_page_problem(const unsigned char* page, std::size_t item_size, std::uint32_t nblocks) {
  if (const char* p = ivfpq_page_problem(page, kIvfpqPageList)) return p;
  if (!link_ok(ivfpq_page_opaque(page)->prev, nblocks)) return "list page points past the end of the index";
  const IvfpqPageHeader* h = ivfpq_page_header(page);
  const auto* lp = reinterpret_cast<const IvfpqLinePointer*>(page + kIvfpqPageHeaderSize);
  for (int i = 0, n = ivfpq_page_items(page); i < n; ++i) {
    // Items are read as (TID, code): a TID's fields are 2-byte aligned.
    if (lp[i].flags != kIvfpqLpNormal || lp[i].len != item_size || lp[i].off % 2 != 0 ||
        lp[i].off < h->upper || lp[i].off + lp[i].len > h->special)
      return "list page has a corrupted item";
    if (!heap_tid_ok(page + lp[i].off)) return "list page has an impossible heap TID";
  }
  return nullptr;
}

const char* ivfpq_log_problem(const unsigned char* contents, std::size_t covered) {
  if (covered < kIvfpqMetaContentBytes) return "metapage has no change log";
  const IvfpqLogHeader h = ivfpq_log_header(contents);
  if (h.magic != kIvfpqLogMagic || h.capacity != kIvfpqLogCapacity)
    return "metapage has a corrupted change log";
  return nullptr;
}

const IvfpqLogRecord* ivfpq_log_record(const unsigned char* contents, std::uint64_t generation, int lists) {
  const auto* records =
      reinterpret_cast<const IvfpqLogRecord*>(contents + kIvfpqLogOffset + sizeof(IvfpqLogHeader));
  const IvfpqLogRecord* r = records + generation % kIvfpqLogCapacity;
  if (r->generation != static_cast<std::uint32_t>(generation)) return nullptr;
  if (r->kind != kIvfpqLogAppend && r->kind != kIvfpqLogNewPage && r->kind != kIvfpqLogRewrite)
    return nullptr;
  if (r->chain >= lists || r->chain < kIvfpqChainNulls || r->block == kIvfpqNoBlock ||
      r->block == kIvfpqMetaBlock)
    return nullptr;
  if (r->kind != kIvfpqLogRewrite && r->offset == 0) return nullptr;
  if (r->kind == kIvfpqLogNewPage && r->offset != 1) return nullptr;
  return r;
}
