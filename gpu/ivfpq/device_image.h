// DeviceImage's state and its PQ stage, shared by the files that search it
// (search_cuda.cu: the PQ search; refine_cuda.cu: the re-rank;
// exact_cuda.cu: the exact search). Not a public header; CUDA code only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "distance/knn_resident.h"
#include "gknn/ivfpq.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/rows_async.h"

namespace gknn::ivfpq {

// The arguments of the list-scan kernel (search_cuda.cu).
struct ScanArgs {
  const float* queries;       // rows x dim, prepared
  const float* centroids;     // lists x dim
  const float* codebooks;     // m x ksub x dsub
  const std::uint8_t* codes;  // entries x code_size
  const std::int64_t* offsets;
  const std::uint32_t* probe_lists;  // rows x probes
  const float* probe_keys;           // rows x probes (the lists' coarse keys)
  const std::int64_t* starts;        // rows x (probes + 1)
  int probes, dim, m, ksub, dsub, nbits, code_size;
  Metric metric;
  std::int64_t ld;  // candidate row length
  float* cand;      // rows x ld
};

struct CopyRun;
struct DeltaPlan;

// The pruned exact search's bounds (exact_pruned_cuda.cu; list_bounds'
// quantities, on the device and by rank): each stored vector's list and its
// distance (double) to that list's centroid, and each list's radius.
struct PruneBase {
  PruneBase(const float* vectors, const float* centroids, const std::int64_t* d_offsets,
            const std::int64_t* rank, std::int64_t entries, int lists, int dim, cudaStream_t s);
  std::size_t bytes() const {
    return sizeof(std::int32_t) * row_list.size() + sizeof(double) * (row_centre.size() + radius.size());
  }
  DeviceBuffer<std::int32_t> row_list;  // rank -> list
  DeviceBuffer<double> row_centre;      // rank -> distance to its list's centroid
  DeviceBuffer<double> radius;          // list -> largest of its entries' (NaN: one is NaN; 0: empty)
};

struct DeviceImage::Impl {
  Impl(const Image& image, int dev);
  void upload_vectors(const Image& image);
  // The image of `base` after `delta`, as `plan` lays it out (delta_cuda.cu).
  Impl(const Impl& base, const DeltaPlan& plan, const ImageDelta& delta);
  void update_rows(const Impl& base, const DeltaPlan& plan, const ImageDelta& delta,
                   const AsyncBuffer<CopyRun>& list_runs, cudaStream_t s);

  // The PQ stage of a batch of `rows` queries (host, raw): the k best
  // columns of each query's candidate row by PQ distance, and what maps a
  // column back to an entry (starts, probe_lists; scoring.h's layout). The
  // buffers live on stream `s` until the stage is destroyed.
  struct PqStage {
    PqStage(const Impl& im, const float* queries, std::int64_t rows, int probes, int k, cudaStream_t s);
    // A query's candidates: the `probes` largest lists together (checked
    // before the stage's allocation: columns are 32-bit).
    static std::int64_t candidate_row(const Impl& im, int probes);
    std::int64_t rows;
    int probes, k;
    // Every array of the stage in one allocation, the coarse keys and the
    // candidates' PQ keys included: they now live as long as the stage (a
    // refine's peak grows by them, at most 2 x 256 MB for the largest
    // batches batch_rows allows; a service batch's are kilobytes).
    AsyncBuffer<unsigned char> block;
    float* queries;              // rows x dim, prepared (normalised under cosine)
    float* probe_keys;           // rows x probes
    std::uint32_t* probe_lists;  // rows x probes
    std::int64_t* starts;        // rows x (probes + 1)
    float* keys;                 // rows x k, PQ distances
    std::uint32_t* cols;         // rows x k, columns (~0 or >= starts[probes]: padding)

