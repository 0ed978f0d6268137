// The GPU service's resident index images: loaded once (shipped by the first
// backend that needed them), searched by every session, evicted least
// recently used first when a device's budget is full. PostgreSQL-free: it
// throws gknn::Error, and the worker turns that into a reply.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gknn/graph.h"
#include "gknn/ivfpq.h"
#include "ivfpq/exact_bounds.h"
#include "ivfpq/ivfpq_pagemap.h"

namespace gknn_service {

// "WHAT needs N kB, more than gknn.gpu_memory_limit allows (B kB)", kB
// rounded up: the message of whatever does not fit the budget (images,
// builds, GpuTopK sessions).
inline std::string over_budget(const std::string& what, std::int64_t need, std::int64_t budget) {
  const auto kb = [](std::int64_t bytes) { return std::to_string((bytes + 1023) >> 10); };
  return what + " needs " + kb(need) + " kB, more than gknn.gpu_memory_limit allows (" + kb(budget) + " kB)";
}

// An image's identity: database, index, relfilenode (3 numbers), generation.
struct ResidentKey {
  std::uint32_t database = 0, index = 0, spc = 0, db = 0, rel = 0;
  std::uint64_t generation = 0;
  bool same_index(const ResidentKey& o) const {
    return database == o.database && index == o.index && spc == o.spc && db == o.db && rel == o.rel;
  }
  bool operator==(const ResidentKey& o) const { return same_index(o) && generation == o.generation; }
};

// A gpu_graph image as shipped (service_graph_images.cpp): the graph over
// the index's live rows, their vectors and heap TIDs (as ids), and the seed
// its searches start from.
struct GraphImageData {
  gknn::graph::Graph graph;
  std::vector<float> vectors;     // rows x dim
  std::vector<std::int64_t> ids;  // heap TID of each row
  int dim = 0;
  gknn::Metric metric = gknn::Metric::L2;
  std::uint64_t seed = 0;
};

// A resident image: a gpu_ivfpq one (params, host or gpu) or a gpu_graph
// one (graph, graph_gpu), by `kind` (ImageKind).
struct Resident {
  ResidentKey key;
  int kind = 0;     // ImageKind (service_shmem.h): kImageIvfpq or kImageGraph
  int device = -1;  // -1: searched on the CPU
  gknn::ivfpq::Params params;
  std::unique_ptr<gknn::ivfpq::Image> host;  // kept only for CPU search
  // host's bounds for its exact search (made on first use per generation)
  std::unique_ptr<ExactBoundsCache> exact_bounds = std::make_unique<ExactBoundsCache>();
  std::unique_ptr<gknn::ivfpq::DeviceImage> gpu;  // on `device`
  std::unique_ptr<IvfpqPageMap> pages;  // where its entries sit in the index's pages (null: no deltas)
  // A graph: its rows' heap ids, dim, metric and seed always; the graph and
  // vectors too when searched on the CPU (graph_gpu null), else on `device`.
  std::unique_ptr<GraphImageData> graph;
  std::unique_ptr<gknn::graph::DeviceGraph> graph_gpu;
  std::int64_t bytes = 0, entries = 0, hits = 0;
  std::int64_t loaded_us = 0, last_used_us = 0;
};

class ResidentImages {
 public:
  // devices: the CUDA ordinals to place images on (empty: CPU images);
  // budget: bytes per device (or for the CPU).
  ResidentImages(std::vector<int> devices, std::int64_t budget);

  // A smaller budget evicts least recently used images down to it.
  void set_budget(std::int64_t budget);
  std::int64_t budget() const { return budget_; }
  std::int64_t used() const;

  // The resident image of `key`, or null. Shared: a search running on an
  // executor thread keeps its image alive if it is evicted meanwhile (its
  // memory goes when that search ends).
  std::shared_ptr<Resident> find(const ResidentKey& key, std::int64_t now_us);
  // The resident image a search of `key` may use: its generation or a newer
  // one of the same index (relfilenode included), or null. A newer image
  // holds every entry of the older that a snapshot taken before the older
  // was read can see (VACUUM removes only entries that no snapshot sees;
  // the entries added since belong to rows the executor finds invisible to
  // it, or visible ones it would have found anyway), so an answer from it
  // is as right; under a stream of inserts, sessions then do not chase one
  // generation after another.
  std::shared_ptr<Resident> find_for_search(const ResidentKey& key, std::int64_t now_us);

