// Ordering of vectors for the btree opclass: element by element, then a
// shorter vector before a longer one with the same prefix.
#include "vector.h"
#include "btree_funcs.h"

namespace {

int compare(const Vector* a, const Vector* b) {
  int n = a->dim < b->dim ? a->dim : b->dim;
  for (int i = 0; i < n; ++i) {
    if (a->x[i] < b->x[i]) return -1;
    if (a->x[i] > b->x[i]) return 1;
  }
  return (a->dim > b->dim) - (a->dim < b->dim);
}

}  // namespace

GKNN_BTREE_FUNCS(vector, Vector, compare)
