// The GPU service's GpuTopK table cache (service_topk_cache.h): entries
// filled by the first session that needs them (or gknn_cache_table()),
// probed by every later one, ranked where they are.
//
// Why a session may rank a block's kept rows without reading the block
// (PostgreSQL 15: visibilitymap.c, heapam.c, pruneheap.c, vacuumlazy.c):
//
// 1. Filling. For each visibility map (VM) page, the backend reads its LSN
//    (under the VM buffer's share lock) BEFORE the heap pages it covers; a
//    heap page is kept when, under its buffer's share lock, its VM
//    all-visible bit and PD_ALL_VISIBLE are both set: then every tuple on
//    it is visible to every snapshot (not a standby's: no cache in
//    recovery), so all its LP_NORMAL tuples are the rows, and its LSN is
//    recorded with them.
// 2. Clearing. Every change of a heap page's tuples on a WAL-logged table
//    (heap_insert, heap_multi_insert, heap_update on both pages,
//    heap_delete) clears PD_ALL_VISIBLE and the VM bit, in the critical
//    section that changes the page, under its exclusive lock:
//    visibilitymap_clear() flips the bit and dirties the VM page without
//    touching its LSN. Pruning only removes tuples that no snapshot sees,
//    which an all-visible page has none of; heap_lock_tuple() (and the
//    lock heap_update() takes on the old tuple before it moves it) clears
//    only the all-frozen bit and changes no row; freezing changes no row's
//    visibility. The one change that keeps the bit: heap_multi_insert()
//    with HEAP_INSERT_FROZEN (COPY FREEZE) adds frozen rows to an
//    all-visible page. COPY FREEZE needs a table created or truncated in
//    its own transaction, i.e. a relfilenode made there; such a relation is
//    never cached (below), and no entry of that relfilenode can exist
//    before that transaction commits, so the rows it adds are there when
//    any entry of it is filled.
// 3. Setting. visibilitymap_set() changes a bit only through a new WAL
//    record (log_heap_visible; outside recovery recptr is always invalid
//    on entry) and sets the VM page's LSN to it, under the VM buffer's
//    exclusive lock; that LSN is newer than any LSN read before it.
// So for a VM page whose LSN still equals the one recorded (read with its
// bits under one share lock), a block whose bit is set has not been changed
// since it was kept: a change would have cleared the bit, and setting it
// again would have moved the page's LSN. Any other kept block (bit clear,
// or a VM page whose LSN moved, e.g. after a VACUUM set other bits) falls
// back to the page check: its page, under the share lock, must still be
// all-visible with the recorded LSN (LSNs only grow). Blocks that fail it
// are marked changed for good, and the segments holding them are read from
// the heap by every session after. Once every kept block under a VM page
// with a newer LSN has been checked, that LSN is recorded in place of the
// old one: a block whose bit is set under it was set before the bits were
// read, and any change since would have cleared it.
//
// What is never cached (the backend decides, topk_cache_usable): unlogged
// and temporary tables, tables created or given a new relfilenode in the
// current transaction (no WAL under wal_level = minimal; COPY FREEZE),
// recovery, SERIALIZABLE (the heap scan takes the predicate locks),
// old_snapshot_threshold set (a page read raises "snapshot too old"),
// parallel plans and quals run in PostgreSQL. TRUNCATE, VACUUM FULL, CLUSTER
// and rewrites give a new relfilenode (the old entries are dropped at the
// next probe of the table); a table shorter than its entry (VACUUM
// truncated it) drops the entry. The rows a query selects are then fetched
// by TID under its snapshot, as without the cache.
//
// A block's rows live in exactly one segment (the backend ends a kept batch
// before a page whose rows do not fit), so excluding a segment reads its
// blocks from the heap and nothing twice. An entry whose kept blocks are
// far fewer than the all-visible blocks the VM shows now (changes, then a
// VACUUM) is filled again by the session that finds it so.
#include "service_topk_cache.h"

#include <algorithm>
#include <cstring>

#include "gknn/error.h"

extern "C" {
#include "storage/spin.h"
}

