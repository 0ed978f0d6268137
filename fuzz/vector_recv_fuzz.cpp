// libFuzzer target: vector's binary input (extension/types/vector_parse.cpp,
// the readers vector_recv runs), as a COPY BINARY field or a bind parameter.
//
// The readers must stay inside the message, move the cursor only past what
// they read, and on success have read exactly 4 + 4 x dim bytes of finite
// values; encoding those values again must give the bytes read.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "types/vector_parse.h"

namespace {

constexpr int kMaxDim = 16000;  // VECTOR_MAX_DIM

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "vector_recv_fuzz: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) return 0;
  // A copy of exactly `size` bytes, so ASan sees any read past the message.
  std::vector<char> msg(data, data + size);
  const int len = static_cast<int>(size);
  int cursor = 0;
  int dim = 0, unused = 0;
  if (read_vector_binary_header(msg.data(), len, &cursor, &dim, &unused) != VectorBinaryError::None) {
    if (cursor != 0) fail("cursor moved on a short header");
    return 0;
  }
  if (cursor != 4) fail("header is not 4 bytes");
  if (dim < 0 || dim > 0xffff || unused < 0 || unused > 0xffff) fail("header fields outside 0..65535");
  // vector_recv checks the dimension before reading elements (CheckDim).
  if (dim < 1 || dim > kMaxDim) return 0;
  std::vector<float> values(dim);
  int failed_at = -1;
  VectorBinaryError e = read_vector_binary_elements(msg.data(), len, &cursor, dim, values.data(), &failed_at);
  if (cursor < 4 || cursor > len) fail("cursor outside the message");
  if (e != VectorBinaryError::None) {
    if (failed_at < 0 || failed_at >= dim) fail("failing element out of range");
    if (e != VectorBinaryError::Short && !(std::isnan(values[failed_at]) || std::isinf(values[failed_at])))
      fail("rejected a finite value");
    return 0;
  }
  if (cursor != 4 + 4 * dim) fail("read other than 4 + 4 x dim bytes");
  for (int i = 0; i < dim; ++i) {
    if (!std::isfinite(values[i])) fail("accepted a value that is not finite");
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    const auto* p = reinterpret_cast<const unsigned char*>(msg.data()) + 4 + 4 * i;
    if (bits != (std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3]))
      fail("value differs from its bytes");
  }
  return 0;
}
