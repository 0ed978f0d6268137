// gknn_ivfpq_info(index regclass): what a gpu_ivfpq index holds, read from
// its pages (for monitoring and tests), for callers who may read its table.
#include "am/am_info.h"
#include "am/am_opclass.h"
#include "ivfpq.h"

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "funcapi.h"
#include "miscadmin.h"
}

namespace {

int64 count_chain(Relation index, BlockNumber last, Size item_size, int64* pages) {
  int64 n = 0;
  IvfpqChainWalk walk;
  ivfpq_chain_begin(&walk, index, last, item_size);
  for (Buffer buf; BufferIsValid(buf = ivfpq_chain_next(&walk));) {
    n += PageGetMaxOffsetNumber(BufferGetPage(buf));
    UnlockReleaseBuffer(buf);
    ++*pages;
  }
  return n;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(gknn_ivfpq_info);
Datum gknn_ivfpq_info(PG_FUNCTION_ARGS) {
  Oid indexoid = PG_GETARG_OID(0);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "return type must be a row type");
  Relation index = am_info_open(indexoid, "gpu_ivfpq");
  // A failed CREATE INDEX CONCURRENTLY leaves an invalid index with no pages.
  if (RelationGetNumberOfBlocks(index) == 0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("gpu_ivfpq index \"%s\" has not been built", RelationGetRelationName(index)),
                    errhint("A failed CREATE INDEX CONCURRENTLY leaves it invalid: drop it or REINDEX it.")));
  IvfpqMeta meta;
  ivfpq_read_meta(index, &meta);
  int64 entries = 0, list_pages = 0, empty_lists = 0;
  if (meta.trained) {
    BlockNumber* dir = ivfpq_read_directory(index, meta);
    for (int l = 0; l < meta.lists; ++l) {
      int64 n = count_chain(index, dir[l], ivfpq_list_item_size(meta), &list_pages);
      entries += n;
      if (n == 0) ++empty_lists;
    }
  }
  int64 pending = count_chain(index, meta.pending_last, ivfpq_item_size(0), &list_pages);
  int64 nulls = count_chain(index, meta.null_last, ivfpq_item_size(0), &list_pages);
  BlockNumber pages = RelationGetNumberOfBlocks(index);
  relation_close(index, AccessShareLock);

  Datum values[12] = {
      BoolGetDatum(meta.trained != 0),
      Int32GetDatum(meta.dim),
      Int32GetDatum(meta.lists),
      Int32GetDatum(meta.m),
      Int32GetDatum(meta.nbits),
      CStringGetTextDatum(ivfpq_meta_element(meta) == kIvfpqBit ? "hamming" : am_metric_name(meta.metric)),
      Int64GetDatum(static_cast<int64>(meta.generation)),
      Int64GetDatum(entries),
      Int64GetDatum(pending),
      Int64GetDatum(nulls),
      Int64GetDatum(empty_lists),
      Int64GetDatum(static_cast<int64>(pages))};
  bool nullflags[12] = {};
  if (!meta.trained) nullflags[2] = nullflags[3] = nullflags[4] = true;
  if (meta.dim == 0) nullflags[1] = true;
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nullflags)));
}

}  // extern "C"