namespace gknn_service {
namespace {

bool same_key(const TopKCacheKey& a, const TopKCacheKey& b) {
  if (a.database != b.database || a.relation != b.relation || a.spc != b.spc || a.db != b.db ||
      a.rel != b.rel || a.ncolumns != b.ncolumns)
    return false;
  for (int c = 0; c < a.ncolumns; ++c)
    if (a.attnos[c] != b.attnos[c] || a.columns[c].type != b.columns[c].type ||
        a.columns[c].dim != b.columns[c].dim)
      return false;
  return true;
}

bool same_table(const TopKCacheKey& a, const TopKCacheKey& b) {
  return a.database == b.database && a.relation == b.relation;
}

bool same_file(const TopKCacheKey& a, const TopKCacheKey& b) {
  return a.spc == b.spc && a.db == b.db && a.rel == b.rel;
}

bool bit(const std::uint8_t* bits, std::int64_t b) { return (bits[b >> 3] >> (b & 7)) & 1; }

std::int64_t popcount(const std::uint8_t* bits, std::int64_t n) {
  std::int64_t c = 0;
  for (std::int64_t i = 0; i < n / 8; ++i) c += __builtin_popcount(bits[i]);
  for (std::int64_t b = n / 8 * 8; b < n; ++b) c += bit(bits, b);
  return c;
}

}  // namespace

TopKCache& topk_cache() {
  static TopKCache* cache = new TopKCache();
  return *cache;
}

std::int64_t TopKCache::bytes() const {
  std::int64_t n = 0;
  for (const auto& e : entries_) n += e->reserved;
  return n;
}

void TopKCache::drop(const std::shared_ptr<CacheEntry>& e) {
  entries_.remove(e);  // a session still using it keeps it until it ends
}

bool TopKCache::evict_one(const CacheEntry* keep) {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    const std::shared_ptr<CacheEntry>& e = *it;
    if (e.get() == keep || e.use_count() > 1 || !e->ready) continue;  // in use, or being filled
    entries_.erase(std::next(it).base());
    ++evictions_;
    return true;
  }
  return false;
}

bool TopKCache::set_budget(std::int64_t bytes) {
  if (bytes == budget_) return false;
  budget_ = bytes;
  if (budget_ <= 0) {
    reset();
    return true;
  }
  while (this->bytes() > budget_ && evict_one(nullptr)) {
  }
  return true;
}

void TopKCache::probe(ResidentImages& images, const TopKWireProgram& head, const std::uint64_t* vm_lsn,
                      const std::uint8_t* bits, int device, std::uint64_t session, std::int64_t now_us,
                      CacheUse* use, std::uint8_t* map, std::int64_t map_bytes) {
  use->state = kCacheNone;
  if (budget_ <= 0 || head.vm_span <= 0) return;
  // Entries of an older relfilenode of the table are never usable again.
  for (auto it = entries_.begin(); it != entries_.end();)
    it = same_table((*it)->key, head.key) && !same_file((*it)->key, head.key) ? entries_.erase(it)
                                                                              : std::next(it);
  std::shared_ptr<CacheEntry> e;
  for (const auto& x : entries_)
    if (same_key(x->key, head.key) && x->device == device) e = x;
  if (e && e->ready && (e->nblocks > head.nblocks || e->vm_span != head.vm_span)) {
    drop(e);  // the table was truncated (or the entry is of another build)
    e.reset();
  }
  if (e && (!e->ready || e->capacity != head.capacity)) return;  // being filled, or another batch size
  if (e && e->nblocks <= map_bytes) {
    std::int64_t kept = 0;
    use->vm_now.assign(vm_lsn, vm_lsn + head.nvm);
    use->checks.clear();
    for (std::int64_t b = 0; b < e->nblocks; ++b) {
      if (e->lsn[b] == 0 || e->changed[b]) {
        map[b] = kBlockHeap;
        continue;
      }
      ++kept;
      const std::int64_t v = b / e->vm_span;
      const bool fresh = v < head.nvm && static_cast<std::size_t>(v) < e->vm_lsn.size() &&
                         vm_lsn[v] == e->vm_lsn[v] && bit(bits, b);
      map[b] = fresh ? kBlockCached : kBlockCheck;
      if (!fresh) use->checks.push_back(static_cast<std::uint32_t>(b));
    }
    // Far more all-visible blocks than it keeps: fill it again.
    const std::int64_t visible = popcount(bits, head.nblocks);
    if (visible <= kept + kept / 4 + 8) {
      use->entry = e;
      use->state = kCacheHit;
      use->check_lsn.assign(use->checks.size(), 0);
      e->hits++;
      e->last_used_us = now_us;
      entries_.remove(e);
      entries_.push_front(e);
      return;
    }
    use->checks.clear();
    drop(e);
  } else if (e) {
    return;  // a map larger than the session's buffer: not for this session
  }
  auto fill = std::make_shared<CacheEntry>();
  fill->key = head.key;
  fill->device = device;
  fill->capacity = head.capacity;
  fill->filler = session;
  fill->nblocks = head.nblocks;
  fill->vm_span = head.vm_span;
  fill->lsn.assign(head.nblocks, 0);
  fill->changed.assign(head.nblocks, 0);
  fill->vm_lsn.assign(head.nvm, 0);
  fill->owner = &images;
  fill->last_used_us = now_us;
  entries_.push_front(fill);
  use->entry = fill;
  use->state = kCacheFill;
}

