// gknn's ordered index access methods by OID (ordered_ams.h).
#include "am/ordered_ams.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "utils/syscache.h"
}

OrderedAms OrderedAms::lookup() {
  return OrderedAms{get_index_am_oid("gpu_ivfpq", true), get_index_am_oid("gpu_graph", true)};
}

bool OrderedAms::has_index(Oid indexoid) const {
  if (!any()) return false;
  HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
  if (!HeapTupleIsValid(tup)) return false;
  const Oid relam = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup))->relam;
  ReleaseSysCache(tup);
  return relam == ivfpq || relam == graph;
}
