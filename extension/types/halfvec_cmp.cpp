// Ordering of halfvecs for the btree opclass: element by element by value
// (so -0 equals 0), then a shorter halfvec before a longer one with the same
// prefix, as pgvector (and PostgreSQL's arrays) order them.
#include "halfvec.h"
#include "btree_funcs.h"

namespace {

int compare(const HalfVector* a, const HalfVector* b) {
  int n = a->dim < b->dim ? a->dim : b->dim;
  for (int i = 0; i < n; ++i) {
    float x = gknn::half_to_float(a->x[i]);
    float y = gknn::half_to_float(b->x[i]);
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return (a->dim > b->dim) - (a->dim < b->dim);
}

}  // namespace

GKNN_BTREE_FUNCS(halfvec, HalfVector, compare)
