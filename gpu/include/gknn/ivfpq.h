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
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gknn/distance.h"

namespace gknn::ivfpq {

constexpr int kMinNbits = 4;
constexpr int kMaxNbits = 8;
constexpr int kMaxDim = 16000;  // the vector type's limit

struct Params {
  int dim = 0;
  int lists = 0;  // coarse centroids, >= 1
  int m = 0;      // sub-quantizers, divides dim
  int nbits = 8;  // bits per sub-quantizer code, kMinNbits..kMaxNbits
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
struct Image {
  Quantizer quantizer;
  std::vector<std::int64_t> offsets;  // lists + 1
  std::vector<std::uint8_t> codes;    // offsets.back() x code_size
  std::vector<std::int64_t> ids;      // offsets.back()
};

struct SearchParams {
  int k = 10;      // candidates returned per query
  int probes = 1;  // lists scanned per query (clamped to lists)
};

// Results are nq x k, row-major, best first: ids and PQ-estimated distances in
// the SQL operator's units (L2 distance, negative inner product, cosine
// distance 1 - cos for unit vectors). Order: distance, then probe rank, then
// position in the list. Rows with fewer than k candidates are padded with id
// -1 and distance NaN. Queries are nq x dim, host memory.
void search_cpu(const Image& image, const float* queries, std::int64_t nq, const SearchParams& sp,
                std::int64_t* ids, float* distances);

// A GPU-resident copy of an Image (centroids, codebooks, list codes and ids),
// made once and searched many times. Movable, not copyable; frees its device
// memory when destroyed. Throws Error(NoDevice/OutOfMemory/DeviceFault).
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
  std::size_t device_bytes() const;  // memory held on the GPU
  bool fp16_lut() const;             // LUTs fall back to fp16 (too large for shared memory)

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

}  // namespace gknn::ivfpq