  // Shipping, per requester (its slot number): the shape, then pieces of
  // each array, then finish() validates it and makes it resident (evicting
  // least recently used images to fit; Error(OutOfMemory) if it cannot).
  // vectors: StoredVectors.
  void begin(int requester, const ResidentKey& key, const gknn::ivfpq::Params& params, std::int64_t entries,
             int vectors, std::int64_t pages);
  // Section: 0 centroids, 1 codebooks, 2 offsets, 3 codes, 4 ids, 5 vectors
  // (bytes; float, binary16 or bit elements, as begin said), 6 pages per
  // list (lists + 1 offsets), 7 page blocks, 8 page items.
  void piece(int requester, int section, std::int64_t offset, const void* data, std::int64_t bytes);
  // Null when a newer generation of the index arrived meanwhile (kept).
  // A graph's pieces and finish go to piece_graph / finish_graph.
  Resident* finish(int requester, std::int64_t now_us);
  void abandon(int requester) {
    staging_.erase(requester);
    delta_staging_.erase(requester);
    graph_staging_.erase(requester);
  }

  // gpu_graph images (service_graph_images.cpp), shipped the same way: the
  // shape (rows, degree, entries, dim, metric, seed), pieces of each array
  // (GraphSection), then finish_graph() validates the graph
  // (gknn::graph::validate, ids and sizes) and makes it resident on the
  // least used device (a DeviceGraph), or on the CPU, evicting least
  // recently used images of either kind to fit (Error(OutOfMemory) if it
  // cannot).
  void begin_graph(int requester, const ResidentKey& key, std::int64_t rows, int degree, std::int64_t entries,
                   int dim, gknn::Metric metric, std::uint64_t seed);
  void piece_graph(int requester, int section, std::int64_t offset, const void* data, std::int64_t bytes);
  Resident* finish_graph(int requester, std::int64_t now_us);
  bool graph_staged(int requester) const { return graph_staging_.count(requester) > 0; }
  // nq graph searches of one resident graph image (sp.seed: the image's),
  // k = sp.k rows each, best first: heap ids (-1 padding) and distances.
  // Executor threads run it, several at once.
  static void search_graph(const Resident& r, const float* queries, std::int64_t nq,
                           const gknn::graph::SearchParams& sp, std::int64_t* ids, double* distances);

  // The generation held of the index of `key` (any generation); false when none.
  bool resident_generation(const ResidentKey& key, std::uint64_t* generation) const;

  // Deltas (service_delta.cpp): what changed in an index since the
  // generation held, shipped like an image (shape, pieces, finish) and
  // applied to a new Resident of the target generation, which replaces the
  // old one (searches still running on that one keep it until they end).
  enum class DeltaStart { Ship, Resident, NeedImage };
  // Resident: the target generation (or a newer one) is already held
  // (nothing to ship);
  // NeedImage: the base generation is not (ship the whole image).
  // vectors: StoredVectors of the new entries.
  DeltaStart begin_delta(int requester, const ResidentKey& target, std::uint64_t base, std::int64_t changes,
                         std::int64_t entries, int vectors, std::int64_t kept);
  // Section: 0 changes (IvfpqPageChange), 1 ids, 2 codes, 3 vectors, 4 ids
  // kept by shrunk pages (bytes).
  void delta_piece(int requester, int section, std::int64_t offset, const void* data, std::int64_t bytes);
  // False when the base is gone meanwhile, or the delta does not fit it
  // (the base is then dropped): ship the whole image. Error(OutOfMemory)
  // when the new generation does not fit the budget.
  bool finish_delta(int requester, std::int64_t now_us);

  // nq queries on the image's device; k = sp.k rows each, best first, ids
  // and distances (mode 0: PQ estimates; 1: the PQ candidates re-ranked by
  // their exact distance; 2: every entry by its exact distance). Modes 1
  // and 2 need an image with vectors. Touches nothing but `r`: executor
  // threads run it, several at once.
  static void search(const Resident& r, int mode, const float* queries, std::int64_t nq,
                     const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances);

