// Text and binary input/output of vector, its type modifier, and the
// vector(n) length coercion.
#include <cmath>

#include "typmod.h"
#include "vector.h"
#include "vector_parse.h"

extern "C" {
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
}

Vector* InitVector(int dim) {
  // Every vector is made here, so no route can make one of 0, negative or
  // more than VECTOR_MAX_DIM dimensions (dim is an int16 on disk: a larger
  // count would wrap, and VECTOR_SIZE of a negative one undersizes the
  // allocation).
  CheckDim(dim);
  Size size = VECTOR_SIZE(dim);
  Vector* v = static_cast<Vector*>(palloc0(size));
  SET_VARSIZE(v, size);
  v->dim = static_cast<int16>(dim);
  return v;
}

void CheckDim(int dim) {
  if (dim < 1)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("vector must have at least 1 dimension")));
  if (dim > VECTOR_MAX_DIM)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("vector cannot have more than %d dimensions", VECTOR_MAX_DIM)));
}

void CheckExpectedDim(int32 typmod, int dim) {
  if (typmod != -1 && typmod != dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("expected %d dimensions, not %d", typmod, dim)));
}

void CheckElement(float value) {
  if (std::isnan(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("NaN not allowed in vector")));
  if (std::isinf(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("infinite value not allowed in vector")));
}

void CheckDims(const Vector* a, const Vector* b) {
  if (a->dim != b->dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("different vector dimensions %d and %d", a->dim, b->dim)));
}

namespace {

[[noreturn]] void syntax_error(const char* literal, const char* detail = nullptr) {
  ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                  errmsg("invalid input syntax for type vector: \"%s\"", literal),
                  detail ? errdetail("%s", detail) : 0));
  pg_unreachable();
}

// pgvector's error for what parse_vector_text reported.
[[noreturn]] void text_error(const char* literal, const VectorTextResult& r) {
  switch (r.error) {
    case VectorTextError::NoOpenBracket:
      syntax_error(literal, "Vector contents must start with \"[\".");
    case VectorTextError::NoElements:
      CheckDim(0);
      break;
    case VectorTextError::TooManyDims:
      CheckDim(VECTOR_MAX_DIM + 1);
      break;
    case VectorTextError::OutOfRange:
      ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                      errmsg("\"%s\" is out of range for type vector",
                             pnstrdup(literal + r.token_begin, r.token_end - r.token_begin))));
      break;
    case VectorTextError::NaN:
      CheckElement(NAN);
      break;
    case VectorTextError::Infinite:
      CheckElement(INFINITY);
      break;
    case VectorTextError::Junk:
      syntax_error(literal, "Junk after closing right brace.");
    case VectorTextError::Syntax:
    case VectorTextError::None:
      break;
  }
  syntax_error(literal);
}

// As pq_getmsgint on a message that ran out.
[[noreturn]] void insufficient_data() {
  ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("insufficient data left in message")));
  pg_unreachable();
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(vector_in);
Datum vector_in(PG_FUNCTION_ARGS) {
  const char* literal = PG_GETARG_CSTRING(0);
  int32 typmod = PG_GETARG_INT32(2);
  float* values = static_cast<float*>(palloc(sizeof(float) * VECTOR_MAX_DIM));
  VectorTextResult parsed = parse_vector_text(literal, values, VECTOR_MAX_DIM);
  if (parsed.error != VectorTextError::None) text_error(literal, parsed);
  int dim = parsed.dim;
  CheckExpectedDim(typmod, dim);

  Vector* result = InitVector(dim);
  memcpy(result->x, values, sizeof(float) * dim);
  pfree(values);
  PG_RETURN_VECTOR_P(result);
}

// Shortest text that reads back to the same float, as float4out does with
// extra_float_digits > 0 (the default).
PG_FUNCTION_INFO_V1(vector_out);
Datum vector_out(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  char* buf = static_cast<char*>(palloc(v->dim * (FLOAT_SHORTEST_DECIMAL_LEN + 1) + 2));
  char* p = buf;
  *p++ = '[';
  for (int i = 0; i < v->dim; ++i) {
    if (i > 0) *p++ = ',';
    p += float_to_shortest_decimal_bufn(v->x[i], p);
  }
  *p++ = ']';
  *p = '\0';
  PG_FREE_IF_COPY(v, 0);
  PG_RETURN_CSTRING(buf);
}

PG_FUNCTION_INFO_V1(vector_typmod_in);
Datum vector_typmod_in(PG_FUNCTION_ARGS) {
  PG_RETURN_INT32(dims_typmod_in(PG_GETARG_ARRAYTYPE_P(0), "vector", VECTOR_MAX_DIM));
}

// Binary format: int16 dim, int16 unused (0), float4[dim], network order.
PG_FUNCTION_INFO_V1(vector_recv);
Datum vector_recv(PG_FUNCTION_ARGS) {
  StringInfo buf = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
  int32 typmod = PG_GETARG_INT32(2);
  int dim, unused;
  if (read_vector_binary_header(buf->data, buf->len, &buf->cursor, &dim, &unused) != VectorBinaryError::None)
    insufficient_data();
  CheckDim(dim);
  CheckExpectedDim(typmod, dim);
  // pgvector's SQLSTATE (data_exception), after the dimension checks as there.
  if (unused != 0)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("expected unused to be 0, not %d", unused)));
  Vector* result = InitVector(dim);
  int failed_at;
  switch (read_vector_binary_elements(buf->data, buf->len, &buf->cursor, dim, result->x, &failed_at)) {
    case VectorBinaryError::None:
      break;
    case VectorBinaryError::Short:
      insufficient_data();
    default:
      CheckElement(result->x[failed_at]);
  }
  PG_RETURN_VECTOR_P(result);
}

PG_FUNCTION_INFO_V1(vector_send);
Datum vector_send(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  StringInfoData buf;
  pq_begintypsend(&buf);
  pq_sendint(&buf, v->dim, sizeof(int16));
  pq_sendint(&buf, v->unused, sizeof(int16));
  for (int i = 0; i < v->dim; ++i) pq_sendfloat4(&buf, v->x[i]);
  PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

// Length coercion for vector(n): vector(vector, typmod, is_explicit).
PG_FUNCTION_INFO_V1(vector);
Datum vector(PG_FUNCTION_ARGS) {
  Vector* v = PG_GETARG_VECTOR_P(0);
  CheckExpectedDim(PG_GETARG_INT32(1), v->dim);
  PG_RETURN_VECTOR_P(v);
}

}  // extern "C"
