// Whether GPU tests run here: they run when a GPU is visible, are skipped
// without one, and fail instead of skipping when GKNN_REQUIRE_GPU=1 (the GPU
// host's check sets it, so a broken driver cannot pass as "skipped").
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "gknn/runtime.h"

namespace gknn::test {

inline bool gpu_required() {
  const char* v = std::getenv("GKNN_REQUIRE_GPU");
  return v && std::strcmp(v, "1") == 0;
}

#define GKNN_NEED_GPU()                                                                       \
  do {                                                                                        \
    if (::gknn::list_devices().empty()) {                                                     \
      if (::gknn::test::gpu_required()) FAIL() << "GKNN_REQUIRE_GPU=1 but no GPU is visible"; \
      GTEST_SKIP() << "no GPU visible";                                                       \
    }                                                                                         \
  } while (0)

}  // namespace gknn::test
