// Readers of vector's text and binary input formats, free of PostgreSQL
// headers: vector_in and vector_recv (vector_io.cpp) call them and turn what
// they report into pgvector's errors, and fuzz/ runs them under libFuzzer,
// so the fuzzer tests the very code a server runs on user input.
//
// They never allocate, never throw and never read outside the input they
// are given.
#pragma once

#include <cstddef>
#include <cstdint>

// What vector_in rejects, in the order it checks (the first problem wins).
enum class VectorTextError : std::uint8_t {
  None,
  NoOpenBracket,  // 22P02, detail: contents must start with "["
  NoElements,     // 22000 vector must have at least 1 dimension
  TooManyDims,    // 54000 more than max_dim elements
  Syntax,         // 22P02 invalid input syntax
  OutOfRange,     // 22003 "<element>" is out of range for type vector
  NaN,            // 22000 NaN not allowed in vector
  Infinite,       // 22000 infinite value not allowed in vector
  Junk,           // 22P02, detail: junk after closing right brace
};

struct VectorTextResult {
  VectorTextError error = VectorTextError::None;
  int dim = 0;                  // elements read (all of them when error is None)
  std::size_t token_begin = 0;  // OutOfRange: the element's text,
  std::size_t token_end = 0;    //   literal[token_begin, token_end)
};

// Parses a NUL-terminated literal such as " [1, 2.5e3,-4] " into values[0..dim),
// at most max_dim elements (values holds max_dim floats). Elements are read
// as strtof reads them (as float4in: one rounding; plain decimals through
// std::from_chars, which reads the same float faster); white space is
// array_in's.
VectorTextResult parse_vector_text(const char* literal, float* values, int max_dim);

// The same with strtof for every element: the reference the fuzzer holds
// parse_vector_text to (the same result, values and error).
VectorTextResult parse_vector_text_strtof(const char* literal, float* values, int max_dim);

// The binary format: int16 dim, int16 unused, then dim float4 values, all in
// network byte order. `cursor` is the offset of the next unread byte of
// data[0..len); readers advance it only past what they have read.
enum class VectorBinaryError : std::uint8_t {
  None,
  Short,     // 08P01 insufficient data left in message
  NaN,       // 22000 NaN not allowed in vector
  Infinite,  // 22000 infinite value not allowed in vector
};

// Reads the header: dim and unused as the unsigned 16-bit values sent
// (0..65535, as pgvector reads them: 0xffff is 65535 dimensions, too many,
// not -1).
VectorBinaryError read_vector_binary_header(const char* data, int len, int* cursor, int* dim, int* unused);

// Reads dim elements into values[0..dim), stopping at the first one that is
// missing or not finite (its index in *failed_at).
VectorBinaryError read_vector_binary_elements(const char* data, int len, int* cursor, int dim, float* values,
                                              int* failed_at);
