// Ordering of sparse vectors for the btree opclass: the order of the dense
// vectors they stand for (element by element over the common dimensions, then
// the shorter before the longer), as pgvector orders them. It is computed
// from the stored elements alone.
#include <climits>

#include "sparsevec.h"
#include "btree_funcs.h"

namespace {

// -1, 0 or 1 as x is below, equal to or above y.
int sign_of(float x, float y) { return (x > y) - (x < y); }

int compare(const SparseVector* a, const SparseVector* b) {
  const float* ax = SparsevecValues(a);
  const float* bx = SparsevecValues(b);
  int common = a->dim < b->dim ? a->dim : b->dim;
  int i = 0, j = 0;
  // The first index below `common` where the dense vectors differ decides.
  for (;;) {
    int ai = i < a->nnz ? a->indices[i] : INT_MAX;
    int bj = j < b->nnz ? b->indices[j] : INT_MAX;
    int at = ai < bj ? ai : bj;
    if (at >= common) break;
    float x = ai == at ? ax[i++] : 0.0f;
    float y = bj == at ? bx[j++] : 0.0f;
    if (int c = sign_of(x, y)) return c;
  }
  return (a->dim > b->dim) - (a->dim < b->dim);
}

}  // namespace

GKNN_BTREE_FUNCS(sparsevec, SparseVector, compare)
