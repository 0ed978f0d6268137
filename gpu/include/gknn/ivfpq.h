// IVF-PQ (IVFADC, Jégou et al., as built on the GPU in the Faiss paper):
// a coarse quantizer of `lists` centroids, and a product quantizer of the
// residual x - centroid with `m` sub-quantizers of 2^nbits codewords each.
//
// The core knows nothing of pages or PostgreSQL: the extension trains a
// Quantizer from a sample, encodes vectors into (list, code) pairs, keeps them
// in its pages, and hands a flat Image back for search. Every operation has a
// CPU reference and a GPU implementation with the same contract:
//
// - training and encoding give bit-identical results on the CPU and the GPU
//   (assignments are exact nearest-centroid searches with the shared distance
//   code, means are summed in one fixed order), so a CPU-built and a
//   GPU-built index are the same index;
// - search computes the same float PQ distances on both (LUT entries and their
//   sum over the m sub-quantizers in one fixed order, fp32), so both return
//   the same candidates; the GPU may only fall back to fp16 LUTs where the
//   fp32 table does not fit in shared memory, and says so (Image stats).
//
// Metrics: L2 and inner product are searched as such; cosine normalises every
// vector (training sample, encoded vectors, queries) and searches by L2, whose
// order on unit vectors is the cosine order. A zero vector under cosine stays
// zero.
//
// An image may also carry each entry's full vector. Two searches then give
// exact distances: search_refined re-ranks the PQ search's refine x k best
// candidates, and search_exact ranks every entry. Both return the value of
// the SQL operator, gknn::distance(metric, vector, query), and order rows by
// (that distance, NaN last, id), the order of the SQL query with ties by TID;
// CPU and GPU give the same rows and the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gknn/distance.h"
#include "gknn/knn.h"

