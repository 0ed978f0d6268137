#include <gtest/gtest.h>

#include "gknn/error.h"
#include "gknn/runtime.h"
#include "runtime/stream_tools.h"
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

// One allocation for several arrays (BlockLayout): each array starts on a
// 256-byte boundary past the previous one's end, an empty array takes no
// room, and add_span leaves the second array exactly where
// download_span_and_wait reads it (span_offset of the first's bytes) with
// the whole span inside the reservation.
TEST(Runtime, BlockLayoutOffsets) {
  gknn::BlockLayout l;
  EXPECT_EQ(l.add<float>(3), 0u);
  EXPECT_EQ(l.add<double>(0), 256u);
  EXPECT_EQ(l.add<double>(33), 256u);  // 264 bytes: two boundaries
  EXPECT_EQ(l.bytes, 768u);
  for (std::size_t ids : {0, 1, 7, 8, 10, 31, 32, 1000}) {
    gknn::BlockLayout p;
    const std::size_t first = p.add<char>(5);
    const std::size_t at = p.add_span(ids * sizeof(std::int64_t), ids * sizeof(double));
    EXPECT_EQ(first, 0u);
    EXPECT_EQ(at % 256, 0u);
    const std::size_t second = at + gknn::span_offset(ids * sizeof(std::int64_t));
    EXPECT_EQ(second % 16, 0u) << ids;
    EXPECT_GE(second, at + ids * sizeof(std::int64_t)) << ids;
    EXPECT_LE(second + ids * sizeof(double), p.bytes) << ids;
    EXPECT_EQ(p.bytes % 256, 0u);
  }
}
