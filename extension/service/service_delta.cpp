// The GPU service's deltas (service_images.h): an index that changed since
// the generation the service holds is brought up to date from the pages
// that changed (shipped by the backend that found the image stale, read
// from the change log: ivfpq/ivfpq_delta.cpp) instead of being shipped and
// loaded whole. The page map kept beside each image places the changed
// pages (ivfpq/ivfpq_pagemap.h); the core makes the new image from the old
// one plus the new entries (on the GPU: gathered there, so only the new
// entries cross the bus). The old image is not touched: searches running
// on it finish on it. No PostgreSQL here.
#include <algorithm>
#include <cstring>
#include <string>

#include "gknn/error.h"
#include "gknn/ivfpq_delta.h"
#include "service_images.h"

namespace gknn_service {
namespace {

using gknn::Error;
using gknn::ErrorCode;

void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "shipped delta: " + what); }

// A StoredVectors kind's element type (float for none).
IvfpqElement element_of(int vectors) {
  return vectors == kHalfVectors ? kIvfpqFloat16 : vectors == kBitVectors ? kIvfpqBit : kIvfpqFloat32;
}

template <typename T>
void fill(std::vector<T>& dst, std::int64_t offset, const void* data, std::int64_t bytes) {
  const std::int64_t size = static_cast<std::int64_t>(dst.size() * sizeof(T));
  if (offset < 0 || bytes < 0 || offset > size || bytes > size - offset) invalid("a piece past its array");
  if (bytes > 0) std::memcpy(reinterpret_cast<char*>(dst.data()) + offset, data, bytes);
}

}  // namespace

std::shared_ptr<Resident> ResidentImages::held(const ResidentKey& key, std::uint64_t generation) const {
  for (const auto& r : images_)
    if (r->key.same_index(key) && r->key.generation == generation) return r;
  return nullptr;
}

ResidentImages::DeltaStart ResidentImages::begin_delta(int requester, const ResidentKey& target,
                                                       std::uint64_t base, std::int64_t changes,
                                                       std::int64_t entries, int vectors, std::int64_t kept) {
  delta_staging_.erase(requester);
  std::uint64_t newest = 0;
  if (resident_generation(target, &newest) && newest >= target.generation) return DeltaStart::Resident;
  std::shared_ptr<Resident> from = held(target, base);
  if (!from || !from->pages || base >= target.generation) return DeltaStart::NeedImage;
  if (changes < 0 || entries < 0 || kept < 0) invalid("negative change or entry count");
  if (vectors < kNoVectors || vectors > kBitVectors) invalid("unknown vector element type");
  const gknn::ivfpq::Params& p = from->params;
  DeltaStaging d;
  d.key = target;
  d.base = base;
  d.changes.resize(static_cast<std::size_t>(changes));
  d.ids.resize(static_cast<std::size_t>(entries));
  d.codes.resize(static_cast<std::size_t>(entries) * gknn::ivfpq::code_size(p));
  d.vectors = vectors;
  if (vectors != kNoVectors)
    d.rows.resize(static_cast<std::size_t>(entries) * ivfpq_element_bytes(element_of(vectors), p.dim));
  d.kept.resize(static_cast<std::size_t>(kept));
  delta_staging_[requester] = std::move(d);
  return DeltaStart::Ship;
}

void ResidentImages::delta_piece(int requester, int section, std::int64_t offset, const void* data,
                                 std::int64_t bytes) {
  auto it = delta_staging_.find(requester);
  if (it == delta_staging_.end()) invalid("a piece arrived before its shape");
  DeltaStaging& d = it->second;
  switch (section) {
    case 0:
      return fill(d.changes, offset, data, bytes);
    case 1:
      return fill(d.ids, offset, data, bytes);
    case 2:
      return fill(d.codes, offset, data, bytes);
    case 3:
      return fill(d.rows, offset, data, bytes);
    case 4:
      return fill(d.kept, offset, data, bytes);
    default:
      invalid("unknown section " + std::to_string(section));
  }
}

