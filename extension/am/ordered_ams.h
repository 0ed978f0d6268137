// gknn's ordered index access methods (gpu_ivfpq, gpu_graph) by OID, for
// the hooks that look for their scans in a plan (ivfpq/ivfpq_limit.cpp,
// am/ordered_projection.cpp).
#pragma once

#include "pg.h"

struct OrderedAms {
  Oid ivfpq;  // InvalidOid where the extension is not installed
  Oid graph;

  // The current database's (two catalog lookups: once per plan walked).
  static OrderedAms lookup();
  bool any() const { return OidIsValid(ivfpq) || OidIsValid(graph); }
  // Whether `indexoid` is an index of one of them.
  bool has_index(Oid indexoid) const;
};
