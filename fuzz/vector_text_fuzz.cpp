// libFuzzer target: vector's text input (extension/types/vector_parse.cpp,
// the parser vector_in runs).
//
// Any input, as a NUL-terminated literal: the parser must stay inside it,
// give what the strtof-only parse gives (error, dimension, values: the
// from_chars fast path changes nothing), and whatever it accepts must be
// 1..max_dim finite values that read back the same from their printed form
// (the parser and "%.9g" agree). A short max_dim on odd inputs also reaches
// the dimension limit.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "types/vector_parse.h"

namespace {

constexpr int kMaxDim = 16000;  // VECTOR_MAX_DIM

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "vector_text_fuzz: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The literal as the server hands it over: a C string (up to the first NUL).
  std::string literal(reinterpret_cast<const char*>(data), size);
  literal.resize(std::strlen(literal.c_str()));
  const int max_dim = size % 2 ? 4 : kMaxDim;
  // Heap buffers of exactly max_dim floats (ASan's redzones follow them),
  // allocated once: a fresh 64 KB per input would halve the rate.
  static std::vector<float> small(4), large(kMaxDim), small2(4), large2(kMaxDim);
  std::vector<float>& values = max_dim == 4 ? small : large;
  VectorTextResult r = parse_vector_text(literal.c_str(), values.data(), max_dim);

  if (r.dim < 0 || r.dim > max_dim) fail("dimension out of bounds");
  // The from_chars fast path reads what strtof reads: the same outcome.
  static std::vector<float> ref_small(4), ref_large(kMaxDim);
  std::vector<float>& ref = max_dim == 4 ? ref_small : ref_large;
  const VectorTextResult s = parse_vector_text_strtof(literal.c_str(), ref.data(), max_dim);
  if (s.error != r.error || s.dim != r.dim || s.token_begin != r.token_begin || s.token_end != r.token_end)
    fail("differs from the strtof parse");
  if (r.error == VectorTextError::None && std::memcmp(values.data(), ref.data(), sizeof(float) * r.dim) != 0)
    fail("values differ from the strtof parse");
  if (r.error == VectorTextError::OutOfRange &&
      (r.token_begin >= r.token_end || r.token_end > literal.size()))
    fail("out-of-range token outside the literal");
  if (r.error != VectorTextError::None) return 0;
  if (r.dim < 1) fail("accepted an empty vector");

  std::string printed = "[";
  for (int i = 0; i < r.dim; ++i) {
    if (!std::isfinite(values[i])) fail("accepted a value that is not finite");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", values[i]);
    printed += buf;
  }
  printed += "]";
  std::vector<float>& again = max_dim == 4 ? small2 : large2;
  VectorTextResult r2 = parse_vector_text(printed.c_str(), again.data(), max_dim);
  if (r2.error != VectorTextError::None || r2.dim != r.dim) fail("printed form does not parse back");
  if (std::memcmp(values.data(), again.data(), sizeof(float) * r.dim) != 0)
    fail("printed form reads back different");
  return 0;
}
