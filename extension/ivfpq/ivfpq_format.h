// gpu_ivfpq's page format and the checks a reader runs on a page before
// trusting anything in it, free of PostgreSQL headers: the extension's
// readers (ivfpq_pages.cpp, ivfpq_chain.cpp) call these checks on every page
// they read and raise XX002 (index corrupted) with the problem they name,
// and fuzz/ivfpq_pages_fuzz.cpp runs the same checks on corrupted pages.
// PostgreSQL's page header and line pointers are mirrored here as stored;
// ivfpq_pages.cpp asserts that the mirror is PostgreSQL's layout.
//
// The layout (ivfpq_pages.h has the longer story):
//   block 0            metapage (IvfpqMeta)
//   centroid pages     lists x dim floats, packed over contiguous blocks
//   codebook pages     dim x 2^nbits floats, contiguous blocks
//   directory pages    one block number per list: the list's last page
//   list pages         items (heap TID + PQ code [+ the vector, format 2]),
//                      chained backwards
#pragma once

#include <cstddef>
#include <cstdint>

constexpr std::uint32_t kIvfpqMagic = 0x47495650;  // "GIVP"
// Version 2 stores each entry's vector in its list item where an item with it
// fits a page (IvfpqMeta::stores_vectors), for the exact re-rank without the
// heap; its elements are floats (vector columns). Version 3 is the same
// format with the element type named in IvfpqMeta::element (halfvec
// indexes store binary16 elements, bit indexes bit strings); vector indexes
// are still written as version 2, so a gknn that reads only version 2
// refuses only the others.
constexpr std::uint32_t kIvfpqVersion = 2;
constexpr std::uint32_t kIvfpqVersionTyped = 3;

// The element type of the vectors an index stores (and of its column).
enum IvfpqElement : std::int32_t {
  kIvfpqFloat32 = 0,  // vector: float
  kIvfpqFloat16 = 1,  // halfvec: IEEE binary16, 2 bytes
  kIvfpqBit = 2,      // bit: a bit string, ceil(dim / 8) bytes as PostgreSQL stores it
};
constexpr int kIvfpqElementCount = 3;
constexpr std::uint32_t kIvfpqMetaBlock = 0;
constexpr std::uint16_t kIvfpqPageId = 0xFF8A;       // in every page's special space
constexpr std::uint32_t kIvfpqNoBlock = 0xFFFFFFFF;  // InvalidBlockNumber: a chain's end

enum IvfpqPageKind : std::uint16_t {
  kIvfpqPageMeta = 1,
  kIvfpqPageFloats = 2,
  kIvfpqPageDirectory = 3,
  kIvfpqPageList = 4,
};

// The special space of every page.
struct IvfpqPageOpaque {
  std::uint32_t prev;     // list pages: the page before this one in its chain
  std::uint16_t kind;     // IvfpqPageKind
  std::uint16_t page_id;  // kIvfpqPageId
};

struct IvfpqMeta {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t trained;  // 0: no quantizer yet (built on no rows): inserts go to `pending`
  std::int32_t dim;      // 0 while unknown (untrained, column without typmod)
  std::int32_t lists;    // after clamping to the rows
  std::int32_t m;
  std::int32_t nbits;
  std::int32_t metric;  // gknn::Metric
  std::int32_t kmeans_iters;
  std::int32_t code_size;  // bytes of one PQ code
  std::uint64_t seed;
  std::uint64_t generation;  // bumped by every change after the build
  std::uint32_t centroid_start;
  std::uint32_t centroid_pages;
  std::uint32_t codebook_start;
  std::uint32_t codebook_pages;
  std::uint32_t directory_start;
  std::uint32_t directory_pages;
  std::uint32_t pending_last;   // TID-only chain: rows inserted while untrained
  std::uint32_t null_last;      // TID-only chain: rows whose vector is NULL
  std::int64_t build_rows;      // non-NULL vectors seen by the build
  std::int64_t sample_rows;     // rows the quantizer was trained on
  std::int32_t stores_vectors;  // list items carry the full vector (dim elements)
  // IvfpqElement (version 3; version 2's are float, and older ones left
  // these bytes as the struct's padding): read it through ivfpq_meta_element.
  std::int32_t element;
};
// The size of version 2's metapage, whose padding `element` took.
static_assert(sizeof(IvfpqMeta) == 112, "the metapage's layout is on disk");