  const std::vector<std::shared_ptr<Resident>>& all() const { return images_; }
  std::int64_t evictions() const { return evictions_; }

  // An index build's working memory (service_build.cpp) counts under the
  // same budget while a core call runs: reserve() evicts least recently used
  // images of `device` until `bytes` more fit (false when even an empty
  // device cannot hold them), release() gives them back.
  int build_device() const { return pick_device(); }
  bool reserve(int device, std::int64_t bytes);
  void release(int device, std::int64_t bytes);
  // Evicts the least recently used image of `device` but `keep`; false when
  // none is left.
  bool evict_one(int device, const Resident* keep = nullptr);
  // Drops the images of `index` of `database` (every index when `index` is
  // 0; every database when `database` is 0) loaded at or before
  // `before_us`: the index was dropped or rebuilt. Counted as evictions;
  // returns how many went.
  int forget(std::uint32_t database, std::uint32_t index, std::int64_t before_us);

 private:
  struct Staging {
    ResidentKey key;
    std::unique_ptr<gknn::ivfpq::Image> image;
    std::unique_ptr<IvfpqPageMap> pages;
  };
  struct DeltaStaging {
    ResidentKey key;  // the target generation
    std::uint64_t base = 0;
    std::vector<IvfpqPageChange> changes;
    std::vector<std::int64_t> ids;
    std::vector<std::uint8_t> codes;
    int vectors = 0;                 // StoredVectors
    std::vector<std::uint8_t> rows;  // their stored vectors, as bytes
    std::vector<std::int64_t> kept;
  };
  std::int64_t used_on(int device) const;
  int pick_device() const;
  // Evicts least recently used images of `device` until `bytes` more fit;
  // false when even an empty device cannot hold them.
  bool make_room(int device, std::int64_t bytes);
  // The resident image of the same index as `key` at `generation`, or null.
  std::shared_ptr<Resident> held(const ResidentKey& key, std::uint64_t generation) const;
  // Makes the image of `base` + `delta` (on the base's device).
  std::shared_ptr<Resident> updated(const Resident& base, const gknn::ivfpq::ImageDelta& delta,
                                    const ResidentKey& key, std::int64_t now_us);
  void drop_other_generations(const ResidentKey& key);

  std::vector<int> devices_;
  std::int64_t budget_;
  std::int64_t evictions_ = 0;
  std::vector<std::shared_ptr<Resident>> images_;
  std::map<int, Staging> staging_;
  std::map<int, DeltaStaging> delta_staging_;
  std::map<int, std::unique_ptr<Resident>> graph_staging_;  // a graph being shipped (key, graph)
  std::map<int, std::int64_t> reserved_;                    // builds' working memory, per device
};

// Whether an image carries its entries' vectors, and of which element type
// (an image's shape as shipped to the service).
enum StoredVectors { kNoVectors = 0, kFloatVectors = 1, kHalfVectors = 2, kBitVectors = 3 };
inline int stored_vectors(const gknn::ivfpq::Image& image) {
  return !image.half_vectors.empty()  ? kHalfVectors
         : !image.bit_vectors.empty() ? kBitVectors
         : !image.vectors.empty()     ? kFloatVectors
                                      : kNoVectors;
}

// The CPU's search of `image` in `mode` (as ResidentImages::search): the
// service's CPU images and a backend searching on its own CPU both use it.
// An exact search reads only the lists and entries its bounds cannot rule
// out (gknn::ivfpq::search_exact_pruned_cpu: the full scan's answers)
// where `bounds` has them for the image at `generation`.
void search_image_cpu(const gknn::ivfpq::Image& image, int mode, const float* queries, std::int64_t nq,
                      const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances,
                      ExactBoundsCache* bounds, std::uint64_t generation);

// Bytes an image takes where it is searched (GPU: the DeviceImage's own
// count once made; this estimate decides the room made before), the CPU's
// exact-search bounds included where they apply.
std::int64_t image_bytes(const gknn::ivfpq::Image& image);

}  // namespace gknn_service