namespace gknn::ivfpq {

constexpr int kMinNbits = 4;
constexpr int kMaxNbits = 8;
constexpr int kMaxDim = 16000;  // the vector type's limit

struct Params {
  int dim = 0;
  int lists = 0;               // coarse centroids, >= 1
  int m = 0;                   // sub-quantizers, divides dim
  int nbits = 8;               // bits per sub-quantizer code, kMinNbits..kMaxNbits
  Metric metric = Metric::L2;  // L2, InnerProduct or Cosine
  int kmeans_iters = 10;       // Lloyd iterations, coarse and PQ, >= 1
  std::uint64_t seed = 1234;   // the only source of randomness in training
};

// Throws Error(InvalidArgument) naming the offending parameter.
void validate(const Params& p);

// Bytes of one encoded vector: m codes of nbits bits, packed little-endian
// (code j occupies bits [j*nbits, (j+1)*nbits) of the byte string).
int code_size(const Params& p);

// The trained part of an index (what the centroid and codebook pages hold).
struct Quantizer {
  Params params;
  std::vector<float> centroids;  // lists x dim
  std::vector<float> codebooks;  // m x 2^nbits x (dim / m)
};

// Training and encoding report progress and ask whether to go on: `done` of
// `total` units of the current phase. Returning false aborts the operation
// with Error(Cancelled). Called between batches, never from a GPU thread.
enum class Phase { CoarseKmeans, PqKmeans, Encode };
using Progress = std::function<bool(Phase phase, std::int64_t done, std::int64_t total)>;

// Where work runs: device < 0 is the CPU, otherwise the CUDA ordinal.
constexpr int kCpu = -1;

// k-means on `sample` (n x dim, host memory; n >= 1). With fewer sample rows
// than lists, the lists are clamped to n (the returned params say so).
// Initialisation: distinct random sample rows from `seed`; an empty cluster
// takes half of the largest cluster (split by a small perturbation), as in
// Faiss. The PQ is trained on the residuals of the sample to its coarse
// centroids.
Quantizer train(const Params& p, const float* sample, std::int64_t n, int device,
                const Progress& progress = {});

// Encodes n vectors (n x dim, host): list_of[i] is the nearest centroid (ties
// by lower list number), codes + i * code_size the PQ code of the residual.
void encode(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
            std::uint8_t* codes, const Progress& progress = {});

// The searchable form of an index, flat: list l holds entries
// [offsets[l], offsets[l+1]) of codes (code_size bytes each) and ids (the
// extension's heap TIDs as integers).
//
// `vectors` (float elements: vector columns), `half_vectors` (binary16
// elements as their 16 bits: halfvec columns) or `bit_vectors` (bit strings:
// ceil(dim / 8) bytes per entry, the first element in the most significant
// bit, as PostgreSQL's bit type stores them), at most one of them not
// empty, holds each entry's full vector, in the order of `ids`: the raw
// vectors as the table stores them, under cosine too (not normalised),
// because the exact searches must reproduce the SQL operator's value, which
// gknn::distance computes on the raw elements (halves widened to float,
// exactly as the halfvec operators do). For bit strings the exact distance
// is the Hamming distance (the <~> operator; the quantizer's metric is L2
// over the 0/1 values, whose square is the Hamming distance). Everything
// else in the image (the quantizer, the codes, the queries) is float
// whatever the element type: halves are trained on, encoded and searched as
// their float values, bits as 0 and 1. All empty means not stored: the
// image then serves search and search_cpu only, as before. (An image of no
// entries holds its zero vectors either way.)
struct Image {
  Quantizer quantizer;
  std::vector<std::int64_t> offsets;        // lists + 1
  std::vector<std::uint8_t> codes;          // offsets.back() x code_size
  std::vector<std::int64_t> ids;            // offsets.back()
  std::vector<float> vectors;               // empty, or offsets.back() x dim
  std::vector<std::uint16_t> half_vectors;  // empty, or offsets.back() x dim binary16 values
  std::vector<std::uint8_t> bit_vectors;    // empty, or offsets.back() x ceil(dim / 8) bytes
};

// Whether `image` carries its entries' vectors (the exact searches need them).
bool has_vectors(const Image& image);
// The element type of the vectors an image stores (Float32 when none).
enum class VectorElement { Float32, Float16, Bit };
VectorElement vector_element(const Image& image);

struct SearchParams {
  int k = 10;      // candidates returned per query
  int probes = 1;  // lists scanned per query (clamped to lists)
  // search_refined only (>= 1 there; 0 elsewhere): the PQ search takes
  // refine x k candidates, re-ranked by their exact distance.
  int refine = 0;
};

// Results are nq x k, row-major, best first: ids and PQ-estimated distances in
// the SQL operator's units (L2 distance, negative inner product, cosine
// distance 1 - cos for unit vectors). Order: distance, then probe rank, then
// position in the list. Rows with fewer than k candidates are padded with id
// -1 and distance NaN. Queries are nq x dim, host memory.
void search_cpu(const Image& image, const float* queries, std::int64_t nq, const SearchParams& sp,
                std::int64_t* ids, float* distances);

// Exact searches over an image with vectors (else Error(InvalidArgument)).
// Results are nq x k, row-major, best first: ids, and distances as
// gknn::distance(metric, vector, query, dim) computes them (the SQL
// operator's float8), canonical as gknn::exact_knn returns them (one NaN,
// -0 as +0). Order: distance, NaN last, then id ascending. Rows with fewer
// than k entries are padded with id -1 and distance NaN. Queries are raw
// (nq x dim, host memory; cosine normalises nothing here).
//
// search_refined: the refine x k best candidates of search_cpu's PQ search
// (same probes, same candidates), re-ranked; k of them returned.
void search_refined_cpu(const Image& image, const float* queries, std::int64_t nq, const SearchParams& sp,
                        std::int64_t* ids, double* distances);
// search_exact: every entry ranked (recall 1); lists play no part.
void search_exact_cpu(const Image& image, const float* queries, std::int64_t nq, int k, std::int64_t* ids,
                      double* distances);

// Each entry's distance (in double) to its list's coarse centroid, and each
// list's radius (the largest of its entries'; 0 for an empty list; NaN where
// an element is NaN), for an L2 image with float vectors (else
// Error(InvalidArgument)), and the list sizes they were made for. They
// describe the image as it is: made again after any change to it.
// Whether an image's metric and elements admit list bounds (L2, float
// vectors); list_bounds needs the vectors too.
bool prunable(const Image& image);
struct ListBounds {
  std::vector<double> centre_distance;  // entries
  std::vector<double> radius;           // lists
  std::vector<std::int64_t> offsets;    // the image's offsets when made
};
ListBounds list_bounds(const Image& image);
struct ImageDelta;  // gknn/ivfpq_delta.h
// The bounds of `after` = apply_delta(image, delta) from `before`, the
// bounds of `image`: the entries the delta keeps keep their distances (the
// same entry, vector and list), its new entries' are computed; the radii
// follow. Equal to list_bounds(after), at the cost of the new entries only.
// Throws Error(InvalidArgument) where `before` was not made for the image
// the delta applies to, or `after` is not what it makes.
ListBounds list_bounds_after(const ListBounds& before, const ImageDelta& delta, const Image& after);

// search_exact_cpu's results, reading only the lists, and the entries of
// them, that may hold one: the lists in order of their lower bound (the
// query's distance to the centroid less the radius: no entry of the list is
// nearer, by the triangle inequality) until the next bound exceeds the k-th
// best distance found by more than the distances' rounding can explain (a
// relative margin); within a list, only the entries whose distance to the
// centroid differs from the query's by at most that k-th best (again with
// the margin). Every skipped entry is then farther than the k-th best, so
// the answer, ties by id included, is the full scan's.
// Returns the entries whose distance was computed (over all queries). Throws
// Error(InvalidArgument) where `bounds` were not made for an image of these
// lists (offsets differ).
std::int64_t search_exact_pruned_cpu(const Image& image, const ListBounds& bounds, const float* queries,
                                     std::int64_t nq, int k, std::int64_t* ids, double* distances);

// Whether DeviceImage::search_exact_pruned prunes every call or only where
// its recent calls show pruning pays.
enum class Pruning { Adaptive, Always };

// A GPU-resident copy of an Image (centroids, codebooks, list codes and ids,
// and the vectors where the image has them, kept in id order so that the
// exact kNN code's ties by row are ties by id), made once and searched many
// times. Movable, not copyable; frees its device memory when destroyed.
// Throws Error(NoDevice/OutOfMemory/DeviceFault).
class DeviceImage {
 public:
  DeviceImage(const Image& image, int device);
  ~DeviceImage();
  DeviceImage(DeviceImage&&) noexcept;
  DeviceImage& operator=(DeviceImage&&) noexcept;
  DeviceImage(const DeviceImage&) = delete;
  DeviceImage& operator=(const DeviceImage&) = delete;

