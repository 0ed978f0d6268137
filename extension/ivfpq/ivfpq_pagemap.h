// Where the items of a gpu_ivfpq index's list pages sit in its image, and
// how the pages that changed since an image was made turn into the core's
// splices (gknn/ivfpq_delta.h). Free of PostgreSQL: the backend
// (ivfpq_image.cpp) and the GPU service (service_delta.cpp) keep a map
// beside every image they hold and bring both up to date together.
//
// An image holds each list's entries in chain order (first page first, items
// in offset order), which is the order every reader makes and the order the
// search breaks ties by. Pages change in three ways only (the change log,
// ivfpq_format.h): items appended to a chain's last page, a new last page,
// and a page rewritten by VACUUM without its dead items. So a changed page
// is a run of entries at a known place: its old items are replaced by its
// items now, or its new items follow its old ones, or (a page only VACUUM
// changed) some of its old items are gone: then only the ids of the items
// it keeps travel, and the others are found missing among the image's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gknn/ivfpq_delta.h"
#include "ivfpq_format.h"

struct IvfpqPageMap {
  std::vector<std::int64_t> list_pages;  // lists + 1: list l's pages are [list_pages[l], list_pages[l + 1])
  std::vector<std::uint32_t> blocks;     // each list's pages in chain order
  std::vector<std::uint32_t> items;      // items on each page
};

enum IvfpqChangeKind : std::uint32_t {
  kIvfpqItemsAppended = 1,  // items added to a page the image holds, from first_offset on
  kIvfpqPageRewritten = 2,  // a page the image holds, all its items now
  kIvfpqPageAdded = 3,      // a page new to the chain (at its end), all its items
  kIvfpqPageShrunk = 4,     // a page the image holds that lost items: the ids of those it kept
};

// One changed page of a list's chain, and the delta's entries that carry
// its items: [first, first + count) (of `kept` for a shrunk page).
struct IvfpqPageChange {
  std::int32_t list;
  std::uint32_t block;
  std::uint32_t kind;          // IvfpqChangeKind
  std::uint32_t first_offset;  // kIvfpqItemsAppended: the offset number of the first item carried
  std::int64_t first, count;
};

// The changes of an index from generation `base` to `generation`, with the
// items they carry (plain arrays: the backend keeps them in palloc'd memory,
// the service reads them from a shipped segment). Changes are in the order
// the change log first names their pages (so added pages in chain order).
struct IvfpqDelta {
  std::uint64_t base, generation;
  bool pending_changed, nulls_changed;  // the TID-only chains (read again whole)
  std::int64_t nchanges;
  const IvfpqPageChange* changes;
  std::int64_t entries;
  const std::int64_t* ids;
  const std::uint8_t* codes;  // entries x code size
  const void* vectors;        // entries x the element type's row, or null (the index stores none)
  std::int64_t nkept;
  const std::int64_t* kept;  // ids of the items shrunk pages kept, page after page
};

// Reads `count` ids of an image's entries from position `first` on (list
// order; the host Image's ids, or a DeviceImage's).
using IvfpqReadIds = std::function<void(std::int64_t first, std::int64_t count, std::int64_t* out)>;

// Throws gknn::Error(InvalidArgument) unless `map` describes an image whose
// lists start at `offsets` (one entry per item).
void ivfpq_check_page_map(const IvfpqPageMap& map, const std::vector<std::int64_t>& offsets);

// The core's delta that brings an image laid out as `map` up to date with
// `delta` (the entries copied from it; stored vectors of dim elements of
// `element`), and *next, the map after it. Throws
// gknn::Error(InvalidArgument) when a change does not fit the map (a page
// appended to or rewritten that the map lacks, an added page it has, an
// append that does not follow the page's items, a page changed twice): the
// image is then not the delta's base, and must be loaded whole. A shrunk
// page's items are found among the image's (read_ids): its kept ids must be
// a subsequence of the page's old ones, which must be distinct.
gknn::ivfpq::ImageDelta ivfpq_plan_changes(const IvfpqPageMap& map, const IvfpqDelta& delta, int code_size,
                                           int dim, IvfpqElement element, const IvfpqReadIds& read_ids,
                                           IvfpqPageMap* next);
