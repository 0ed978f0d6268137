// gpu_ivfpq's change log (ivfpq_format.h): written by every change that
// bumps the generation, in the metapage it already changes, so the record
// costs no page of its own in the WAL record.
#include <cstring>

#include "ivfpq.h"

namespace {

unsigned char* contents_of(Page page) { return reinterpret_cast<unsigned char*>(PageGetContents(page)); }

}  // namespace

void ivfpq_log_init(Page metapage, uint64 from) {
  unsigned char* contents = contents_of(metapage);
  memset(contents + kIvfpqLogOffset, 0, kIvfpqMetaContentBytes - kIvfpqLogOffset);
  IvfpqLogHeader h{kIvfpqLogMagic, kIvfpqLogCapacity, from};
  memcpy(contents + kIvfpqLogOffset, &h, sizeof h);
  ivfpq_set_contents_size(metapage, kIvfpqMetaContentBytes);
}

void ivfpq_log_change(Page metapage, int32 chain, BlockNumber block, OffsetNumber offset, IvfpqLogKind kind) {
  const IvfpqMeta* meta = ivfpq_meta(metapage);
  unsigned char* contents = contents_of(metapage);
  // An index written before the log (or with a damaged one) starts it here:
  // the changes before this one cannot be read from it.
  const Size lower = reinterpret_cast<PageHeader>(metapage)->pd_lower;
  if (ivfpq_log_problem(contents, lower > kIvfpqContentOffset ? lower - kIvfpqContentOffset : 0))
    ivfpq_log_init(metapage, meta->generation - 1);
  IvfpqLogRecord r{static_cast<uint32>(meta->generation), chain, block, offset, static_cast<uint16>(kind)};
  auto* records = reinterpret_cast<IvfpqLogRecord*>(contents + kIvfpqLogOffset + sizeof(IvfpqLogHeader));
  memcpy(records + meta->generation % kIvfpqLogCapacity, &r, sizeof r);
}
