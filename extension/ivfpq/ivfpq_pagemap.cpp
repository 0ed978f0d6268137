// Changed pages -> the core's splices (ivfpq_pagemap.h). No PostgreSQL.
#include "ivfpq_pagemap.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "gknn/error.h"

namespace {

[[noreturn]] void misfit(const std::string& what) {
  throw gknn::Error(gknn::ErrorCode::InvalidArgument, "gpu_ivfpq delta: " + what);
}

// A splice and where it goes among its list's: by position, then page
// (items appended to a page come before the next page's rewrite at the same
// position, and added pages after everything, in the order added).
struct Placed {
  gknn::ivfpq::Splice splice;
  std::int64_t page;
};

// The splices that remove the old items of a shrunk page (entries [begin,
// begin + n) of the image, `at` in its list) that `kept` (in order) lacks.
void shrink(const IvfpqReadIds& read_ids, std::int64_t begin, std::int64_t n, std::int64_t at,
            const std::int64_t* kept, std::int64_t nkept, int l, std::int64_t page,
            std::vector<Placed>& out) {
  std::vector<std::int64_t> old(n);
  if (n > 0) read_ids(begin, n, old.data());
  if (std::unordered_set<std::int64_t>(old.begin(), old.end()).size() != old.size())
    misfit("list " + std::to_string(l) + ": a shrunk page whose items are not distinct");
  std::int64_t i = 0;  // the next old item
  for (std::int64_t k = 0; k <= nkept; ++k) {
    // Old items up to the next kept one (or the end) are gone.
    const std::int64_t from = i;
    if (k < nkept)
      while (i < n && old[i] != kept[k]) ++i;
    else
      i = n;
    if (k < nkept && i == n) misfit("list " + std::to_string(l) + ": a shrunk page keeps an item it lacked");
    if (i > from) {
      gknn::ivfpq::Splice s;
      s.list = l;
      s.at = at + from;
      s.remove = i - from;
      out.push_back(Placed{s, page});
    }
    ++i;  // past the kept item
  }
}

// The splices of list l's changes (`mine`, in log order; the list's first
// entry is entry `list_start` of the image), and the list's pages after them
// appended to `next`.
void plan_list(const IvfpqPageMap& map, int l, std::int64_t list_start,
               const std::vector<const IvfpqPageChange*>& mine, const IvfpqDelta& delta,
               const IvfpqReadIds& read_ids, std::vector<Placed>& out, IvfpqPageMap& next) {
  const std::int64_t entries = delta.entries;
  const std::int64_t p0 = map.list_pages[l], np = map.list_pages[l + 1] - p0;
  std::vector<std::int64_t> start(np + 1, 0);
  for (std::int64_t j = 0; j < np; ++j) start[j + 1] = start[j] + map.items[p0 + j];
  std::vector<std::uint32_t> items(map.items.begin() + p0, map.items.begin() + p0 + np);
  std::vector<std::uint32_t> blocks(map.blocks.begin() + p0, map.blocks.begin() + p0 + np);
  std::vector<bool> changed(np, false);
  const std::string where = "list " + std::to_string(l) + ": ";
  for (const IvfpqPageChange* c : mine) {
    const std::int64_t carried = c->kind == kIvfpqPageShrunk ? delta.nkept : entries;
    if (c->first < 0 || c->count < 0 || c->count > carried - c->first) misfit(where + "items past the delta");
    const std::int64_t j = std::find(blocks.begin(), blocks.end(), c->block) - blocks.begin();
    const bool known = j < static_cast<std::int64_t>(blocks.size());
    gknn::ivfpq::Splice s;
    s.list = l;
    s.first = c->first;
    s.count = c->count;
    if (c->kind == kIvfpqPageAdded) {
      if (known) misfit(where + "an added page it already has");
      s.at = start[np];
      blocks.push_back(c->block);
      items.push_back(static_cast<std::uint32_t>(c->count));
      changed.push_back(true);
    } else {
      if (!known) misfit(where + "a changed page it does not have");
      if (j >= np || changed[j]) misfit(where + "a page changed twice");
      if (c->kind == kIvfpqPageRewritten) {
        s.at = start[j];
        s.remove = items[j];
        items[j] = static_cast<std::uint32_t>(c->count);
      } else if (c->kind == kIvfpqPageShrunk) {
        if (c->count > items[j]) misfit(where + "a shrunk page that grew");
        shrink(read_ids, list_start + start[j], items[j], start[j], delta.kept + c->first, c->count, l, j,
               out);
        items[j] = static_cast<std::uint32_t>(c->count);
        changed[j] = true;
        continue;
      } else if (c->kind == kIvfpqItemsAppended) {
        if (c->first_offset != items[j] + 1u) misfit(where + "appended items that do not follow the page's");
        s.at = start[j] + items[j];
        items[j] += static_cast<std::uint32_t>(c->count);
      } else {
        misfit(where + "an unknown change");
      }
      changed[j] = true;
    }
    out.push_back(Placed{s, j});
  }
  next.blocks.insert(next.blocks.end(), blocks.begin(), blocks.end());
  next.items.insert(next.items.end(), items.begin(), items.end());
}

// Items of list l's pages.
std::int64_t list_items(const IvfpqPageMap& map, int l) {
  std::int64_t n = 0;
  for (std::int64_t p = map.list_pages[l]; p < map.list_pages[l + 1]; ++p) n += map.items[p];
  return n;
}

// The delta's stored vectors (n rows of `element`) into the core delta's
// array of that element type.
void copy_rows(const void* rows, std::size_t n, int dim, IvfpqElement element, gknn::ivfpq::ImageDelta& out) {
  const std::size_t elements = element == kIvfpqBit ? ivfpq_element_bytes(element, dim) : std::size_t(dim);
  if (element == kIvfpqFloat16) {
    const auto* r = static_cast<const std::uint16_t*>(rows);
    out.half_vectors.assign(r, r + n * elements);
  } else if (element == kIvfpqBit) {
    const auto* r = static_cast<const std::uint8_t*>(rows);
    out.bit_vectors.assign(r, r + n * elements);
  } else {
    const auto* r = static_cast<const float*>(rows);
    out.vectors.assign(r, r + n * elements);
  }
}

}  // namespace