  // Same contract and same results as search_cpu (fp32 LUTs).
  void search(const float* queries, std::int64_t nq, const SearchParams& sp, std::int64_t* ids,
              float* distances) const;
  // Same contract and same results as search_refined_cpu: the PQ stage as
  // search, then the candidates' exact distances from the resident vectors
  // and the k best by (distance, id) with the project's row selection.
  void search_refined(const float* queries, std::int64_t nq, const SearchParams& sp, std::int64_t* ids,
                      double* distances) const;
  // Same contract and same results as search_exact_cpu, through the exact
  // kNN code of gknn/knn.h over the resident vectors (fused kernel, or GEMM
  // in `precision` with the certified re-rank, as gknn/plan.h chooses; the
  // precision changes the speed, never the results).
  void search_exact(const float* queries, std::int64_t nq, int k, std::int64_t* ids, double* distances,
                    GemmPrecision precision = GemmPrecision::Fp32) const;
  // search_exact's results (so search_exact_cpu's, bit for bit), computing
  // only the distances that search_exact_pruned_cpu's bounds leave: per
  // query a first k-th best from the entries of its nearest lists, then
  // every entry whose list bound or ring bound (with the same margins) does
  // not exceed it, in the exact scan's passes (the rest keep an infinite
  // key). On prunable images (L2, float vectors) with k up to kMaxRowK;
  // elsewhere it is search_exact. The bounds are made on the device by the
  // first call and kept (device_bytes counts them). Adaptive: where the
  // image's recent calls computed a large share of the distances (lists
  // that span clusters), the whole scan, which is then faster, with a
  // pruned call now and then; Always: pruned wherever the bounds apply.
  // `computed`: the distances computed (nq x entries for a whole scan).
  void search_exact_pruned(const float* queries, std::int64_t nq, int k, std::int64_t* ids, double* distances,
                           std::int64_t* computed = nullptr, Pruning pruning = Pruning::Adaptive) const;
  // A new DeviceImage of this one's image after `delta` (gknn/ivfpq_delta.h),
  // on the same device: the arrays are gathered on the GPU from this
  // image's plus the delta's new entries, so only those cross the bus. This
  // image is left as it was (searches may run on it meanwhile). Throws as
  // apply_delta does when the delta does not fit, and as the constructor.
  DeviceImage updated(const ImageDelta& delta) const;
  // Copies the ids of entries [first, first + count) (list order) to `out`
  // (host); Error(InvalidArgument) past the entries.
  void copy_ids(std::int64_t first, std::int64_t count, std::int64_t* out) const;
  std::size_t device_bytes() const;  // memory held on the GPU, vectors included
  bool fp16_lut() const;             // LUTs fall back to fp16 (too large for shared memory)
  bool has_vectors() const;          // the image's vectors are resident (exact searches work)

 private:
  struct Impl;
  explicit DeviceImage(Impl* impl) : impl_(impl) {}
  Impl* impl_ = nullptr;
};

}  // namespace gknn::ivfpq
