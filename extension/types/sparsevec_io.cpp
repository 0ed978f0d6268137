// Text and binary input/output of sparsevec, its type modifier, the
// sparsevec(n) length coercion and the checks every sparsevec input shares.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "typmod.h"
#include "sparsevec.h"
#include "vector.h"

extern "C" {
#include "common/shortest_dec.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
}

SparseVector* InitSparseVector(int dim, int nnz) {
  Size size = SparsevecSize(nnz);
  SparseVector* v = static_cast<SparseVector*>(palloc0(size));
  SET_VARSIZE(v, size);
  v->dim = dim;
  v->nnz = nnz;
  return v;
}

namespace svec {

void check_dim(int dim) {
  if (dim < 1)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("sparsevec must have at least 1 dimension")));
  if (dim > SPARSEVEC_MAX_DIM)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("sparsevec cannot have more than %d dimensions", SPARSEVEC_MAX_DIM)));
}

void check_nnz(int nnz, int dim) {
  if (nnz < 0)
    ereport(ERROR,
            (errcode(ERRCODE_DATA_EXCEPTION), errmsg("sparsevec cannot have negative number of elements")));
  if (nnz > SPARSEVEC_MAX_NNZ)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("sparsevec cannot have more than %d non-zero elements", SPARSEVEC_MAX_NNZ)));
  if (nnz > dim)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("sparsevec cannot have more elements than dimensions")));
}

void check_index(const int32* indices, int i, int dim) {
  if (indices[i] < 0 || indices[i] >= dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("sparsevec index out of bounds")));
  if (i > 0 && indices[i] < indices[i - 1])
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("sparsevec indices must be in ascending order")));
  if (i > 0 && indices[i] == indices[i - 1])
    ereport(ERROR,
            (errcode(ERRCODE_DATA_EXCEPTION), errmsg("sparsevec indices must not contain duplicates")));
}

void check_element(float value) {
  if (std::isnan(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("NaN not allowed in sparsevec")));
  if (std::isinf(value))
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("infinite value not allowed in sparsevec")));
}

void check_dims(const SparseVector* a, const SparseVector* b) {
  if (a->dim != b->dim)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                    errmsg("different sparsevec dimensions %d and %d", a->dim, b->dim)));
}

}  // namespace svec

namespace {

// One `index:value` of the text form; the index is still 1-based and may be
// anything strtol returned (checked once the elements are sorted).
struct TextElement {
  long index;
  float value;
};

// The white space pgvector accepts, independent of locale.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

const char* skip_space(const char* p) {
  while (is_space(*p)) ++p;
  return p;
}

[[noreturn]] void syntax_error(const char* literal, const char* detail = nullptr) {
  if (detail)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
             errmsg("invalid input syntax for type sparsevec: \"%s\"", literal), errdetail("%s", detail)));
  ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                  errmsg("invalid input syntax for type sparsevec: \"%s\"", literal)));
  pg_unreachable();
}

// A base-10 integer at *p (strtol: optional sign, leading white space).
long parse_integer(const char* literal, const char** p) {
  char* end;
  errno = 0;
  long value = strtol(*p, &end, 10);  // saturates on overflow, which the range checks then reject
  if (end == *p) syntax_error(literal);
  *p = end;
  return value;
}

// A float4 at *p (strtof, like float4in: no double rounding). Values that
// overflow or underflow to zero are errors, as in float4in.
float parse_value(const char* literal, const char** p) {
  char* end;
  errno = 0;
  float value = strtof(*p, &end);
  if (end == *p) syntax_error(literal);
  if (errno == ERANGE && (value == 0 || std::isinf(value)))
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("\"%s\" is out of range for type sparsevec", pnstrdup(*p, end - *p))));
  svec::check_element(value);
  *p = end;
  return value;
}

