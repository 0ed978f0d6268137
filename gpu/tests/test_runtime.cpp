#include <gtest/gtest.h>

#include "gknn/error.h"
#include "gknn/runtime.h"
#include "gpu_env.h"

namespace {

TEST(Runtime, ListDevicesNeverThrows) {
  auto devices = gknn::list_devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].ordinal, int(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].total_memory, 0u);
    EXPECT_GE(devices[i].cc_major, 7);
  }
}

TEST(Runtime, RequireDeviceRejectsMissingOrdinal) {
  int count = int(gknn::list_devices().size());
  for (int bad : {-1, count}) {
    try {
      gknn::require_device(bad);
      FAIL() << "no error for ordinal " << bad;
    } catch (const gknn::Error& e) {
      EXPECT_EQ(e.code(), gknn::ErrorCode::NoDevice);
    }
  }
}

TEST(Runtime, RequireDeviceAcceptsVisibleGpu) {
  GKNN_NEED_GPU();
  EXPECT_NO_THROW(gknn::require_device(0));
}

TEST(Runtime, RuntimeVersion) { EXPECT_GE(gknn::cuda_runtime_version(), 12000); }

}  // namespace
