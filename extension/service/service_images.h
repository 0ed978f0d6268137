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

#include "gknn/ivfpq.h"

namespace gknn_service {

// An image's identity: database, index, relfilenode (3 numbers), generation.
struct ResidentKey {
  std::uint32_t database = 0, index = 0, spc = 0, db = 0, rel = 0;
  std::uint64_t generation = 0;
  bool same_index(const ResidentKey& o) const {
    return database == o.database && index == o.index && spc == o.spc && db == o.db && rel == o.rel;
  }
  bool operator==(const ResidentKey& o) const { return same_index(o) && generation == o.generation; }
};

struct Resident {
  ResidentKey key;
  int device = -1;                                // -1: searched on the CPU
  std::unique_ptr<gknn::ivfpq::Image> host;       // kept only for CPU search
  std::unique_ptr<gknn::ivfpq::DeviceImage> gpu;  // on `device`
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

  // Shipping, per requester (its slot number): the shape, then pieces of
  // each array, then finish() validates it and makes it resident (evicting
  // least recently used images to fit; Error(OutOfMemory) if it cannot).
  void begin(int requester, const ResidentKey& key, const gknn::ivfpq::Params& params, std::int64_t entries,
             bool vectors);
  // Section: 0 centroids, 1 codebooks, 2 offsets, 3 codes, 4 ids, 5 vectors (bytes).
  void piece(int requester, int section, std::int64_t offset, const void* data, std::int64_t bytes);
  Resident* finish(int requester, std::int64_t now_us);
  void abandon(int requester) { staging_.erase(requester); }

  // nq queries on the image's device; k = sp.k rows each, best first, ids
  // and distances (mode 0: PQ estimates; 1: the PQ candidates re-ranked by
  // their exact distance; 2: every entry by its exact distance). Modes 1
  // and 2 need an image with vectors. Touches nothing but `r`: executor
  // threads run it, several at once.
  static void search(const Resident& r, int mode, const float* queries, std::int64_t nq,
                     const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances);

  const std::vector<std::shared_ptr<Resident>>& all() const { return images_; }
  std::int64_t evictions() const { return evictions_; }

 private:
  struct Staging {
    ResidentKey key;
    std::unique_ptr<gknn::ivfpq::Image> image;
  };
  std::int64_t used_on(int device) const;
  int pick_device() const;
  // Evicts least recently used images of `device` until `bytes` more fit;
  // false when even an empty device cannot hold them.
  bool make_room(int device, std::int64_t bytes);
  bool evict_one(int device);
  void drop_other_generations(const ResidentKey& key);

  std::vector<int> devices_;
  std::int64_t budget_;
  std::int64_t evictions_ = 0;
  std::vector<std::shared_ptr<Resident>> images_;
  std::map<int, Staging> staging_;
};

// The CPU's search of `image` in `mode` (as ResidentImages::search): the
// service's CPU images and a backend searching on its own CPU both use it.
void search_image_cpu(const gknn::ivfpq::Image& image, int mode, const float* queries, std::int64_t nq,
                      const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances);

// Bytes an image takes where it is searched (GPU: the DeviceImage's own
// count once made; this estimate decides the room made before).
std::int64_t image_bytes(const gknn::ivfpq::Image& image);

}  // namespace gknn_service
