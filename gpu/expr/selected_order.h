// The order of selected rows: lexicographic over key limbs, then row id.
#pragma once

#include "gknn/expr.h"

namespace gknn::expr {

inline bool selected_less(const Selected& a, const Selected& b) {
  for (int j = 0; j < a.nlimbs; ++j)
    if (a.limbs[j] != b.limbs[j]) return a.limbs[j] < b.limbs[j];
  return false;
}

}  // namespace gknn::expr
