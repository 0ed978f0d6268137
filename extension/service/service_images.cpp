// The GPU service's resident images (service_images.h). No PostgreSQL here.
#include "service_images.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gknn/error.h"

namespace gknn_service {
namespace {

using gknn::Error;
using gknn::ErrorCode;

void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "shipped image: " + what); }

}  // namespace

std::int64_t image_bytes(const gknn::ivfpq::Image& image) {
  const auto& q = image.quantizer;
  // The exact search's bounds where it prunes (exact_bounds.h): made on
  // first use, counted from the start so that the budget holds them.
  const std::size_t bounds = exact_prunable(image)
                                 ? (image.ids.size() + image.offsets.size()) * sizeof(double) +
                                       image.offsets.size() * sizeof(std::int64_t)
                                 : 0;
  return static_cast<std::int64_t>(
      q.centroids.size() * sizeof(float) + q.codebooks.size() * sizeof(float) +
      image.offsets.size() * sizeof(std::int64_t) + image.codes.size() +
      image.ids.size() * sizeof(std::int64_t) + image.vectors.size() * sizeof(float) +
      image.half_vectors.size() * sizeof(std::uint16_t) + image.bit_vectors.size() + bounds);
}

ResidentImages::ResidentImages(std::vector<int> devices, std::int64_t budget)
    : devices_(std::move(devices)), budget_(budget) {}

void ResidentImages::set_budget(std::int64_t budget) {
  budget_ = budget;
  std::vector<int> places = devices_;
  places.push_back(-1);  // images searched on the CPU
  for (int d : places)
    while (used_on(d) > budget_ && evict_one(d)) {
    }
}

std::int64_t ResidentImages::used_on(int device) const {
  auto it = reserved_.find(device);
  std::int64_t n = it == reserved_.end() ? 0 : it->second;
  for (const auto& r : images_)
    if (r->device == device) n += r->bytes;
  return n;
}

std::int64_t ResidentImages::used() const {
  std::int64_t n = 0;
  for (const auto& [device, bytes] : reserved_) n += bytes;
  for (const auto& r : images_) n += r->bytes;
  return n;
}

bool ResidentImages::reserve(int device, std::int64_t bytes) {
  if (!make_room(device, bytes)) return false;
  reserved_[device] += bytes;
  return true;
}

void ResidentImages::release(int device, std::int64_t bytes) {
  auto it = reserved_.find(device);
  if (it == reserved_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) reserved_.erase(it);
}

std::shared_ptr<Resident> ResidentImages::find(const ResidentKey& key, std::int64_t now_us) {
  for (auto& r : images_)
    if (r->key == key) {
      r->hits++;
      r->last_used_us = now_us;
      return r;
    }
  return nullptr;
}

void ResidentImages::begin(int requester, const ResidentKey& key, const gknn::ivfpq::Params& params,
                           std::int64_t entries, int vectors, std::int64_t pages) {
  gknn::ivfpq::validate(params);
  if (entries < 0 || pages < 0) invalid("negative entry or page count");
  if (vectors < kNoVectors || vectors > kBitVectors) invalid("unknown vector element type");
  auto image = std::make_unique<gknn::ivfpq::Image>();
  image->quantizer.params = params;
  image->quantizer.centroids.resize(static_cast<std::size_t>(params.lists) * params.dim);
  image->quantizer.codebooks.resize(static_cast<std::size_t>(params.dim) << params.nbits);
  image->offsets.resize(static_cast<std::size_t>(params.lists) + 1);
  image->codes.resize(static_cast<std::size_t>(entries) * gknn::ivfpq::code_size(params));
  image->ids.resize(static_cast<std::size_t>(entries));
  if (vectors == kFloatVectors) image->vectors.resize(static_cast<std::size_t>(entries) * params.dim);
  if (vectors == kHalfVectors) image->half_vectors.resize(static_cast<std::size_t>(entries) * params.dim);
  if (vectors == kBitVectors)
    image->bit_vectors.resize(static_cast<std::size_t>(entries) *
                              ((static_cast<std::size_t>(params.dim) + 7) / 8));
  auto map = std::make_unique<IvfpqPageMap>();
  map->list_pages.resize(static_cast<std::size_t>(params.lists) + 1);
  map->blocks.resize(static_cast<std::size_t>(pages));
  map->items.resize(static_cast<std::size_t>(pages));
  graph_staging_.erase(requester);  // a requester ships one image at a time
  staging_[requester] = Staging{key, std::move(image), std::move(map)};
}