// The elements between '{' and '}' (p is just after '{'): the non-zero ones
// are stored in `out`, whose room `capacity` the caller sized by counting
// commas. Returns the position after '}'.
const char* parse_elements(const char* literal, const char* p, TextElement* out, int capacity, int* nnz) {
  p = skip_space(p);
  if (*p == '}') return p + 1;
  for (int seen = 0;; ++seen) {
    if (seen >= capacity) syntax_error(literal);  // cannot happen: capacity counts the commas
    p = skip_space(p);
    if (*p == '\0') syntax_error(literal);
    long index = parse_integer(literal, &p);
    p = skip_space(p);
    if (*p != ':') syntax_error(literal);
    p = skip_space(p + 1);
    float value = parse_value(literal, &p);
    if (value != 0) out[(*nnz)++] = TextElement{index, value};  // zeros are not stored
    p = skip_space(p);
    if (*p == '}') return p + 1;
    if (*p != ',') syntax_error(literal);
    ++p;
  }
}

// The dimension after '/', clamped into int so that the range check words
// the error (as pgvector does for 2^31 and beyond).
int parse_dim(const char* literal, const char** p) {
  long dim = parse_integer(literal, p);
  if (dim > INT_MAX) return INT_MAX;
  if (dim < INT_MIN) return INT_MIN;
  return static_cast<int>(dim);
}

// Index `index` (1-based, as typed) as a 0-based int32 for check_index:
// anything outside int32 is out of bounds for every dimension.
int32 zero_based(long index) {
  if (index > INT_MAX) return INT_MAX;
  if (index <= INT_MIN) return -1;
  return static_cast<int32>(index - 1);
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(sparsevec_in);
Datum sparsevec_in(PG_FUNCTION_ARGS) {
  const char* literal = PG_GETARG_CSTRING(0);
  int32 typmod = PG_GETARG_INT32(2);

  // Every element but the last is followed by a comma: too many elements is
  // an error before anything is parsed, zeros included (as in pgvector).
  int capacity = 1;
  for (const char* c = literal; *c; ++c)
    if (*c == ',' && ++capacity > SPARSEVEC_MAX_NNZ)
      ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                      errmsg("sparsevec cannot have more than %d non-zero elements", SPARSEVEC_MAX_NNZ)));
  TextElement* elements = static_cast<TextElement*>(palloc(sizeof(TextElement) * capacity));
  int nnz = 0;

  const char* p = skip_space(literal);
  if (*p != '{') syntax_error(literal, "Vector contents must start with \"{\".");
  p = skip_space(parse_elements(literal, p + 1, elements, capacity, &nnz));
  if (*p != '/') syntax_error(literal, "Unexpected end of input.");
  p = skip_space(p + 1);
  int dim = parse_dim(literal, &p);
  if (*skip_space(p) != '\0') syntax_error(literal, "Junk after closing.");
  svec::check_dim(dim);
  CheckExpectedDim(typmod, dim);

  // Text may list elements in any order; the stored form is sorted, and a
  // repeated index is an error.
  std::sort(elements, elements + nnz,
            [](const TextElement& a, const TextElement& b) { return a.index < b.index; });
  SparseVector* result = InitSparseVector(dim, nnz);
  float* values = SparsevecValues(result);
  for (int i = 0; i < nnz; ++i) {
    result->indices[i] = zero_based(elements[i].index);
    values[i] = elements[i].value;
    svec::check_index(result->indices, i, dim);
  }
  pfree(elements);
  PG_RETURN_SPARSEVEC_P(result);
}