inline IvfpqElement ivfpq_meta_element(const IvfpqMeta& meta) {
  return meta.version == kIvfpqVersion ? kIvfpqFloat32 : static_cast<IvfpqElement>(meta.element);
}
// The version an index of this element type is written with.
constexpr std::uint32_t ivfpq_version_for(IvfpqElement element) {
  return element == kIvfpqFloat32 ? kIvfpqVersion : kIvfpqVersionTyped;
}
// Bytes of one stored vector of `dim` elements.
constexpr std::size_t ivfpq_element_bytes(IvfpqElement element, int dim) {
  return element == kIvfpqBit ? (static_cast<std::size_t>(dim) + 7) / 8
                              : (element == kIvfpqFloat16 ? 2 : 4) * static_cast<std::size_t>(dim);
}

// The change log: a ring of records in the metapage after IvfpqMeta, one per
// generation, written in the same Generic WAL record as the change and the
// generation's bump, so that a cached image of generation g can be brought
// to the current one by reading only the pages that changed (ivfpq_delta.cpp).
// A change to a list chain names the page: an item appended to the chain's
// last page (its offset), a new last page started with an item, or a page
// rewritten by VACUUM without its dead items. Record g sits in slot
// g % capacity; the log covers (from, generation] when generation - from <=
// capacity. Indexes written before the log have none (the metapage's
// pd_lower ends before it) until an insert starts one.
constexpr std::uint32_t kIvfpqLogMagic = 0x474C4F47;  // "GLOG"
constexpr std::uint32_t kIvfpqLogCapacity = 448;
constexpr std::int32_t kIvfpqChainPending = -1;  // a change to the pending chain
constexpr std::int32_t kIvfpqChainNulls = -2;    // a change to the NULL chain

enum IvfpqLogKind : std::uint16_t {
  kIvfpqLogAppend = 1,   // an item added at `offset` of the chain's last page
  kIvfpqLogNewPage = 2,  // a new last page `block`, its first item at `offset` 1
  kIvfpqLogRewrite = 3,  // VACUUM rewrote `block` without its dead items
};

struct IvfpqLogRecord {
  std::uint32_t generation;  // low 32 bits of the generation it made
  std::int32_t chain;        // list number, kIvfpqChainPending or kIvfpqChainNulls
  std::uint32_t block;
  std::uint16_t offset;  // kIvfpqLogAppend / NewPage: the item's offset number
  std::uint16_t kind;    // IvfpqLogKind
};

struct IvfpqLogHeader {
  std::uint32_t magic;     // kIvfpqLogMagic
  std::uint32_t capacity;  // kIvfpqLogCapacity
  std::uint64_t from;      // every generation after this one has its record
};

