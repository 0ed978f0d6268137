// Text and binary input/output of halfvec, its type modifier, the
// halfvec(n) length coercion, and the checks every halfvec function shares.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "typmod.h"
#include "halfvec.h"
#include "vector.h"

extern "C" {
#include "common/shortest_dec.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
}

HalfVector* InitHalfVector(int dim) {
  Size size = HALFVEC_SIZE(dim);
  HalfVector* v = static_cast<HalfVector*>(palloc0(size));
  SET_VARSIZE(v, size);
  v->dim = static_cast<int16>(dim);
  return v;
}

void HalfvecCheckDim(int dim) {
  if (dim < 1)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("halfvec must have at least 1 dimension")));
  if (dim > HALFVEC_MAX_DIM)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("halfvec cannot have more than %d dimensions", HALFVEC_MAX_DIM)));
}

void HalfvecCheckElement(half value) {
  if (gknn::half_is_nan(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("NaN not allowed in halfvec")));
  if (gknn::half_is_inf(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("infinite value not allowed in halfvec")));
}

void HalfvecCheckDims(const HalfVector* a, const HalfVector* b) {
  if (a->dim != b->dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("different halfvec dimensions %d and %d", a->dim, b->dim)));
}

half FloatToHalf(float value) {
  half h = gknn::float_to_half(value);
  if (gknn::half_is_inf(h) && !std::isinf(value)) {
    char buf[FLOAT_SHORTEST_DECIMAL_LEN];
    float_to_shortest_decimal_buf(value, buf);
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("\"%s\" is out of range for type halfvec", buf)));
  }
  return h;
}

float* HalfvecToFloats(const HalfVector* v) {
  float* out = static_cast<float*>(palloc(sizeof(float) * v->dim));
  for (int i = 0; i < v->dim; ++i) out[i] = gknn::half_to_float(v->x[i]);
  return out;
}

namespace {

// The white space array_in and pgvector accept, independent of locale.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

const char* skip_space(const char* p) {
  while (is_space(*p)) ++p;
  return p;
}

[[noreturn]] void syntax_error(const char* literal) {
  ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                  errmsg("invalid input syntax for type halfvec: \"%s\"", literal)));
  pg_unreachable();
}

// Parses one element at *p as float4in would (strtof), then rounds it to a
// half. Out of range: beyond float (strtof's ERANGE) or beyond half (a
// finite value that rounds to infinity); NaN and Infinity are rejected.
half parse_element(const char* literal, const char** p) {
  if (**p == '\0') syntax_error(literal);
  char* end;
  errno = 0;
  float value = strtof(*p, &end);
  if (end == *p) syntax_error(literal);
  half h = gknn::float_to_half(value);
  if ((errno == ERANGE && std::isinf(value)) || (gknn::half_is_inf(h) && !std::isinf(value)))
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("\"%s\" is out of range for type halfvec", pnstrdup(*p, end - *p))));
  HalfvecCheckElement(h);
  *p = end;
  return h;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(halfvec_in);
Datum halfvec_in(PG_FUNCTION_ARGS) {
  const char* literal = PG_GETARG_CSTRING(0);
  int32 typmod = PG_GETARG_INT32(2);
  half* values = static_cast<half*>(palloc(sizeof(half) * HALFVEC_MAX_DIM));
  int dim = 0;

  const char* p = skip_space(literal);
  if (*p != '[')
    ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                    errmsg("invalid input syntax for type halfvec: \"%s\"", literal),
                    errdetail("Vector contents must start with \"[\".")));
  p = skip_space(p + 1);
  if (*p == ']') HalfvecCheckDim(0);
  for (;;) {
    if (dim == HALFVEC_MAX_DIM) HalfvecCheckDim(dim + 1);
    p = skip_space(p);
    values[dim++] = parse_element(literal, &p);
    p = skip_space(p);
    if (*p == ',') {
      ++p;
    } else if (*p == ']') {
      ++p;
      break;
    } else {
      syntax_error(literal);
    }
  }
  if (*skip_space(p) != '\0')
    ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                    errmsg("invalid input syntax for type halfvec: \"%s\"", literal),
                    errdetail("Junk after closing right brace.")));
  CheckExpectedDim(typmod, dim);

  HalfVector* result = InitHalfVector(dim);
  memcpy(result->x, values, sizeof(half) * dim);
  pfree(values);
  PG_RETURN_HALFVEC_P(result);
}

// Each element as the shortest text that reads back to the same float4 (as
// pgvector prints it); that text also reads back to the same half.
PG_FUNCTION_INFO_V1(halfvec_out);
Datum halfvec_out(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  char* buf = static_cast<char*>(palloc(v->dim * (FLOAT_SHORTEST_DECIMAL_LEN + 1) + 2));
  char* p = buf;
  *p++ = '[';
  for (int i = 0; i < v->dim; ++i) {
    if (i > 0) *p++ = ',';
    p += float_to_shortest_decimal_bufn(gknn::half_to_float(v->x[i]), p);
  }
  *p++ = ']';
  *p = '\0';
  PG_FREE_IF_COPY(v, 0);
  PG_RETURN_CSTRING(buf);
}

PG_FUNCTION_INFO_V1(halfvec_typmod_in);
Datum halfvec_typmod_in(PG_FUNCTION_ARGS) {
  PG_RETURN_INT32(dims_typmod_in(PG_GETARG_ARRAYTYPE_P(0), "halfvec", HALFVEC_MAX_DIM));
}

// Binary format (pgvector's): uint16 dim, uint16 unused (0), then each
// element's 16 bits, network order. Dimensions are read unsigned, as
// pgvector does, so 0xffff is "more than 16000", not negative.
PG_FUNCTION_INFO_V1(halfvec_recv);
Datum halfvec_recv(PG_FUNCTION_ARGS) {
  StringInfo buf = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
  int32 typmod = PG_GETARG_INT32(2);
  int dim = static_cast<int>(pq_getmsgint(buf, sizeof(int16)));
  int unused = static_cast<int>(pq_getmsgint(buf, sizeof(int16)));
  HalfvecCheckDim(dim);
  CheckExpectedDim(typmod, dim);
  if (unused != 0)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("expected unused to be 0, not %d", unused)));
  HalfVector* result = InitHalfVector(dim);
  for (int i = 0; i < dim; ++i) {
    result->x[i] = static_cast<half>(pq_getmsgint(buf, sizeof(half)));
    HalfvecCheckElement(result->x[i]);
  }
  PG_RETURN_HALFVEC_P(result);
}

PG_FUNCTION_INFO_V1(halfvec_send);
Datum halfvec_send(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  StringInfoData buf;
  pq_begintypsend(&buf);
  pq_sendint16(&buf, static_cast<uint16>(v->dim));
  pq_sendint16(&buf, static_cast<uint16>(v->unused));
  for (int i = 0; i < v->dim; ++i) pq_sendint16(&buf, v->x[i]);
  PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

// Length coercion for halfvec(n): halfvec(halfvec, typmod, is_explicit).
PG_FUNCTION_INFO_V1(halfvec);
Datum halfvec(PG_FUNCTION_ARGS) {
  HalfVector* v = PG_GETARG_HALFVEC_P(0);
  CheckExpectedDim(PG_GETARG_INT32(1), v->dim);
  PG_RETURN_HALFVEC_P(v);
}

}  // extern "C"
