// Operator class reads and metric names both index access methods share
// (am_opclass.h).
#include "am/am_opclass.h"

#include "gknn/distance.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "utils/syscache.h"
}

char* am_distance_symbol(Relation index, const char* am) {
  Oid proc = index_getprocid(index, 1, 1);
  if (!OidIsValid(proc))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
                    errmsg("%s operator class of index \"%s\" has no distance function (support 1)", am,
                           RelationGetRelationName(index))));
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
  if (!HeapTupleIsValid(tup)) elog(ERROR, "cache lookup failed for function %u", proc);
  bool isnull;
  Datum src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
  char* symbol = isnull ? pstrdup("") : TextDatumGetCString(src);
  ReleaseSysCache(tup);
  return symbol;
}

const char* am_metric_name(int metric) {
  switch (static_cast<gknn::Metric>(metric)) {
    case gknn::Metric::L2:
      return "l2";
    case gknn::Metric::InnerProduct:
      return "inner_product";
    case gknn::Metric::Cosine:
      return "cosine";
    case gknn::Metric::L1:
      return "l1";
  }
  return "unknown";
}
