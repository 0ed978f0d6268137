// Opening the index an info function reports on (am_info.h).
#include "am/am_info.h"

extern "C" {
#include "access/relation.h"
#include "catalog/index.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
}

namespace {

void check_can_read(Oid indexoid) {
  Oid table = IndexGetRelation(indexoid, true);
  Oid target = OidIsValid(table) ? table : indexoid;
  bool missing = false;
  AclResult acl = pg_class_aclcheck_ext(target, GetUserId(), ACL_SELECT, &missing);
  if (missing) return;  // relation_open says so
  if (acl != ACLCHECK_OK)
    aclcheck_error(acl, get_relkind_objtype(get_rel_relkind(target)), get_rel_name(target));
}

}  // namespace

Relation am_info_open(Oid indexoid, const char* am) {
  check_can_read(indexoid);
  Relation index = relation_open(indexoid, AccessShareLock);
  if (index->rd_rel->relkind != RELKIND_INDEX || index->rd_rel->relam != get_index_am_oid(am, false))
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("\"%s\" is not a %s index", RelationGetRelationName(index), am)));
  return index;
}
