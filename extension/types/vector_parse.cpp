// vector's text and binary input formats (vector_parse.h), without PostgreSQL.
#include "vector_parse.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace {

// The white space array_in and pgvector accept, independent of locale.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

const char* skip_space(const char* p) {
  while (is_space(*p)) ++p;
  return p;
}

VectorTextResult fail(VectorTextError error, int dim) {
  VectorTextResult r;
  r.error = error;
  r.dim = dim;
  return r;
}

// A plain decimal (an optional '-', digits, a point, an exponent) at p,
// through std::from_chars: the float strtof reads, correctly rounded alike,
// and the same end; 4x faster (a 784-d literal: 106 -> 28 us here), and a
// literal's parse was half of a query's round trip. False for anything
// else (a '+', hex, inf or nan words) and out of range: strtof reads those.
bool parse_plain_decimal(const char* p, const char* limit, float* value, const char** end) {
  const char* digits = p + (*p == '-');
  if (!((*digits >= '0' && *digits <= '9') || *digits == '.')) return false;
  if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) return false;
  const std::from_chars_result r = std::from_chars(p, limit, *value, std::chars_format::general);
  if (r.ec != std::errc()) return false;
  *end = r.ptr;
  return true;
}

// One element at *p, read as float4in reads it (strtof: no double rounding).
template <bool kStrtofOnly>
VectorTextError parse_element(const char** p, const char* limit, float* out) {
  if (**p == '\0') return VectorTextError::Syntax;
  if (!kStrtofOnly) {
    float value = 0;
    const char* end = nullptr;
    if (parse_plain_decimal(*p, limit, &value, &end)) {
      *p = end;
      *out = value;
      return VectorTextError::None;  // finite: from_chars reports overflow
    }
  }
  char* end;
  errno = 0;
  float value = strtof(*p, &end);
  if (end == *p) return VectorTextError::Syntax;
  // Underflow to zero or a subnormal is a value, as in float4in.
  if (errno == ERANGE && std::isinf(value)) {
    *out = value;
    *p = end;
    return VectorTextError::OutOfRange;
  }
  *p = end;
  *out = value;
  if (std::isnan(value)) return VectorTextError::NaN;
  if (std::isinf(value)) return VectorTextError::Infinite;
  return VectorTextError::None;
}

std::uint32_t read_be(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// As pq_copymsgbytes: refuses to read past the end.
bool take(int len, int* cursor, int bytes) {
  if (*cursor < 0 || bytes > len - *cursor) return false;
  *cursor += bytes;
  return true;
}

template <bool kStrtofOnly>
VectorTextResult parse_text(const char* literal, float* values, int max_dim) {
  const char* limit = literal + std::strlen(literal);
  int dim = 0;
  const char* p = skip_space(literal);
  if (*p != '[') return fail(VectorTextError::NoOpenBracket, dim);
  p = skip_space(p + 1);
  if (*p == ']') return fail(VectorTextError::NoElements, dim);
  for (;;) {
    if (dim == max_dim) return fail(VectorTextError::TooManyDims, dim);
    p = skip_space(p);
    const char* token = p;
    float value = 0;
    VectorTextError e = parse_element<kStrtofOnly>(&p, limit, &value);
    if (e != VectorTextError::None) {
      VectorTextResult r = fail(e, dim);
      r.token_begin = static_cast<std::size_t>(token - literal);
      r.token_end = static_cast<std::size_t>(p - literal);
      return r;
    }
    values[dim++] = value;
    p = skip_space(p);
    if (*p == ',') {
      ++p;
    } else if (*p == ']') {
      ++p;
      break;
    } else {
      return fail(VectorTextError::Syntax, dim);
    }
  }
  if (*skip_space(p) != '\0') return fail(VectorTextError::Junk, dim);
  VectorTextResult r;
  r.dim = dim;
  return r;
}

}  // namespace

VectorTextResult parse_vector_text(const char* literal, float* values, int max_dim) {
  return parse_text<false>(literal, values, max_dim);
}

VectorTextResult parse_vector_text_strtof(const char* literal, float* values, int max_dim) {
  return parse_text<true>(literal, values, max_dim);
}

VectorBinaryError read_vector_binary_header(const char* data, int len, int* cursor, int* dim, int* unused) {
  int at = *cursor;
  if (!take(len, cursor, 4)) return VectorBinaryError::Short;
  const auto* p = reinterpret_cast<const unsigned char*>(data) + at;
  *dim = static_cast<int>(read_be(p, 2));
  *unused = static_cast<int>(read_be(p + 2, 2));
  return VectorBinaryError::None;
}

// The elements that are there are converted in one pass, a byte swap and
// an exponent test each (the receive of a 784-element query parameter was
// ~5 % of a backend's samples on the GPU service's path with one bounds
// check, shift chain and two classifications an element; gcc 12 at -O2
// does not vectorise this loop either way), then, only where an exponent
// was all ones, checked in order: the first NaN or infinity, else a short
// field, as an element-by-element read would find them.
VectorBinaryError read_vector_binary_elements(const char* data, int len, int* cursor, int dim, float* values,
                                              int* failed_at) {
  const int there = *cursor < 0 || len < *cursor ? 0 : std::min(dim, (len - *cursor) / 4);
  const auto* p = reinterpret_cast<const unsigned char*>(data) + (there > 0 ? *cursor : 0);
  std::uint32_t special = 0;  // nonzero: some element's exponent is all ones (NaN or infinity)
  for (int i = 0; i < there; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, p + 4 * i, sizeof bits);
    bits = __builtin_bswap32(bits);
    special |= (bits & 0x7f800000u) == 0x7f800000u;
    std::memcpy(&values[i], &bits, sizeof(float));
  }
  if (special)
    for (int i = 0; i < there; ++i) {
      *failed_at = i;
      if (std::isnan(values[i])) return VectorBinaryError::NaN;
      if (std::isinf(values[i])) return VectorBinaryError::Infinite;
    }
  *failed_at = there;
  if (there < dim) return VectorBinaryError::Short;
  *cursor += 4 * dim;
  return VectorBinaryError::None;
}
