// gknn_cache_table(table, columns): fills the GPU service's GpuTopK table
// cache entry of these columns ahead of the first query that reads exactly
// them (topk_cache.h; the service keeps it). It ships the all-visible pages
// as a query's fill does (service_topk_cache.cpp says why those), through a
// session that ranks nothing (k = 0). Nothing here holds a C++ object with
// a destructor: every call may raise.
#include <algorithm>
#include <cstring>

#include "service/service.h"
#include "topk_cache.h"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace {

[[noreturn]] void not_available(const char* why, const char* hint) {
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("%s", why), errhint("%s", hint)));
}

// The columns named, in attno order, each read by GpuTopK and readable by
// the current user.
void resolve_columns(Relation rel, ArrayType* names, TopKEmitter* em) {
  if (ARR_NDIM(names) > 1)
    ereport(ERROR,
            (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR), errmsg("columns must be a one-dimensional array")));
  Datum* elems;
  bool* nulls;
  int n;
  deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
  if (n == 0)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("gknn_cache_table needs at least one column")));
  if (n > gknn::expr::kMaxColumns)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("gknn_cache_table takes at most %d columns", gknn::expr::kMaxColumns)));
  const Oid relid = RelationGetRelid(rel);
  // SELECT on the table, or on each column (the column check alone does
  // not count the table's grants, nor a superuser).
  const bool table_ok = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
  for (int i = 0; i < n; ++i) {
    if (nulls[i])
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("a column name must not be null")));
    char* name = TextDatumGetCString(elems[i]);
    const AttrNumber attno = get_attnum(relid, name);
    if (attno == InvalidAttrNumber || attno < 0)
      ereport(ERROR,
              (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("column \"%s\" of relation \"%s\" does not exist",
                                                         name, RelationGetRelationName(rel))));
    for (int c = 0; c < em->ncolumns; ++c)
      if (em->attnos[c] == attno)
        ereport(ERROR,
                (errcode(ERRCODE_DUPLICATE_COLUMN), errmsg("column \"%s\" named more than once", name)));
    const AclResult acl =
        table_ok ? ACLCHECK_OK : pg_attribute_aclcheck(relid, attno, GetUserId(), ACL_SELECT);
    if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
    const Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attno - 1);
    gknn::expr::ColumnSpec spec;
    if (!topk_column_spec(att->atttypid, att->atttypmod, &spec))
      ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                      errmsg("GpuTopK does not rank column \"%s\" of type %s", name,
                             format_type_with_typemod(att->atttypid, att->atttypmod)),
                      errhint("Numeric, date, time and boolean columns, and vector columns with dimensions, "
                              "are ranked.")));
    em->attnos[em->ncolumns] = attno;
    em->columns[em->ncolumns++] = spec;
  }
  topk_emitter_sort_columns(em);
}

// The all-visible pages' rows, shipped as kept batches of whole blocks;
// returns the rows shipped (fill_cache in topk_exec.cpp does the same in a
// query).
int64 ship_all_visible(Relation rel, const TopKEmitter* em, ServiceTopK* t, const TopKVmRead& vm,
                       int64 segment, uint64* lsn) {
  TupleTableSlot* slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
  BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
  MemoryContext row_cxt =
      AllocSetContextCreate(CurrentMemoryContext, "gknn_cache_table row", ALLOCSET_SMALL_SIZES);
  Buffer vmbuf = InvalidBuffer;
  PGAlignedBlock copy;
  AttrNumber natts = 0;
  for (int c = 0; c < em->ncolumns; ++c) natts = Max(natts, em->attnos[c]);
  gknn::expr::EvalError err;
  int64 rows = 0;
  gknn_service_topk_keep(t, true);
  gknn::expr::BatchView* b = gknn_service_topk_batch(t);
  auto push = [&]() {
    if (b->n == 0) return;
    if (gknn_service_topk_push(t, &err) != kServiceTopKOk)
      not_available("the gknn GPU service stopped while gknn_cache_table filled its cache", "Try again.");
    b = gknn_service_topk_batch(t);
  };
  for (int64 blk = 0; blk < vm.nblocks; ++blk) {
    if ((blk & 255) == 0) CHECK_FOR_INTERRUPTS();
    if (!topk_bit(vm.bits, blk)) continue;
    lsn[blk] = topk_copy_all_visible(rel, static_cast<BlockNumber>(blk), &vmbuf, strategy, copy.data);
    if (lsn[blk] == 0) continue;
    Page p = copy.data;
    if (b->n >= segment || b->capacity - b->n < topk_page_rows(p)) push();  // a block's rows in one batch
    const OffsetNumber maxoff = PageGetMaxOffsetNumber(p);
    for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off)) {
      ItemId lp = PageGetItemId(p, off);
      if (!ItemIdIsNormal(lp)) continue;
      HeapTupleData tup;
      tup.t_data = reinterpret_cast<HeapTupleHeader>(PageGetItem(p, lp));
      tup.t_len = ItemIdGetLength(lp);
      tup.t_tableOid = RelationGetRelid(rel);
      ItemPointerSet(&tup.t_self, static_cast<BlockNumber>(blk), off);
      ExecStoreHeapTuple(&tup, slot, false);
      slot_getsomeattrs(slot, natts);
      MemoryContext old = MemoryContextSwitchTo(row_cxt);
      topk_deform_row(em, slot, b, b->n++);
      MemoryContextSwitchTo(old);
      MemoryContextReset(row_cxt);
      ExecClearTuple(slot);
      ++rows;
      if (b->n == b->capacity) push();
    }
  }
  push();
  if (BufferIsValid(vmbuf)) ReleaseBuffer(vmbuf);
  FreeAccessStrategy(strategy);
  ExecDropSingleTupleTableSlot(slot);
  MemoryContextDelete(row_cxt);
  gknn_service_topk_keep(t, false);
  return rows;
}