void ResidentImages::piece(int requester, int section, std::int64_t offset, const void* data,
                           std::int64_t bytes) {
  auto it = staging_.find(requester);
  if (it == staging_.end()) invalid("a piece arrived before its shape");
  gknn::ivfpq::Image& im = *it->second.image;
  IvfpqPageMap& map = *it->second.pages;
  char* base = nullptr;
  std::int64_t size = 0;
  switch (section) {
    case 0:
      base = reinterpret_cast<char*>(im.quantizer.centroids.data());
      size = im.quantizer.centroids.size() * sizeof(float);
      break;
    case 1:
      base = reinterpret_cast<char*>(im.quantizer.codebooks.data());
      size = im.quantizer.codebooks.size() * sizeof(float);
      break;
    case 2:
      base = reinterpret_cast<char*>(im.offsets.data());
      size = im.offsets.size() * sizeof(std::int64_t);
      break;
    case 3:
      base = reinterpret_cast<char*>(im.codes.data());
      size = im.codes.size();
      break;
    case 4:
      base = reinterpret_cast<char*>(im.ids.data());
      size = im.ids.size() * sizeof(std::int64_t);
      break;
    case 5:
      if (!im.half_vectors.empty()) {
        base = reinterpret_cast<char*>(im.half_vectors.data());
        size = im.half_vectors.size() * sizeof(std::uint16_t);
      } else if (!im.bit_vectors.empty()) {
        base = reinterpret_cast<char*>(im.bit_vectors.data());
        size = im.bit_vectors.size();
      } else {
        base = reinterpret_cast<char*>(im.vectors.data());
        size = im.vectors.size() * sizeof(float);
      }
      break;
    case 6:
      base = reinterpret_cast<char*>(map.list_pages.data());
      size = map.list_pages.size() * sizeof(std::int64_t);
      break;
    case 7:
      base = reinterpret_cast<char*>(map.blocks.data());
      size = map.blocks.size() * sizeof(std::uint32_t);
      break;
    case 8:
      base = reinterpret_cast<char*>(map.items.data());
      size = map.items.size() * sizeof(std::uint32_t);
      break;
    default:
      invalid("unknown section " + std::to_string(section));
  }
  if (offset < 0 || bytes < 0 || offset > size || bytes > size - offset) invalid("a piece past its array");
  if (bytes > 0) std::memcpy(base + offset, data, bytes);
}

int ResidentImages::pick_device() const {
  if (devices_.empty()) return -1;
  int best = devices_[0];
  for (int d : devices_)
    if (used_on(d) < used_on(best)) best = d;
  return best;
}

bool ResidentImages::evict_one(int device, const Resident* keep) {
  auto victim = images_.end();
  for (auto it = images_.begin(); it != images_.end(); ++it)
    if ((*it)->device == device && it->get() != keep &&
        (victim == images_.end() || (*it)->last_used_us < (*victim)->last_used_us))
      victim = it;
  if (victim == images_.end()) return false;
  images_.erase(victim);
  ++evictions_;
  return true;
}

bool ResidentImages::make_room(int device, std::int64_t bytes) {
  if (bytes > budget_) return false;
  while (used_on(device) + bytes > budget_)
    if (!evict_one(device)) return false;
  return true;
}

void ResidentImages::drop_other_generations(const ResidentKey& key) {
  images_.erase(std::remove_if(images_.begin(), images_.end(),
                               [&](const std::shared_ptr<Resident>& r) {
                                 return r->key.same_index(key) && r->key.generation != key.generation;
                               }),
                images_.end());
}