// PostgreSQL's page: BLCKSZ bytes, a 24-byte header, line pointers after it,
// items from pd_upper up, the special space from pd_special to the end.
constexpr std::size_t kIvfpqBlockSize = 8192;
constexpr std::size_t ivfpq_maxalign(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

struct IvfpqPageHeader {  // PageHeaderData
  std::uint32_t lsn_hi, lsn_lo;
  std::uint16_t checksum;
  std::uint16_t flags;
  std::uint16_t lower;  // end of the line pointers (start of free space)
  std::uint16_t upper;  // start of the items
  std::uint16_t special;
  std::uint16_t pagesize_version;
  std::uint32_t prune_xid;
};
constexpr std::size_t kIvfpqPageHeaderSize = 24;  // SizeOfPageHeaderData

struct IvfpqLinePointer {  // ItemIdData, the same bit fields
  unsigned off : 15, flags : 2, len : 15;
};
constexpr unsigned kIvfpqLpNormal = 1;  // LP_NORMAL

constexpr std::size_t kIvfpqContentOffset = ivfpq_maxalign(kIvfpqPageHeaderSize);  // PageGetContents
constexpr std::size_t kIvfpqSpecialOffset = kIvfpqBlockSize - ivfpq_maxalign(sizeof(IvfpqPageOpaque));
// Bytes of page contents between the header and the special space.
constexpr std::size_t kIvfpqContentBytes = kIvfpqSpecialOffset - kIvfpqContentOffset;
// Where the log sits in the metapage's contents, and the bytes up to its end.
constexpr std::size_t kIvfpqLogOffset = ivfpq_maxalign(sizeof(IvfpqMeta));
constexpr std::size_t kIvfpqMetaContentBytes =
    kIvfpqLogOffset + sizeof(IvfpqLogHeader) + kIvfpqLogCapacity * sizeof(IvfpqLogRecord);
static_assert(kIvfpqMetaContentBytes <= kIvfpqContentBytes, "the change log fits the metapage");
constexpr std::size_t kIvfpqFloatsPerPage = kIvfpqContentBytes / sizeof(float);
constexpr std::size_t kIvfpqDirPerPage = kIvfpqContentBytes / sizeof(std::uint32_t);
constexpr std::size_t kIvfpqTidBytes = 6;  // ItemPointerData
// The largest code that fits on a page with room for a few items.
constexpr int kIvfpqMaxCodeSize = static_cast<int>(kIvfpqContentBytes / 4) - 16;

// A list item with a stored vector: TID, code, then dim elements from a
// 4-byte boundary. Whether such items fit a page (then the index stores
// vectors: up to about 2,000 float or 4,000 binary16 dimensions; bit
// strings always, within 16,000 bits).
constexpr std::size_t ivfpq_vector_item_bytes(int code_size, int dim, IvfpqElement element) {
  return ((kIvfpqTidBytes + code_size + 3) & ~std::size_t{3}) + ivfpq_element_bytes(element, dim);
}
constexpr bool ivfpq_vectors_fit(int code_size, int dim, IvfpqElement element) {
  return ivfpq_maxalign(ivfpq_vector_item_bytes(code_size, dim, element)) + sizeof(std::uint32_t) <=
         kIvfpqContentBytes;
}

// The limits of what a build writes (checked again on every read).
constexpr int kIvfpqMaxDim = 16000;
constexpr int kIvfpqMaxListsOnDisk = 1 << 20;
constexpr int kIvfpqMetricCount = 3;  // L2, inner product, cosine

// ---- checks: each returns null when the page can be read as asked, else
// what is wrong with it (a static string). None reads outside the page. ----

// The metapage's contents: magic, version and parameters that agree with
// one another; the quantizer and directory pages inside [1, nblocks).
const char* ivfpq_meta_problem(const IvfpqMeta& meta, std::uint32_t nblocks);

// A page of `kind`: PostgreSQL's header bounds, gpu_ivfpq's special space.
const char* ivfpq_page_problem(const unsigned char* page, IvfpqPageKind kind);

// A quantizer page holding `floats` floats (its header must cover them).
const char* ivfpq_floats_page_problem(const unsigned char* page, std::size_t floats);

// A directory page holding `entries` block numbers, each a chain end or a
// block in [1, nblocks).
const char* ivfpq_directory_page_problem(const unsigned char* page, std::size_t entries,
                                         std::uint32_t nblocks);

// A list page whose items are all `item_size` bytes (TID + code [+ vector]) inside the
// page's item space, and whose back link is a chain end or in [1, nblocks).
const char* ivfpq_list_page_problem(const unsigned char* page, std::size_t item_size, std::uint32_t nblocks);

// The metapage's change log (`contents`: the page's contents, of which its
// header covers `covered` bytes): null when it is there and well formed,
// else why not (an index without one, or a corrupted one: either way its
// changes cannot be read from it).
const char* ivfpq_log_problem(const unsigned char* contents, std::size_t covered);

// The header of a well-formed log.
inline IvfpqLogHeader ivfpq_log_header(const unsigned char* contents) {
  IvfpqLogHeader h;
  __builtin_memcpy(&h, contents + kIvfpqLogOffset, sizeof h);
  return h;
}

// The record of `generation` in a well-formed log, or null when the slot
// does not hold it (or it is not a record a writer makes: unknown kind, a
// list past `lists`, an offset of none).
const IvfpqLogRecord* ivfpq_log_record(const unsigned char* contents, std::uint64_t generation, int lists);

// ---- reading a page that passed its check ----

inline const IvfpqPageHeader* ivfpq_page_header(const unsigned char* page) {
  return reinterpret_cast<const IvfpqPageHeader*>(page);
}
inline const IvfpqPageOpaque* ivfpq_page_opaque(const unsigned char* page) {
  return reinterpret_cast<const IvfpqPageOpaque*>(page + kIvfpqSpecialOffset);
}
inline const unsigned char* ivfpq_page_contents(const unsigned char* page) {
  return page + kIvfpqContentOffset;
}
// PageGetMaxOffsetNumber.
inline int ivfpq_page_items(const unsigned char* page) {
  const std::uint16_t lower = ivfpq_page_header(page)->lower;
  return lower <= kIvfpqPageHeaderSize
             ? 0
             : static_cast<int>((lower - kIvfpqPageHeaderSize) / sizeof(IvfpqLinePointer));
}
// Item i (0-based; PostgreSQL's offset number i + 1).
inline const unsigned char* ivfpq_page_item(const unsigned char* page, int i) {
  const auto* lp = reinterpret_cast<const IvfpqLinePointer*>(page + kIvfpqPageHeaderSize) + i;
  return page + lp->off;
}