   private:
    // Where each array starts in `block` (BlockLayout offsets), and its size.
    struct Layout {
      std::size_t bytes, queries, probe_keys, probe_lists, starts, keys, cols, ckeys, cand;
    };
    static Layout lay_out(const Impl& im, std::int64_t rows, int probes, int k);
    PqStage(const Impl& im, const float* queries, std::int64_t rows, int probes, int k, cudaStream_t s,
            const Layout& at);
  };

  void search_batch(const float* queries, std::int64_t rows, int probes, int k, cudaStream_t s,
                    std::int64_t* ids, float* distances) const;
  void refine_batch(const float* queries, std::int64_t rows, int probes, int count, int k, cudaStream_t s,
                    std::int64_t* ids, double* distances) const;
  // Queries per batch: the largest buffer (a row of `row_elems`, or the
  // coarse keys, or the candidates of the `probes` largest lists) near
  // kBatchElems elements.
  std::int64_t batch_rows(int probes, std::int64_t row_elems) const;
  void launch_scan(const ScanArgs& a, std::int64_t rows, cudaStream_t s) const;

  int device;
  Params params;
  std::int64_t entries;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> largest;  // largest[p]: entries in the p largest lists
  bool fp16 = false;
  DeviceBuffer<float> centroids, codebooks;
  DeviceBuffer<std::uint8_t> codes;
  DeviceBuffer<std::int64_t> ids, d_offsets;
  // The stored vectors, in id order (ties by entry): row r of `vectors` is
  // the entry of rank r, so a selection whose ties go by row goes by id.
  bool with_vectors = false;
  VectorElement element = VectorElement::Float32;  // of the stored vectors
  DeviceBuffer<float> vectors;                     // Float32: entries x dim, by rank
  DeviceBuffer<unsigned char> packed;              // Float16, Bit: rows as stored_rows.h reads them, by rank
  DeviceBuffer<std::int64_t> rank;                 // entry -> rank
  DeviceBuffer<std::int64_t> ranked_ids;           // rank -> id
  // The exact search's GEMM half of the vectors, made by the first exact
  // search that takes the GEMM path (search_exact is const and may run on
  // several threads at once: the mutex guards the making).
  const GemmBase* gemm_base() const;
  // An exact kNN request over the float vectors (exact_cuda.cu).
  KnnRequest exact_request(const float* queries, std::int64_t nq, int k) const;
  mutable std::mutex gemm_mu;
  mutable std::unique_ptr<GemmBase> gemm;
  // The same for the pruned exact search's bounds (float vectors only).
  const PruneBase* prune_base(cudaStream_t s) const;
  mutable std::mutex prune_mu;
  mutable std::unique_ptr<PruneBase> prune;
  // The share of the distances its recent pruned calls computed, and
  // whether the next call prunes (exact_pruned_cuda.cu).
  bool prune_now(Pruning pruning) const;
  void note_pruned(std::int64_t computed, std::int64_t possible) const;
  mutable std::atomic<float> prune_share{0.0f};
  mutable std::atomic<std::uint32_t> prune_skips{0};
};

// The k best columns of each row (len keys at stride len), (key, column)
// order, short rows padded with column ~0: select_rows_gpu up to its k
// limit, beyond it one select_topk_gpu per row (same order, same result).
template <typename Key>
void select_best(const Key* keys, std::int64_t rows, std::int64_t len, int k, Key* out_keys,
                 std::uint32_t* out_cols, cudaStream_t s) {
  if (k <= kMaxRowK)
    return select_rows_async<Key, std::uint32_t>(keys, rows, len, len, k, SelectOrder::Smallest, out_keys,
                                                 out_cols, s);
  GKNN_CUDA(cudaMemsetAsync(out_cols, 0xff, sizeof(std::uint32_t) * rows * k, s));
  for (std::int64_t r = 0; r < rows; ++r)
    select_topk_gpu<Key, std::uint32_t>(keys + r * len, nullptr, len, k, SelectOrder::Smallest,
                                        out_keys + r * k, out_cols + r * k, s);
}

}  // namespace gknn::ivfpq