// '{i:v,...}/dim' with 1-based indices and the shortest text that reads back
// to the same float, as vector_out writes elements.
PG_FUNCTION_INFO_V1(sparsevec_out);
Datum sparsevec_out(PG_FUNCTION_ARGS) {
  SparseVector* v = PG_GETARG_SPARSEVEC_P(0);
  const float* values = SparsevecValues(v);
  // Per element: an index (at most 11 chars with a sign), ':', a float, ','.
  // Then '{', '}', '/', the dimension (11) and the terminator.
  const Size per_element = 11 + 1 + FLOAT_SHORTEST_DECIMAL_LEN + 1;
  char* buf = static_cast<char*>(palloc(per_element * static_cast<Size>(v->nnz) + 16));
  char* p = buf;
  *p++ = '{';
  for (int i = 0; i < v->nnz; ++i) {
    if (i > 0) *p++ = ',';
    p += pg_ltoa(v->indices[i] + 1, p);
    *p++ = ':';
    p += float_to_shortest_decimal_bufn(values[i], p);
  }
  *p++ = '}';
  *p++ = '/';
  p += pg_ltoa(v->dim, p);
  *p = '\0';
  PG_FREE_IF_COPY(v, 0);
  PG_RETURN_CSTRING(buf);
}

PG_FUNCTION_INFO_V1(sparsevec_typmod_in);
Datum sparsevec_typmod_in(PG_FUNCTION_ARGS) {
  PG_RETURN_INT32(dims_typmod_in(PG_GETARG_ARRAYTYPE_P(0), "sparsevec", SPARSEVEC_MAX_DIM));
}

// Binary format (network order): int32 dim, int32 nnz, int32 unused (0),
// int32 indices[nnz] (0-based, ascending), float4 values[nnz] (non-zero).
// Everything is checked before it is stored: a binary COPY file is input.
PG_FUNCTION_INFO_V1(sparsevec_recv);
Datum sparsevec_recv(PG_FUNCTION_ARGS) {
  StringInfo buf = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
  int32 typmod = PG_GETARG_INT32(2);
  int32 dim = static_cast<int32>(pq_getmsgint(buf, sizeof(int32)));
  int32 nnz = static_cast<int32>(pq_getmsgint(buf, sizeof(int32)));
  int32 unused = static_cast<int32>(pq_getmsgint(buf, sizeof(int32)));
  svec::check_dim(dim);
  svec::check_nnz(nnz, dim);
  CheckExpectedDim(typmod, dim);
  if (unused != 0)
    ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION), errmsg("expected unused to be 0, not %d", unused)));

  SparseVector* result = InitSparseVector(dim, nnz);
  float* values = SparsevecValues(result);
  for (int i = 0; i < nnz; ++i) {
    result->indices[i] = static_cast<int32>(pq_getmsgint(buf, sizeof(int32)));
    svec::check_index(result->indices, i, dim);
  }
  for (int i = 0; i < nnz; ++i) {
    values[i] = pq_getmsgfloat4(buf);
    svec::check_element(values[i]);
    if (values[i] == 0)
      ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                      errmsg("binary representation of sparsevec cannot contain zero values")));
  }
  PG_RETURN_SPARSEVEC_P(result);
}

PG_FUNCTION_INFO_V1(sparsevec_send);
Datum sparsevec_send(PG_FUNCTION_ARGS) {
  SparseVector* v = PG_GETARG_SPARSEVEC_P(0);
  const float* values = SparsevecValues(v);
  StringInfoData buf;
  pq_begintypsend(&buf);
  pq_sendint32(&buf, static_cast<uint32>(v->dim));
  pq_sendint32(&buf, static_cast<uint32>(v->nnz));
  pq_sendint32(&buf, static_cast<uint32>(v->unused));
  for (int i = 0; i < v->nnz; ++i) pq_sendint32(&buf, static_cast<uint32>(v->indices[i]));
  for (int i = 0; i < v->nnz; ++i) pq_sendfloat4(&buf, values[i]);
  PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

// Length coercion for sparsevec(n): sparsevec(sparsevec, typmod, is_explicit).
PG_FUNCTION_INFO_V1(sparsevec);
Datum sparsevec(PG_FUNCTION_ARGS) {
  SparseVector* v = PG_GETARG_SPARSEVEC_P(0);
  CheckExpectedDim(PG_GETARG_INT32(1), v->dim);
  PG_RETURN_SPARSEVEC_P(v);
}

}  // extern "C"