std::shared_ptr<Resident> ResidentImages::updated(const Resident& base, const gknn::ivfpq::ImageDelta& delta,
                                                  const ResidentKey& key, std::int64_t now_us) {
  auto r = std::make_shared<Resident>();
  r->key = key;
  r->device = base.device;
  r->params = base.params;
  r->entries = base.entries;
  for (const gknn::ivfpq::Splice& s : delta.splices) r->entries += s.count - s.remove;
  r->hits = base.hits;
  r->loaded_us = r->last_used_us = now_us;
  if (base.gpu) {
    // Out of GPU memory (the old and the new arrays are both there for a
    // moment): evict others and try again while any is left.
    for (;;) {
      try {
        r->gpu = std::make_unique<gknn::ivfpq::DeviceImage>(base.gpu->updated(delta));
        break;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::OutOfMemory || !evict_one(base.device, &base)) throw;
      }
    }
    r->bytes = static_cast<std::int64_t>(r->gpu->device_bytes());
  } else {
    r->host = std::make_unique<gknn::ivfpq::Image>(gknn::ivfpq::apply_delta(*base.host, delta));
    r->bytes = image_bytes(*r->host);
  }
  return r;
}

bool ResidentImages::finish_delta(int requester, std::int64_t now_us) {
  auto it = delta_staging_.find(requester);
  if (it == delta_staging_.end()) invalid("finished before its shape");
  DeltaStaging staged = std::move(it->second);
  delta_staging_.erase(it);
  std::uint64_t newest = 0;
  if (resident_generation(staged.key, &newest) && newest >= staged.key.generation)
    return true;  // another backend brought it there (or further) meanwhile
  std::shared_ptr<Resident> base = held(staged.key, staged.base);
  if (!base || !base->pages) return false;
  const gknn::ivfpq::Params& p = base->params;
  IvfpqDelta view{staged.base,
                  staged.key.generation,
                  false,
                  false,
                  static_cast<std::int64_t>(staged.changes.size()),
                  staged.changes.data(),
                  static_cast<std::int64_t>(staged.ids.size()),
                  staged.ids.data(),
                  staged.codes.data(),
                  staged.vectors == kNoVectors ? nullptr : staged.rows.data(),
                  static_cast<std::int64_t>(staged.kept.size()),
                  staged.kept.data()};
  auto pages = std::make_unique<IvfpqPageMap>();
  // Shrunk pages' old ids, from the image held (a few pages' worth).
  const Resident& held_image = *base;
  auto read_ids = [&](std::int64_t first, std::int64_t count, std::int64_t* out) {
    if (first < 0 || count < 0 || first + count > held_image.entries) invalid("ids past the image");
    if (held_image.gpu)
      held_image.gpu->copy_ids(first, count, out);
    else
      std::copy_n(held_image.host->ids.data() + first, count, out);
  };
  std::shared_ptr<Resident> r;
  try {
    const gknn::ivfpq::ImageDelta delta =
        ivfpq_plan_changes(*base->pages, view, gknn::ivfpq::code_size(p), p.dim, element_of(staged.vectors),
                           read_ids, pages.get());
    // A CPU image no search holds (only the table and `base` own it) is
    // edited where it is: no copy of the whole image.
    if (!base->gpu && base.use_count() <= 2) {
      gknn::ivfpq::apply_delta_in_place(*base->host, delta);
      base->key = staged.key;
      base->entries = static_cast<std::int64_t>(base->host->ids.size());
      base->bytes = image_bytes(*base->host);
      base->last_used_us = now_us;
      r = base;
    } else {
      r = updated(*base, delta, staged.key, now_us);
    }
    // The exact search's bounds, carried over rather than made again.
    if (r->host)
      r->exact_bounds->advance(*base->exact_bounds, staged.base, delta, *r->host, staged.key.generation);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) throw;
    // The pages do not fit the image held (never expected): it is not the
    // base the backend read, so nobody should search it any more.
    images_.erase(std::remove(images_.begin(), images_.end(), base), images_.end());
    return false;
  }
  r->pages = std::move(pages);
  std::replace(images_.begin(), images_.end(), base, r);
  drop_other_generations(staged.key);
  // The new generation may be larger: evict others to fit it, or give up.
  while (used_on(r->device) > budget_ && evict_one(r->device, r.get())) {
  }
  if (used_on(r->device) > budget_) {
    images_.erase(std::remove(images_.begin(), images_.end(), r), images_.end());
    throw Error(ErrorCode::OutOfMemory, over_budget("index image", r->bytes, budget_));
  }
  return true;
}

}  // namespace gknn_service
