// Heap TIDs as int64 ids (block << 16 | offset): how both index access
// methods store a row's TID in their images, and what the core's searches
// and the GPU service return. Ids order as TIDs do.
#pragma once

#include "pg.h"

extern "C" {
#include "storage/itemptr.h"
}

inline int64 heap_tid_to_id(const ItemPointerData* tid) {
  return (static_cast<int64>(ItemPointerGetBlockNumber(tid)) << 16) | ItemPointerGetOffsetNumber(tid);
}
inline void heap_id_to_tid(int64 id, ItemPointerData* tid) {
  ItemPointerSet(tid, static_cast<BlockNumber>(id >> 16), static_cast<OffsetNumber>(id & 0xffff));
}