// The session's key: its rows are only kept, never ranked for an answer
// (k = 0), so a constant (NULL) key serves, whatever the columns; the
// program still names them.
void constant_key(TopKEmitter* em) {
  Const* c = makeConst(INT4OID, -1, InvalidOid, sizeof(int32), Int32GetDatum(0), true, true);
  if (!topk_compile_key(em, reinterpret_cast<Expr*>(c), false, false))
    elog(ERROR, "gknn_cache_table: a constant key does not compile");
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(gknn_cache_table);
Datum gknn_cache_table(PG_FUNCTION_ARGS) {
  const Oid relid = PG_GETARG_OID(0);
  ArrayType* names = PG_GETARG_ARRAYTYPE_P(1);
  // No lock for a user who may read nothing of it (each column is checked after).
  if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
      pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
    aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
  Relation rel = table_open(relid, AccessShareLock);
  if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_tableam != GetHeapamTableAmRoutine())
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("\"%s\" is not a heap table", RelationGetRelationName(rel))));
  TopKEmitter em;
  topk_emitter_init(&em, 1, nullptr, nullptr);
  resolve_columns(rel, names, &em);  // privileges and columns first, whatever the server
  if (!gknn_service_preloaded())
    not_available(
        "the GpuTopK table cache lives in the gknn GPU service, which is not running",
        "Add gknn to shared_preload_libraries (with gknn.service = gpu or cpu) and restart the server.");
  if (gknn_topk_cache_mb <= 0)
    not_available("the GpuTopK table cache is off", "Set gknn.topk_cache_mb in the server's configuration.");
  if (!topk_cache_usable(rel, GetActiveSnapshot()))
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("the GpuTopK table cache does not hold \"%s\" here", RelationGetRelationName(rel)),
                    errdetail("It holds permanent tables made before this transaction, outside recovery and "
                              "SERIALIZABLE transactions.")));
  constant_key(&em);
  ServiceTopKProgram prog{};
  prog.code = em.code;
  prog.ncode = em.ncode;
  prog.consts = em.consts;
  prog.const_nulls = em.const_nulls;
  prog.nconst = em.nconst;
  prog.vectors = em.vectors;
  prog.nvectors = em.nvectors;
  prog.qual = em.qual;
  prog.check = em.check;
  prog.keys = em.keys;
  prog.nkeys = em.nkeys;
  prog.columns = em.columns;
  prog.ncolumns = em.ncolumns;
  TopKVmRead vm;
  topk_read_vm(rel, RelationGetNumberOfBlocks(rel), &vm);
  ServiceTopKCacheProbe probe;
  memset(&probe, 0, sizeof(probe));
  probe.database = MyDatabaseId;
  probe.relation = relid;
  probe.node = rel->rd_node;
  probe.attnos = em.attnos;
  probe.nblocks = vm.nblocks;
  probe.nvm = vm.nvm;
  probe.vm_span = topk_vm_span();
  probe.vm_lsn = vm.vm_lsn;
  probe.bits = vm.bits;
  int device = -1;
  const int64 capacity = topk_service_capacity(&em);
  ServiceTopK* t = gknn_service_topk_begin(prog, 0, capacity, &device, &probe);
  if (!t) not_available("the gknn GPU service is not running", "It restarts by itself; try again.");
  int64 rows = 0;
  if (probe.state == kServiceCacheHit) {
    rows = probe.rows;  // already there
  } else if (probe.state == kServiceCacheFill) {
    uint64* lsn = static_cast<uint64*>(
        palloc_extended(sizeof(uint64) * Max(vm.nblocks, int64{1}), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO));
    rows = ship_all_visible(rel, &em, t, vm, topk_cache_segment_rows(rel, capacity), lsn);
    bool committed = false;
    gknn::expr::EvalError err;
    if (gknn_service_topk_cache_commit(t, lsn, vm.nblocks, vm.vm_lsn, vm.nvm, &committed, &err) !=
        kServiceTopKOk)
      not_available("the gknn GPU service stopped while gknn_cache_table filled its cache", "Try again.");
    if (!committed)
      ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                      errmsg("the columns of \"%s\" do not fit the GpuTopK table cache",
                             RelationGetRelationName(rel)),
                      errhint("Raise gknn.topk_cache_mb (or gknn.gpu_memory_limit).")));
  } else {
    ereport(NOTICE, (errmsg("the GpuTopK table cache entry of \"%s\" is being filled by another session",
                            RelationGetRelationName(rel))));
  }
  gknn_service_topk_end(t);
  table_close(rel, AccessShareLock);
  PG_RETURN_INT64(rows);
}
}
