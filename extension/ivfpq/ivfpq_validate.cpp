// gpu_ivfpq amvalidate: an operator class has one ordering operator
// (strategy 1, vector x vector -> float8, FOR ORDER BY a float8 btree family)
// and support function 1, the distance function (vector, vector) -> float8.
// Problems are reported as INFO messages and make the answer false, as
// PostgreSQL's own AMs do.
#include "ivfpq.h"

extern "C" {
#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
}

bool ivfpq_validate(Oid opclassoid) {
  HeapTuple classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
  if (!HeapTupleIsValid(classtup)) elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
  Form_pg_opclass classform = reinterpret_cast<Form_pg_opclass>(GETSTRUCT(classtup));
  Oid opfamily = classform->opcfamily;
  Oid opcintype = classform->opcintype;
  char* opclassname = pstrdup(NameStr(classform->opcname));
  ReleaseSysCache(classtup);

  bool ok = true;
  bool have_operator = false, have_distance = false;

  CatCList* procs = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamily));
  for (int i = 0; i < procs->n_members; ++i) {
    Form_pg_amproc proc = reinterpret_cast<Form_pg_amproc>(GETSTRUCT(&procs->members[i]->tuple));
    if (proc->amproclefttype != opcintype || proc->amprocrighttype != opcintype) continue;
    if (proc->amprocnum != 1) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("gpu_ivfpq operator class \"%s\" has support function %d, only 1 is known",
                            opclassname, proc->amprocnum)));
      ok = false;
      continue;
    }
    if (!check_amproc_signature(proc->amproc, FLOAT8OID, true, 2, 2, opcintype, opcintype)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("gpu_ivfpq operator class \"%s\": support function 1 (%s) must take two %s and "
                            "return double precision",
                            opclassname, format_procedure(proc->amproc), format_type_be(opcintype))));
      ok = false;
      continue;
    }
    have_distance = true;
  }
  ReleaseSysCacheList(procs);

  CatCList* ops = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamily));
  for (int i = 0; i < ops->n_members; ++i) {
    Form_pg_amop op = reinterpret_cast<Form_pg_amop>(GETSTRUCT(&ops->members[i]->tuple));
    if (op->amoplefttype != opcintype || op->amoprighttype != opcintype) continue;
    if (op->amopstrategy != 1 || op->amoppurpose != AMOP_ORDER) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("gpu_ivfpq operator class \"%s\": operator %s must be strategy 1 FOR ORDER BY",
                            opclassname, format_operator(op->amopopr))));
      ok = false;
      continue;
    }
    if (!check_amop_signature(op->amopopr, FLOAT8OID, opcintype, opcintype)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("gpu_ivfpq operator class \"%s\": operator %s must return double precision",
                            opclassname, format_operator(op->amopopr))));
      ok = false;
      continue;
    }
    have_operator = true;
  }
  ReleaseSysCacheList(ops);

  if (!have_operator) {
    ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                   errmsg("gpu_ivfpq operator class \"%s\" has no ordering operator", opclassname)));
    ok = false;
  }
  if (!have_distance) {
    ereport(INFO,
            (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
             errmsg("gpu_ivfpq operator class \"%s\" has no distance function (support 1)", opclassname)));
    ok = false;
  }
  return ok;
}