void ivfpq_check_page_map(const IvfpqPageMap& map, const std::vector<std::int64_t>& offsets) {
  if (offsets.empty()) misfit("an image without offsets");
  const std::size_t lists = offsets.size() - 1;
  if (map.list_pages.size() != lists + 1 || map.list_pages.front() != 0 ||
      map.list_pages.back() != static_cast<std::int64_t>(map.blocks.size()) ||
      map.items.size() != map.blocks.size())
    misfit("a page map of another shape than its image");
  for (std::size_t l = 0; l < lists; ++l) {
    if (map.list_pages[l + 1] < map.list_pages[l]) misfit("a page map whose lists go backwards");
    if (list_items(map, static_cast<int>(l)) != offsets[l + 1] - offsets[l])
      misfit("a page map that does not count its image's entries");
  }
}

gknn::ivfpq::ImageDelta ivfpq_plan_changes(const IvfpqPageMap& map, const IvfpqDelta& delta, int code_size,
                                           int dim, IvfpqElement element, const IvfpqReadIds& read_ids,
                                           IvfpqPageMap* next) {
  const int lists = static_cast<int>(map.list_pages.size()) - 1;
  std::vector<std::vector<const IvfpqPageChange*>> by_list(lists);
  for (std::int64_t i = 0; i < delta.nchanges; ++i) {
    const IvfpqPageChange& c = delta.changes[i];
    if (c.list < 0 || c.list >= lists) misfit("a change of list " + std::to_string(c.list));
    by_list[c.list].push_back(&c);
  }
  gknn::ivfpq::ImageDelta out;
  IvfpqPageMap after;
  after.list_pages.assign(lists + 1, 0);
  std::int64_t list_start = 0;  // the image's first entry of list l
  for (int l = 0; l < lists; list_start += list_items(map, l), ++l) {
    after.list_pages[l] = static_cast<std::int64_t>(after.blocks.size());
    if (by_list[l].empty()) {
      after.blocks.insert(after.blocks.end(), map.blocks.begin() + map.list_pages[l],
                          map.blocks.begin() + map.list_pages[l + 1]);
      after.items.insert(after.items.end(), map.items.begin() + map.list_pages[l],
                         map.items.begin() + map.list_pages[l + 1]);
      continue;
    }
    std::vector<Placed> placed;
    plan_list(map, l, list_start, by_list[l], delta, read_ids, placed, after);
    std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
      return a.splice.at != b.splice.at ? a.splice.at < b.splice.at : a.page < b.page;
    });
    for (const Placed& p : placed) out.splices.push_back(p.splice);
  }
  after.list_pages[lists] = static_cast<std::int64_t>(after.blocks.size());
  const std::size_t n = static_cast<std::size_t>(delta.entries);
  out.ids.assign(delta.ids, delta.ids + n);
  out.codes.assign(delta.codes, delta.codes + n * code_size);
  if (delta.vectors) copy_rows(delta.vectors, n, dim, element, out);
  *next = std::move(after);
  return out;
}
