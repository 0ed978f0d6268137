// Shared checks and host-side vector preparation for train, encode, search.
#include "ivfpq/common.h"

#include <algorithm>
#include <limits>

#include "gknn/error.h"
#include "ivfpq/arith.h"

namespace gknn::ivfpq {
namespace {

[[noreturn]] void invalid(const char* what) { throw Error(ErrorCode::InvalidArgument, what); }

}  // namespace

void check_quantizer(const Quantizer& q) {
  validate(q.params);
  const Params& p = q.params;
  if (q.centroids.size() != std::size_t(p.lists) * p.dim)
    invalid("ivfpq: quantizer centroids do not match lists x dim");
  if (q.codebooks.size() != std::size_t(p.m) * ksub(p) * dsub(p))
    invalid("ivfpq: quantizer codebooks do not match m x 2^nbits x dim/m");
}

void check_image(const Image& image) {
  check_quantizer(image.quantizer);
  const auto& off = image.offsets;
  if (off.size() != std::size_t(image.quantizer.params.lists) + 1 || off.front() != 0)
    invalid("ivfpq: image offsets must be lists + 1 entries starting at 0");
  if (!std::is_sorted(off.begin(), off.end())) invalid("ivfpq: image offsets must not decrease");
  if (off.back() != std::int64_t(image.ids.size())) invalid("ivfpq: image ids do not match the last offset");
  if (image.codes.size() != image.ids.size() * std::size_t(code_size(image.quantizer.params)))
    invalid("ivfpq: image codes do not match entries x code_size");
  const std::size_t elements = image.ids.size() * std::size_t(image.quantizer.params.dim);
  const std::size_t bit_bytes = image.ids.size() * std::size_t(bit_row_bytes(image.quantizer.params.dim));
  if (!image.vectors.empty() && image.vectors.size() != elements)
    invalid("ivfpq: image vectors do not match entries x dim");
  if (!image.half_vectors.empty() && image.half_vectors.size() != elements)
    invalid("ivfpq: image half_vectors do not match entries x dim");
  if (!image.bit_vectors.empty() && image.bit_vectors.size() != bit_bytes)
    invalid("ivfpq: image bit_vectors do not match entries x ceil(dim / 8) bytes");
  if (int(!image.vectors.empty()) + int(!image.half_vectors.empty()) + int(!image.bit_vectors.empty()) > 1)
    invalid("ivfpq: an image holds float vectors, half_vectors or bit_vectors, not several");
}

bool has_vectors(const Image& image) {
  const std::size_t elements = image.ids.size() * std::size_t(image.quantizer.params.dim);
  return image.vectors.size() == elements || image.half_vectors.size() == elements ||
         image.bit_vectors.size() ==
             image.ids.size() * std::size_t(bit_row_bytes(image.quantizer.params.dim));
}

VectorElement vector_element(const Image& image) {
  return !image.half_vectors.empty()  ? VectorElement::Float16
         : !image.bit_vectors.empty() ? VectorElement::Bit
                                      : VectorElement::Float32;
}

void require_vectors(const Image& image) {
  if (!has_vectors(image)) invalid("ivfpq: the image holds no vectors (exact distances need them)");
}

namespace {

void check_buffers(const float* queries, std::int64_t nq, int k, const void* ids, const void* distances) {
  if (k < 0) invalid("ivfpq: k must be >= 0");
  if (nq < 0) invalid("ivfpq: nq must be >= 0");
  if (nq > 0 && (!queries || (k > 0 && (!ids || !distances)))) invalid("ivfpq: missing search buffer");
}

}  // namespace

void check_search(const float* queries, std::int64_t nq, const SearchParams& sp, const std::int64_t* ids,
                  const float* distances) {
  check_buffers(queries, nq, sp.k, ids, distances);
  if (sp.probes < 1) invalid("ivfpq: probes must be >= 1");
  if (sp.refine != 0) invalid("ivfpq: refine is for search_refined (0 here)");
}

void check_refined(const float* queries, std::int64_t nq, const SearchParams& sp, const std::int64_t* ids,
                   const double* distances) {
  check_buffers(queries, nq, sp.k, ids, distances);
  if (sp.probes < 1) invalid("ivfpq: probes must be >= 1");
  if (sp.refine < 1) invalid("ivfpq: refine must be >= 1");
}

void check_exact(const float* queries, std::int64_t nq, int k, const std::int64_t* ids,
                 const double* distances) {
  check_buffers(queries, nq, k, ids, distances);
}

int refine_candidates(const SearchParams& sp, std::int64_t entries) {
  const std::int64_t want = std::min(std::int64_t(sp.refine) * sp.k, entries);
  if (want > std::numeric_limits<int>::max()) invalid("ivfpq: refine x k candidates do not fit an int");
  return int(want);
}

void check_progress(const Progress& progress, Phase phase, std::int64_t done, std::int64_t total) {
  if (progress && !progress(phase, done, total)) throw Error(ErrorCode::Cancelled, "ivfpq: cancelled");
}

void normalize_rows(float* x, std::int64_t n, int dim) {
  for (std::int64_t i = 0; i < n; ++i) normalize_row(x + i * dim, dim);
}

std::vector<float> prepared_rows(const Params& p, const float* x, std::int64_t n) {
  std::vector<float> rows(x, x + n * p.dim);
  if (p.metric == Metric::Cosine) normalize_rows(rows.data(), n, p.dim);
  return rows;
}

std::vector<float> residuals(const float* x, std::int64_t n, int dim, const float* centroids,
                             const std::int32_t* list_of) {
  std::vector<float> r(n * dim);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centroids + std::int64_t(list_of[i]) * dim;
    for (int d = 0; d < dim; ++d) r[i * dim + d] = x[i * dim + d] - c[d];
  }
  return r;
}

void probe_starts(const std::int64_t* offsets, const std::uint32_t* lists, int probes, std::int64_t* starts) {
  starts[0] = 0;
  for (int p = 0; p < probes; ++p) starts[p + 1] = starts[p] + offsets[lists[p] + 1] - offsets[lists[p]];
}

}  // namespace gknn::ivfpq
