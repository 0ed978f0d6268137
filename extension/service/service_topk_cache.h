// The GPU service's GpuTopK table cache (service_topk_cache.cpp): one entry
// per (database, table, relfilenode, columns), shared by every session:
// the rows of the table's all-visible pages, in heap-block order, kept as
// segments of whole blocks (gknn::expr::ResidentBatches on the service's
// device, or in its memory for gknn.service = cpu), each block's page LSN
// and each visibility map page's LSN as the entry was filled. Why a
// session may trust a block of an entry without reading it is written at
// the top of service_topk_cache.cpp. Main thread only; the segments of a
// usable entry never change, so executor tasks rank them while the main
// thread goes on. Internal to extension/service/.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "gknn/expr.h"
#include "service_images.h"
#include "service_shmem.h"
#include "service_topk_wire.h"

namespace gknn_service {

// Rows of whole heap blocks [first, last], kept as one batch was ranked.
struct CacheSegment {
  std::unique_ptr<gknn::expr::ResidentBatches> store;
  std::uint32_t first = 0, last = 0;
  std::int64_t rows = 0;
};

struct CacheEntry {
  TopKCacheKey key;
  int device = -1;
  std::int64_t capacity = 0;  // rows per batch of the sessions that rank it
  bool ready = false;         // false: being filled by session `filler`
  std::uint64_t filler = 0;
  std::int64_t nblocks = 0;  // the table's blocks when filled
  std::int64_t vm_span = 0;  // heap blocks per visibility map page
  std::vector<CacheSegment> segments;
  std::vector<std::uint64_t> lsn;     // per block: its page LSN when kept (0: not kept)
  std::vector<std::uint8_t> changed;  // per block: found changed since (never trusted again)
  std::vector<std::uint64_t> vm_lsn;  // per map page: its LSN when filled, or when last verified
  std::int64_t kept_blocks = 0, changed_blocks = 0;  // blocks kept, and those of them found changed
  std::int64_t rows = 0, reserved = 0, hits = 0, built_us = 0, last_used_us = 0;
  ResidentImages* owner = nullptr;  // whose budget `reserved` counts in
  ~CacheEntry() {
    if (owner && reserved > 0) owner->release(device, reserved);
  }
};

// What a probe decided for a session, and what the session keeps of it.
struct CacheUse {
  std::shared_ptr<CacheEntry> entry;  // kept alive while the session lives
  TopKCacheState state = kCacheNone;
  std::vector<std::uint64_t> vm_now;  // the map pages' LSNs the session read
  std::vector<std::uint32_t> checks;  // blocks whose page it checks
  std::vector<std::uint64_t> check_lsn;
  std::vector<const gknn::expr::ResidentBatches*> ranked;  // the segments the final map keeps
  std::int64_t rows = 0;                                   // their rows
};

class TopKCache {
 public:
  // Bytes the entries may take (gknn.topk_cache_mb): a smaller budget evicts
  // the least recently used entries no session uses; 0 drops them all.
  // True when it changed.
  bool set_budget(std::int64_t bytes);
  std::int64_t budget() const { return budget_; }
  std::int64_t bytes() const;

  // A session's probe (the program's header and its arrays, checked by the
  // caller): use->state says whether the session fills a new entry, ranks
  // an existing one (then `map` gets one TopKCacheBlock per block of the
  // entry, and use->checks the blocks whose page the session must check),
  // or neither. `device`, `capacity`: the session's.
  void probe(ResidentImages& images, const TopKWireProgram& head, const std::uint64_t* vm_lsn,
             const std::uint8_t* bits, int device, std::uint64_t session, std::int64_t now_us, CacheUse* use,
             std::uint8_t* map, std::int64_t map_bytes);

  // A filling session's kept batch: room for `bytes` more (least recently
  // used entries that no session uses are evicted), or false (the fill is
  // given up). keep() then adds the kept rows (blocks first..last) as a
  // segment, counting their bytes under gknn.gpu_memory_limit; false gives
  // the fill up.
  bool room_for(const CacheUse& use, std::int64_t bytes);
  bool keep(ResidentImages& images, CacheUse* use, std::unique_ptr<gknn::expr::ResidentBatches> store,
            std::uint32_t first, std::uint32_t last);
  // The fill's LSNs (section 0: blocks, 1: map pages), then its commit:
  // false when the fill was given up (or the arrays do not fit the entry).
  void meta(CacheUse* use, int section, std::int64_t from, const std::uint64_t* lsn, std::int64_t n);
  bool commit(CacheUse* use, std::int64_t now_us);
  // Drops a fill that did not commit (the session ended, failed, gave up).
  void abandon(CacheUse* use);

  // A hit's page checks: `n` LSNs of use->checks from `from` on (0: the
  // page is not all-visible any more). finish_checks() marks the blocks
  // whose LSN moved as changed, records the map pages it verified, and
  // writes the final map (kBlockCached: ranked from the entry, kBlockHeap:
  // read from the heap) over `map`; use->ranked gets the segments kept.
  void check(CacheUse* use, std::int64_t from, const std::uint64_t* lsn, std::int64_t n);
  void finish_checks(CacheUse* use, std::uint8_t* map, std::int64_t map_bytes);

  // Drops every entry (sessions using one keep it until they end); how many.
  int reset();
  // Drops the usable entries of `relation` of `database` (every relation
  // when 0; every database when `database` is 0) filled at or before
  // `before_us`: the table was dropped. How many.
  int forget(std::uint32_t database, std::uint32_t relation, std::int64_t before_us);
  // The entries into the shared block, for gknn_topk_cache().
  void publish(ServiceShared* ctl) const;

 private:
  bool evict_one(const CacheEntry* keep);
  void drop(const std::shared_ptr<CacheEntry>& e);

  std::int64_t budget_ = 0;
  std::int64_t evictions_ = 0;
  std::list<std::shared_ptr<CacheEntry>> entries_;  // most recently used first
};

// The service's one cache (made on first use, never destroyed: its stores
// may hold device memory, freed only before the CUDA runtime's teardown).
TopKCache& topk_cache();

}  // namespace gknn_service
