// gpu_graph amvalidate: an operator class has one ordering operator
// (strategy 1, FOR ORDER BY, returning float8) and support function 1, the
// distance function (type, type) -> float8. Problems are reported as INFO
// messages and make the answer false, as PostgreSQL's own AMs do.
#include "graph.h"

extern "C" {
#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
}

namespace {

void problem(const char* opclass, const char* what) {
  ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                 errmsg("gpu_graph operator class \"%s\" %s", opclass, what)));
}

}  // namespace

bool graph_validate(Oid opclassoid) {
  HeapTuple classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
  if (!HeapTupleIsValid(classtup)) elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
  Form_pg_opclass classform = reinterpret_cast<Form_pg_opclass>(GETSTRUCT(classtup));
  Oid opfamily = classform->opcfamily;
  Oid type = classform->opcintype;
  char* name = pstrdup(NameStr(classform->opcname));
  ReleaseSysCache(classtup);

  bool ok = true, have_operator = false, have_distance = false;
  CatCList* procs = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamily));
  for (int i = 0; i < procs->n_members; ++i) {
    Form_pg_amproc proc = reinterpret_cast<Form_pg_amproc>(GETSTRUCT(&procs->members[i]->tuple));
    if (proc->amproclefttype != type || proc->amprocrighttype != type) continue;
    if (proc->amprocnum != 1 || !check_amproc_signature(proc->amproc, FLOAT8OID, true, 2, 2, type, type)) {
      problem(name, psprintf("has an unknown or ill-typed support function %d (%s)", proc->amprocnum,
                             format_procedure(proc->amproc)));
      ok = false;
      continue;
    }
    have_distance = true;
  }
  ReleaseSysCacheList(procs);

  CatCList* ops = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamily));
  for (int i = 0; i < ops->n_members; ++i) {
    Form_pg_amop op = reinterpret_cast<Form_pg_amop>(GETSTRUCT(&ops->members[i]->tuple));
    if (op->amoplefttype != type || op->amoprighttype != type) continue;
    if (op->amopstrategy != 1 || op->amoppurpose != AMOP_ORDER ||
        !check_amop_signature(op->amopopr, FLOAT8OID, type, type)) {
      problem(name,
              psprintf("has operator %s, which is not strategy 1 FOR ORDER BY returning double precision",
                       format_operator(op->amopopr)));
      ok = false;
      continue;
    }
    have_operator = true;
  }
  ReleaseSysCacheList(ops);

  if (!have_operator) problem(name, "has no ordering operator");
  if (!have_distance) problem(name, "has no distance function (support 1)");
  return ok && have_operator && have_distance;
}
