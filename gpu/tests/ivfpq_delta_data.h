// Random deltas for the delta tests, and the oracle they are checked
// against: the image edited list by list, entry by entry (what a fresh
// image of the edited lists holds).
#pragma once

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <random>
#include <vector>

#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"

namespace gknn::test {

// One entry, as a list holds it.
struct Entry {
  std::vector<std::uint8_t> code;
  std::int64_t id = 0;
  std::vector<std::uint8_t> vector;  // the stored vector's bytes; empty where the image has none
};
using Lists = std::vector<std::vector<Entry>>;

// Bytes of one stored vector of `element`.
inline std::size_t row_bytes(const ivfpq::Params& p, ivfpq::VectorElement element) {
  return element == ivfpq::VectorElement::Bit       ? (std::size_t(p.dim) + 7) / 8
         : element == ivfpq::VectorElement::Float16 ? 2 * std::size_t(p.dim)
                                                    : 4 * std::size_t(p.dim);
}

// The stored vectors of an image (or delta) as bytes, whatever their type.
template <typename T>
const std::uint8_t* row_data(const T& x, ivfpq::VectorElement element) {
  return element == ivfpq::VectorElement::Float16
             ? reinterpret_cast<const std::uint8_t*>(x.half_vectors.data())
         : element == ivfpq::VectorElement::Bit ? x.bit_vectors.data()
                                                : reinterpret_cast<const std::uint8_t*>(x.vectors.data());
}
template <typename T>
void put_rows(T& x, ivfpq::VectorElement element, const std::vector<std::uint8_t>& bytes) {
  if (element == ivfpq::VectorElement::Float16) {
    x.half_vectors.resize(bytes.size() / 2);
    std::memcpy(x.half_vectors.data(), bytes.data(), bytes.size());
  } else if (element == ivfpq::VectorElement::Bit) {
    x.bit_vectors = bytes;
  } else {
    x.vectors.resize(bytes.size() / 4);
    std::memcpy(x.vectors.data(), bytes.data(), bytes.size());
  }
}

inline Lists lists_of(const ivfpq::Image& im) {
  const int cs = ivfpq::code_size(im.quantizer.params);
  const ivfpq::VectorElement element = ivfpq::vector_element(im);
  const std::size_t rb = row_bytes(im.quantizer.params, element);
  const bool vec = !im.vectors.empty() || !im.half_vectors.empty() || !im.bit_vectors.empty();
  Lists lists(im.quantizer.params.lists);
  for (int l = 0; l < int(lists.size()); ++l)
    for (std::int64_t e = im.offsets[l]; e < im.offsets[l + 1]; ++e) {
      Entry en;
      en.code.assign(im.codes.begin() + e * cs, im.codes.begin() + (e + 1) * cs);
      en.id = im.ids[e];
      if (vec) en.vector.assign(row_data(im, element) + e * rb, row_data(im, element) + (e + 1) * rb);
      lists[l].push_back(en);
    }
  return lists;
}

// The image holding `lists` (quantizer from `like`); vectors of `element`
// when `vec`.
inline ivfpq::Image image_of(const ivfpq::Image& like, const Lists& lists, bool vec,
                             ivfpq::VectorElement element = ivfpq::VectorElement::Float32) {
  ivfpq::Image im;
  im.quantizer = like.quantizer;
  im.offsets.assign(1, 0);
  std::vector<std::uint8_t> rows;
  for (const auto& list : lists) {
    for (const Entry& e : list) {
      im.codes.insert(im.codes.end(), e.code.begin(), e.code.end());
      im.ids.push_back(e.id);
      if (vec) rows.insert(rows.end(), e.vector.begin(), e.vector.end());
    }
    im.offsets.push_back(std::int64_t(im.ids.size()));
  }
  if (vec && !rows.empty()) put_rows(im, element, rows);
  return im;
}

// A random delta over `im` (`changes` splices at most: removals, inserts,
// replacements, appends at a list's end, some into empty lists), and the
// lists it makes (*after). New ids continue past `next_id`; with `reuse`, some
// new entries take the id of one removed in the same delta (a heap TID used
// again), with another vector.
inline ivfpq::ImageDelta random_delta(const ivfpq::Image& im, int changes, unsigned seed,
                                      std::int64_t* next_id, bool reuse, Lists* after) {
  std::mt19937 rng(seed);
  const ivfpq::Params& p = im.quantizer.params;
  const int cs = ivfpq::code_size(p);
  const ivfpq::VectorElement element = ivfpq::vector_element(im);
  const std::size_t rb = row_bytes(p, element);
  const bool vec =
      !im.vectors.empty() || !im.half_vectors.empty() || !im.bit_vectors.empty() || im.ids.empty();
  const Lists before = lists_of(im);
  std::vector<std::uint8_t> fresh_rows;
  *after = before;
  ivfpq::ImageDelta d;
  std::vector<std::int64_t> removed_ids;
  auto fresh = [&](int n) {
    const std::int64_t first = std::int64_t(d.ids.size());
    for (int i = 0; i < n; ++i) {
      std::int64_t id = ++*next_id;
      if (reuse && !removed_ids.empty() && rng() % 2) {
        id = removed_ids.back();
        removed_ids.pop_back();
      }
      d.ids.push_back(id);
      for (int b = 0; b < cs; ++b) d.codes.push_back(std::uint8_t(rng()));
      if ((p.m * p.nbits) % 8 != 0) d.codes.back() &= (1u << ((p.m * p.nbits) % 8)) - 1;
      if (vec) {
        std::vector<std::uint8_t> row(rb);
        if (element == ivfpq::VectorElement::Float32)
          for (int j = 0; j < p.dim; ++j) {
            const float v = float(int(rng() % 5) - 2);
            std::memcpy(row.data() + 4 * j, &v, 4);
          }
        else if (element == ivfpq::VectorElement::Float16)
          for (int j = 0; j < p.dim; ++j) {
            const std::uint16_t h = std::uint16_t(0x3c00 + (rng() % 7) * 0x200);  // 1.0 .. about 3.5
            std::memcpy(row.data() + 2 * j, &h, 2);
          }
        else
          for (auto& b : row) b = std::uint8_t(rng());
        if (element == ivfpq::VectorElement::Bit && p.dim % 8 != 0)
          row.back() &= std::uint8_t(0xff << (8 - p.dim % 8));  // pad bits zero
        fresh_rows.insert(fresh_rows.end(), row.begin(), row.end());
      }
    }
    return first;
  };
  // Pick splice positions list by list, in order, then apply them to *after
  // from the back (so earlier positions stay valid).
  std::vector<int> order(p.lists);
  for (int l = 0; l < p.lists; ++l) order[l] = l;
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(std::min<int>(p.lists, std::max(1, changes / 2)));
  std::sort(order.begin(), order.end());
  for (int l : order) {
    const std::int64_t size = std::int64_t(before[l].size());
    std::int64_t at = 0;
    std::vector<ivfpq::Splice> mine;
    const int n = 1 + int(rng() % 3);
    for (int s = 0; s < n && at <= size; ++s) {
      ivfpq::Splice sp;
      sp.list = l;
      const int kind = int(rng() % 4);  // remove, insert, replace, append at the end
      sp.at = kind == 3 ? size : at + std::int64_t(rng() % (size - at + 1));
      const std::int64_t room = size - sp.at;
      sp.remove =
          kind == 1 || kind == 3 || room == 0 ? 0 : 1 + std::int64_t(rng() % std::min<std::int64_t>(room, 9));
      for (std::int64_t e = sp.at; e < sp.at + sp.remove; ++e) removed_ids.push_back(before[l][e].id);
      sp.count = kind == 0 ? 0 : 1 + int(rng() % 6);
      sp.first = fresh(int(sp.count));
      mine.push_back(sp);
      at = sp.at + sp.remove;
      if (kind == 3) break;
    }
    for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
      auto& list = (*after)[l];
      list.erase(list.begin() + it->at, list.begin() + it->at + it->remove);
      std::vector<Entry> ins;
      for (std::int64_t i = it->first; i < it->first + it->count; ++i) {
        Entry e;
        e.code.assign(d.codes.begin() + i * cs, d.codes.begin() + (i + 1) * cs);
        e.id = d.ids[i];
        if (vec) e.vector.assign(fresh_rows.begin() + i * rb, fresh_rows.begin() + (i + 1) * rb);
        ins.push_back(e);
      }
      list.insert(list.begin() + it->at, ins.begin(), ins.end());
    }
    d.splices.insert(d.splices.end(), mine.begin(), mine.end());
  }
  if (vec && !fresh_rows.empty()) put_rows(d, element, fresh_rows);
  return d;
}

}  // namespace gknn::test