Resident* ResidentImages::finish(int requester, std::int64_t now_us) {
  auto it = staging_.find(requester);
  if (it == staging_.end()) invalid("finished before its shape");
  Staging staged = std::move(it->second);
  staging_.erase(it);
  gknn::ivfpq::Image& im = *staged.image;
  const auto& off = im.offsets;
  if (off.front() != 0 || off.back() != static_cast<std::int64_t>(im.ids.size()) ||
      !std::is_sorted(off.begin(), off.end()))
    invalid("list offsets do not cover the entries");
  // Another backend shipped the same image meanwhile: keep the first.
  if (auto r = find(staged.key, now_us)) return r.get();
  // A newer generation arrived meanwhile (a delta): this one is of no more use.
  std::uint64_t held = 0;
  if (resident_generation(staged.key, &held) && held > staged.key.generation) return nullptr;
  drop_other_generations(staged.key);

  auto r = std::make_shared<Resident>();
  r->key = staged.key;
  r->params = im.quantizer.params;
  r->entries = static_cast<std::int64_t>(im.ids.size());
  // A page map that does not describe the image (it never should) only
  // costs deltas: the image is loaded whole next time.
  try {
    ivfpq_check_page_map(*staged.pages, im.offsets);
    r->pages = std::move(staged.pages);
  } catch (const Error&) {
  }
  r->loaded_us = r->last_used_us = now_us;
  // An empty index needs no device (and a DeviceImage of nothing is no use).
  r->device = r->entries > 0 ? pick_device() : -1;
  std::int64_t need = image_bytes(im);
  if (!make_room(r->device, need))
    throw Error(ErrorCode::OutOfMemory, over_budget("index image", need, budget_));
  if (r->device < 0) {
    r->bytes = need;
    r->host = std::move(staged.image);
  } else {
    // A device that runs out anyway (other processes' memory, allocator
    // overhead): evict and try again while anything is left to evict.
    for (;;) {
      try {
        r->gpu = std::make_unique<gknn::ivfpq::DeviceImage>(im, r->device);
        break;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::InvalidArgument) break;  // a shape the GPU search does not take
        if (e.code() != ErrorCode::OutOfMemory || !evict_one(r->device)) throw;
      }
    }
    if (r->gpu) {
      r->bytes = static_cast<std::int64_t>(r->gpu->device_bytes());
    } else {  // LUTs too large even in fp16: searched on the CPU, as a backend would
      r->device = -1;
      r->bytes = need;
      r->host = std::move(staged.image);
    }
  }
  images_.push_back(std::move(r));
  return images_.back().get();
}

std::shared_ptr<Resident> ResidentImages::find_for_search(const ResidentKey& key, std::int64_t now_us) {
  for (auto& r : images_)
    if (r->key.same_index(key) && r->key.generation >= key.generation) {
      r->hits++;
      r->last_used_us = now_us;
      return r;
    }
  return nullptr;
}

bool ResidentImages::resident_generation(const ResidentKey& key, std::uint64_t* generation) const {
  for (const auto& r : images_)
    if (r->key.same_index(key)) {
      *generation = r->key.generation;
      return true;
    }
  return false;
}

void search_image_cpu(const gknn::ivfpq::Image& image, int mode, const float* queries, std::int64_t nq,
                      const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances,
                      ExactBoundsCache* bounds, std::uint64_t generation) {
  if (mode == 1) {
    gknn::ivfpq::search_refined_cpu(image, queries, nq, sp, ids, distances);
  } else if (mode == 2) {
    const auto b = bounds ? bounds->get(image, generation) : nullptr;
    if (b)
      gknn::ivfpq::search_exact_pruned_cpu(image, *b, queries, nq, sp.k, ids, distances);
    else
      gknn::ivfpq::search_exact_cpu(image, queries, nq, sp.k, ids, distances);
  } else {
    std::vector<float> pq(static_cast<std::size_t>(nq) * sp.k);
    gknn::ivfpq::search_cpu(image, queries, nq, sp, ids, pq.data());
    for (std::size_t i = 0; i < pq.size(); ++i) distances[i] = pq[i];
  }
}

void ResidentImages::search(const Resident& r, int mode, const float* queries, std::int64_t nq,
                            const gknn::ivfpq::SearchParams& sp, std::int64_t* ids, double* distances) {
  if (!r.gpu) {
    search_image_cpu(*r.host, mode, queries, nq, sp, ids, distances, r.exact_bounds.get(), r.key.generation);
  } else if (mode == 1) {
    r.gpu->search_refined(queries, nq, sp, ids, distances);
  } else if (mode == 2) {
    r.gpu->search_exact_pruned(queries, nq, sp.k, ids, distances);
  } else {
    std::vector<float> pq(static_cast<std::size_t>(nq) * sp.k);
    r.gpu->search(queries, nq, sp, ids, pq.data());
    for (std::size_t i = 0; i < pq.size(); ++i) distances[i] = pq[i];
  }
}

int ResidentImages::forget(std::uint32_t database, std::uint32_t index, std::int64_t before_us) {
  const std::size_t before = images_.size();
  images_.erase(std::remove_if(images_.begin(), images_.end(),
                               [&](const auto& r) {
                                 return (database == 0 || r->key.database == database) &&
                                        (index == 0 || r->key.index == index) && r->loaded_us <= before_us;
                               }),
                images_.end());
  const int gone = static_cast<int>(before - images_.size());
  evictions_ += gone;
  return gone;
}

}  // namespace gknn_service
