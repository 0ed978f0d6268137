// Nearest-centroid assignment for training and encoding (not a public
// header), and the GPU encoder built on it.
//
// One call assigns n rows in `groups` independent problems at once: group g
// sees columns [g*dim, (g+1)*dim) of each row and its own k centroids. The
// coarse quantizer is one group of the full dimension; the product quantizer
// is m groups of dim/m (all sub-spaces in one call, one GPU launch). The
// distance is l2_squared_distance(centroid, row) and the winner the first in
// nearer()'s order (arith.h), on the CPU and on the GPU alike.
#pragma once

#include <cstdint>
#include <memory>

#include "gknn/ivfpq.h"

namespace gknn::ivfpq {

struct Groups {
  std::int64_t n = 0;   // rows
  std::int64_t ld = 0;  // row stride in floats: group g of row i is x + i * ld + g * dim
  int dim = 0;
  int k = 0;  // centroids per group: group g's are centroids + g * k * dim
  int groups = 1;
};

// out[g * n + i]: row i's nearest centroid in group g. Rows are independent,
// so blocks of them run on threads with the same result as one thread.
void nearest_cpu(const Groups& s, const float* x, const float* centroids, std::int32_t* out);

// How a GPU assigns (assign_gpu.h): Auto picks per call; tests force each.
enum class AssignPath { Auto, Direct, Gemm };

// The assignments of a k-means: the rows are fixed (on a GPU, uploaded once)
// while the centroids change between calls. device < 0 is the CPU. `rows`
// (n x ld, host) must outlive the Assigner.
class Assigner {
 public:
  Assigner(const float* rows, std::int64_t n, std::int64_t ld, int device,
           AssignPath path = AssignPath::Auto);
  ~Assigner();
  Assigner(const Assigner&) = delete;
  Assigner& operator=(const Assigner&) = delete;

  // out[g * n + i] for centroids groups x k x dim (host), as nearest_cpu.
  void nearest(const float* centroids, int k, int dim, int groups, std::int32_t* out);

 private:
  struct Device;
  const float* rows_;
  std::int64_t n_, ld_;
  std::unique_ptr<Device> device_;
};

// encode() on GPU `device` (arguments already checked): batches pipelined
// over two streams, everything after the upload on the GPU, one download of
// lists and packed codes per batch.
void encode_gpu(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
                std::uint8_t* codes, const Progress& progress);

}  // namespace gknn::ivfpq
