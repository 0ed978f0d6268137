// Distances, norms and normalisation of sparse vectors.
//
// The two operands' stored elements are walked together in index order and
// sums are kept in float, one element at a time in that order: the same
// arithmetic as pgvector's, so the same inputs give the same bits. (Elements
// stored in neither operand contribute nothing to any of these.)
#include <cmath>

#include "sparsevec.h"

namespace {

// Calls both(x, y) for an index stored in a and b, only_a(x) / only_b(y) for
// one stored in a single operand, in ascending index order.
template <typename Both, typename OnlyA, typename OnlyB>
void merge_walk(const SparseVector* a, const SparseVector* b, Both both, OnlyA only_a, OnlyB only_b) {
  const float* ax = SparsevecValues(a);
  const float* bx = SparsevecValues(b);
  int i = 0, j = 0;
  while (i < a->nnz && j < b->nnz) {
    if (a->indices[i] == b->indices[j]) {
      both(ax[i++], bx[j++]);
    } else if (a->indices[i] < b->indices[j]) {
      only_a(ax[i++]);
    } else {
      only_b(bx[j++]);
    }
  }
  for (; i < a->nnz; ++i) only_a(ax[i]);
  for (; j < b->nnz; ++j) only_b(bx[j]);
}

float l2_squared(const SparseVector* a, const SparseVector* b) {
  float sum = 0;
  merge_walk(
      a, b,
      [&](float x, float y) {
        float d = x - y;
        sum += d * d;
      },
      [&](float x) { sum += x * x; }, [&](float y) { sum += y * y; });
  return sum;
}

float dot(const SparseVector* a, const SparseVector* b) {
  float sum = 0;
  merge_walk(
      a, b, [&](float x, float y) { sum += x * y; }, [](float) {}, [](float) {});
  return sum;
}

float l1(const SparseVector* a, const SparseVector* b) {
  float sum = 0;
  merge_walk(
      a, b, [&](float x, float y) { sum += std::fabs(x - y); }, [&](float x) { sum += std::fabs(x); },
      [&](float y) { sum += std::fabs(y); });
  return sum;
}

float squared_norm_float(const SparseVector* v) {
  const float* x = SparsevecValues(v);
  float sum = 0;
  for (int i = 0; i < v->nnz; ++i) sum += x[i] * x[i];
  return sum;
}

double norm_double(const SparseVector* v) {
  const float* x = SparsevecValues(v);
  double sum = 0;
  for (int i = 0; i < v->nnz; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return std::sqrt(sum);
}

// The two sparsevec arguments, checked to have the same dimensions.
struct Pair {
  SparseVector* a;
  SparseVector* b;
};
Pair sparsevec_pair(FunctionCallInfo fcinfo) {
  Pair p{PG_GETARG_SPARSEVEC_P(0), PG_GETARG_SPARSEVEC_P(1)};
  svec::check_dims(p.a, p.b);
  return p;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(sparsevec_l2_distance);
Datum sparsevec_l2_distance(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  PG_RETURN_FLOAT8(std::sqrt(static_cast<double>(l2_squared(p.a, p.b))));
}

// Squared L2, where only the order matters (index support in pgvector).
PG_FUNCTION_INFO_V1(sparsevec_l2_squared_distance);
Datum sparsevec_l2_squared_distance(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(l2_squared(p.a, p.b)));
}

PG_FUNCTION_INFO_V1(sparsevec_inner_product);
Datum sparsevec_inner_product(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(dot(p.a, p.b)));
}

PG_FUNCTION_INFO_V1(sparsevec_negative_inner_product);
Datum sparsevec_negative_inner_product(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(-dot(p.a, p.b)));
}

// 1 - a.b / sqrt(|a|^2 |b|^2), the similarity clamped to [-1, 1]; NaN when
// either vector is zero (or a float sum overflows), as in pgvector.
PG_FUNCTION_INFO_V1(sparsevec_cosine_distance);
Datum sparsevec_cosine_distance(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  double similarity = dot(p.a, p.b);
  double norms = static_cast<double>(squared_norm_float(p.a)) * static_cast<double>(squared_norm_float(p.b));
  similarity /= std::sqrt(norms);
  if (similarity > 1)
    similarity = 1;
  else if (similarity < -1)
    similarity = -1;
  PG_RETURN_FLOAT8(1 - similarity);
}

PG_FUNCTION_INFO_V1(sparsevec_l1_distance);
Datum sparsevec_l1_distance(PG_FUNCTION_ARGS) {
  Pair p = sparsevec_pair(fcinfo);
  PG_RETURN_FLOAT8(static_cast<double>(l1(p.a, p.b)));
}

PG_FUNCTION_INFO_V1(sparsevec_l2_norm);
Datum sparsevec_l2_norm(PG_FUNCTION_ARGS) { PG_RETURN_FLOAT8(norm_double(PG_GETARG_SPARSEVEC_P(0))); }

// Unit vector in the same direction; the zero vector stays zero. Elements
// that underflow to 0 are dropped (a sparsevec stores no zeros).
PG_FUNCTION_INFO_V1(sparsevec_l2_normalize);
Datum sparsevec_l2_normalize(PG_FUNCTION_ARGS) {
  SparseVector* v = PG_GETARG_SPARSEVEC_P(0);
  const float* x = SparsevecValues(v);
  double norm = norm_double(v);
  if (!(norm > 0)) PG_RETURN_SPARSEVEC_P(InitSparseVector(v->dim, 0));

  float* scaled = static_cast<float*>(palloc(sizeof(float) * (v->nnz + 1)));
  int nnz = 0;
  for (int i = 0; i < v->nnz; ++i) {
    scaled[i] = static_cast<float>(x[i] / norm);
    if (std::isinf(scaled[i]))
      ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("value out of range: overflow")));
    nnz += scaled[i] != 0;
  }
  SparseVector* result = InitSparseVector(v->dim, nnz);
  float* rx = SparsevecValues(result);
  for (int i = 0, j = 0; i < v->nnz; ++i)
    if (scaled[i] != 0) {
      result->indices[j] = v->indices[i];
      rx[j++] = scaled[i];
    }
  pfree(scaled);
  PG_RETURN_SPARSEVEC_P(result);
}

}  // extern "C"
