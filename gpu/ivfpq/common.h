// Helpers every IVF-PQ phase shares (not a public header): shapes, argument
// checks, the progress check, cosine normalisation and residuals.
#pragma once

#include <cstdint>
#include <vector>

#include "distance/pad_results.h"
#include "gknn/ivfpq.h"
#include "ivfpq/stored_rows.h"

namespace gknn::ivfpq {

inline int ksub(const Params& p) { return 1 << p.nbits; }
inline int dsub(const Params& p) { return p.dim / p.m; }

// Throws Error(InvalidArgument) when sizes do not match the params.
void check_quantizer(const Quantizer& q);
void check_image(const Image& image);
void check_search(const float* queries, std::int64_t nq, const SearchParams& sp, const std::int64_t* ids,
                  const float* distances);
void check_refined(const float* queries, std::int64_t nq, const SearchParams& sp, const std::int64_t* ids,
                   const double* distances);
void check_exact(const float* queries, std::int64_t nq, int k, const std::int64_t* ids,
                 const double* distances);
// Throws Error(InvalidArgument) unless the image carries its vectors.
void require_vectors(const Image& image);

// Calls fn(rows) with the image's stored vectors as the accessor of their
// element type (stored_rows.h: FloatRows, HalfRows, BitRows): the exact
// searches are written once for every type.
template <typename Fn>
decltype(auto) with_stored_rows(const Image& image, Fn&& fn) {
  switch (vector_element(image)) {
    case VectorElement::Float16:
      return fn(HalfRows{image.half_vectors.data()});
    case VectorElement::Bit:
      return fn(BitRows{image.bit_vectors.data()});
    case VectorElement::Float32:
      break;
  }
  return fn(FloatRows{image.vectors.data()});
}

// PQ candidates re-ranked per query: refine x k, at most every entry (more
// could only add padding); throws when that does not fit an int.
int refine_candidates(const SearchParams& sp, std::int64_t entries);

// Ids as unsigned selection payloads, in the same order (the sign bit
// flipped), so ties broken by ascending payload are ties by ascending id.
inline std::uint64_t id_payload(std::int64_t id) { return std::uint64_t(id) ^ (std::uint64_t(1) << 63); }
inline std::int64_t payload_id(std::uint64_t p) { return std::int64_t(p ^ (std::uint64_t(1) << 63)); }

// The k best of n canonical distances with id payloads (id_payload), by
// distance, NaN last, then id, into ids and distances (k each, padded).
void write_best(const double* keys, const std::uint64_t* payloads, std::int64_t n, int k, std::int64_t* ids,
                double* distances);

// Reports progress; throws Error(Cancelled) when the callback says stop.
void check_progress(const Progress& progress, Phase phase, std::int64_t done, std::int64_t total);

// Scales rows to unit length in place (zero rows stay zero): what cosine
// does to every vector before it is trained on, encoded or searched.
void normalize_rows(float* x, std::int64_t n, int dim);

// A copy of n rows, normalised when the metric is cosine.
std::vector<float> prepared_rows(const Params& p, const float* x, std::int64_t n);

// x - centroid[list_of], row by row (float, the same on every device).
std::vector<float> residuals(const float* x, std::int64_t n, int dim, const float* centroids,
                             const std::int32_t* list_of);

// starts[0..probes] of a query's candidate row (scoring.h, probe_of) for the
// probed `lists`, best first; `offsets` are the image's.
void probe_starts(const std::int64_t* offsets, const std::uint32_t* lists, int probes, std::int64_t* starts);

}  // namespace gknn::ivfpq