bool TopKCache::room_for(const CacheUse& use, std::int64_t bytes) {
  if (use.state != kCacheFill || !use.entry || use.entry->ready) return false;
  while (this->bytes() + bytes > budget_)
    if (!evict_one(use.entry.get())) return false;
  return true;
}

bool TopKCache::keep(ResidentImages& images, CacheUse* use,
                     std::unique_ptr<gknn::expr::ResidentBatches> store, std::uint32_t first,
                     std::uint32_t last) {
  CacheEntry* e = use->entry.get();
  if (use->state != kCacheFill || !e || e->ready || !store) {
    abandon(use);
    return false;
  }
  const bool ordered = e->segments.empty() || first > e->segments.back().last;
  const std::int64_t bytes = static_cast<std::int64_t>(store->bytes());
  if (!ordered || last < first || last >= e->nblocks || this->bytes() + bytes > budget_ ||
      !images.reserve(e->device, bytes)) {
    abandon(use);
    return false;
  }
  e->reserved += bytes;
  CacheSegment seg;
  seg.rows = store->rows();
  seg.store = std::move(store);
  seg.first = first;
  seg.last = last;
  e->rows += seg.rows;
  e->segments.push_back(std::move(seg));
  return true;
}

void TopKCache::meta(CacheUse* use, int section, std::int64_t from, const std::uint64_t* lsn,
                     std::int64_t n) {
  CacheEntry* e = use->entry.get();
  if (use->state != kCacheFill || !e || e->ready) return;
  std::vector<std::uint64_t>& to = section == 0 ? e->lsn : e->vm_lsn;
  if (from < 0 || n < 0 || from > static_cast<std::int64_t>(to.size()) ||
      n > static_cast<std::int64_t>(to.size()) - from)
    throw gknn::Error(gknn::ErrorCode::InvalidArgument, "GpuTopK cache: LSNs past the table");
  std::copy(lsn, lsn + n, to.begin() + from);
}

bool TopKCache::commit(CacheUse* use, std::int64_t now_us) {
  CacheEntry* e = use->entry.get();
  if (use->state != kCacheFill || !e || e->ready) return false;
  // The blocks a segment starts and ends with were kept (their LSNs shipped).
  for (const CacheSegment& s : e->segments)
    if (e->lsn[s.first] == 0 || e->lsn[s.last] == 0) {
      abandon(use);
      return false;
    }
  e->kept_blocks = 0;
  for (std::uint64_t l : e->lsn) e->kept_blocks += l != 0;
  e->ready = true;
  e->filler = 0;
  e->built_us = e->last_used_us = now_us;
  use->state = kCacheNone;  // its batches from now on are the heap's
  use->entry.reset();
  return true;
}

void TopKCache::abandon(CacheUse* use) {
  if (use->entry && !use->entry->ready) drop(use->entry);
  use->entry.reset();
  use->state = kCacheNone;
}

