// gpu_graph: the metric of an index's operator class, from its support
// function 1 (the distance function the graph is built and searched for).
#include <cstring>

#include "graph.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "utils/syscache.h"
}

namespace {

// Support function 1 of each operator class, by its C symbol (the install
// script's; a function of another library cannot be a gpu_graph distance).
struct KnownDistance {
  const char* symbol;
  gknn::Metric metric;
};
constexpr KnownDistance kKnown[] = {
    {"l2_distance", gknn::Metric::L2},
    {"vector_negative_inner_product", gknn::Metric::InnerProduct},
    {"cosine_distance", gknn::Metric::Cosine},
};

}  // namespace

gknn::Metric graph_index_metric(Relation index) {
  Oid proc = index_getprocid(index, 1, 1);
  if (!OidIsValid(proc))
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
                    errmsg("gpu_graph operator class of index \"%s\" has no distance function (support 1)",
                           RelationGetRelationName(index))));
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
  if (!HeapTupleIsValid(tup)) elog(ERROR, "cache lookup failed for function %u", proc);
  bool isnull;
  Datum src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
  char* symbol = isnull ? pstrdup("") : TextDatumGetCString(src);
  ReleaseSysCache(tup);
  for (const KnownDistance& k : kKnown)
    if (strcmp(symbol, k.symbol) == 0) return k.metric;
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("gpu_graph does not support the distance function \"%s\" of index \"%s\"", symbol,
                         RelationGetRelationName(index)),
                  errhint("Use vector_l2_ops, vector_ip_ops or vector_cosine_ops.")));
  pg_unreachable();
}

const char* graph_metric_name(int metric) {
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
