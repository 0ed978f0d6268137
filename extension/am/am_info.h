// What gknn_ivfpq_info and gknn_graph_info share: opening the index they
// report on.
#pragma once

#include "pg.h"

extern "C" {
#include "utils/rel.h"
}

// `indexoid` opened (AccessShareLock) for an info function: the caller must
// be allowed to read the index's table (42501, "permission denied for table
// ...", checked before the index is locked: a report tells its row count
// and dimension; a relation that is not an index is checked itself), and
// it must be an index of access method `am` (42809).
Relation am_info_open(Oid indexoid, const char* am);