void TopKCache::check(CacheUse* use, std::int64_t from, const std::uint64_t* lsn, std::int64_t n) {
  if (use->state != kCacheHit || from < 0 || n < 0 || from > static_cast<std::int64_t>(use->checks.size()) ||
      n > static_cast<std::int64_t>(use->checks.size()) - from)
    throw gknn::Error(gknn::ErrorCode::InvalidArgument, "GpuTopK cache: page checks past the list");
  std::copy(lsn, lsn + n, use->check_lsn.begin() + from);
}

void TopKCache::finish_checks(CacheUse* use, std::uint8_t* map, std::int64_t map_bytes) {
  CacheEntry& e = *use->entry;
  if (use->state != kCacheHit || e.nblocks > map_bytes)
    throw gknn::Error(gknn::ErrorCode::InvalidArgument, "GpuTopK cache: checks without a hit");
  for (std::size_t i = 0; i < use->checks.size(); ++i) {
    const std::uint32_t b = use->checks[i];
    if (use->check_lsn[i] != e.lsn[b] && !e.changed[b]) {
      e.changed[b] = 1;
      e.changed_blocks++;
    }
  }
  // Every kept block under a map page whose LSN moved was checked just now.
  for (std::size_t v = 0; v < use->vm_now.size() && v < e.vm_lsn.size(); ++v)
    if (use->vm_now[v] > e.vm_lsn[v]) e.vm_lsn[v] = use->vm_now[v];
  for (std::int64_t b = 0; b < e.nblocks; ++b)
    map[b] = e.lsn[b] != 0 && !e.changed[b] ? kBlockCached : kBlockHeap;
  use->ranked.clear();
  use->rows = 0;
  for (const CacheSegment& s : e.segments) {
    bool whole = true;
    for (std::uint32_t b = s.first; b <= s.last && whole; ++b) whole = !(e.lsn[b] != 0 && e.changed[b]);
    if (whole) {
      use->ranked.push_back(s.store.get());
      use->rows += s.rows;
      continue;
    }
    for (std::uint32_t b = s.first; b <= s.last; ++b) map[b] = kBlockHeap;
  }
}

int TopKCache::reset() {
  int n = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!(*it)->ready) {  // a fill in progress ends with its session
      ++it;
      continue;
    }
    it = entries_.erase(it);
    ++n;
  }
  return n;
}

int TopKCache::forget(std::uint32_t database, std::uint32_t relation, std::int64_t before_us) {
  int n = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const CacheEntry& e = **it;
    const bool match = e.ready && (database == 0 || e.key.database == database) &&
                       (relation == 0 || e.key.relation == relation) && e.built_us <= before_us;
    if (!match) {
      ++it;
      continue;
    }
    it = entries_.erase(it);
    ++n;
  }
  return n;
}

void TopKCache::publish(ServiceShared* ctl) const {
  SpinLockAcquire(&ctl->mutex);
  int n = 0;
  for (const auto& e : entries_) {
    if (n == kMaxShownCache) break;
    ShownCacheEntry& sh = ctl->cache[n++];
    sh.database = e->key.database;
    sh.relation = e->key.relation;
    sh.node.spcNode = e->key.spc;
    sh.node.dbNode = e->key.db;
    sh.node.relNode = e->key.rel;
    sh.ncolumns = e->key.ncolumns;
    for (int c = 0; c < e->key.ncolumns && c < 32; ++c) {
      sh.attnos[c] = e->key.attnos[c];
      sh.types[c] = static_cast<int32>(e->key.columns[c].type);
      sh.dims[c] = e->key.columns[c].dim;
    }
    sh.device = e->device;
    sh.ready = e->ready;
    sh.rows = e->rows;
    sh.bytes = e->reserved;
    sh.blocks = e->kept_blocks - e->changed_blocks;
    sh.segments = static_cast<std::int64_t>(e->segments.size());
    sh.excluded_blocks = e->changed_blocks;
    sh.hits = e->hits;
    sh.built_us = e->built_us;
    sh.last_used_us = e->last_used_us;
  }
  ctl->ncache = n;
  ctl->cache_bytes = bytes();
  ctl->cache_budget = budget_;
  ctl->cache_evictions = evictions_;
  SpinLockRelease(&ctl->mutex);
}

}  // namespace gknn_service
