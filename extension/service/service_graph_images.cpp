// The GPU service's gpu_graph images (service_images.h): shipped in pieces by
// the first backend that needs one, validated, made resident on a GPU (a
// gknn::graph::DeviceGraph) or kept on the host for the CPU search, under
// the same budget and LRU as the gpu_ivfpq images. No PostgreSQL here.
//
// A graph image holds the index's live rows (node numbers renumbered densely,
// as the backend's own image, extension/graph/graph_image.cpp): the graph,
// the vectors and each row's heap TID as an id. Searches return those ids, so
// the backend needs no image of its own to turn rows into TIDs.
#include <algorithm>
#include <cstring>
#include <string>

#include "gknn/error.h"
#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {
namespace {

using gknn::Error;
using gknn::ErrorCode;

void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "shipped graph image: " + what);
}

// Bytes of the graph and vectors where they are searched (a DeviceGraph
// reports its own once made; this estimate decides the room made before).
std::int64_t graph_bytes(const GraphImageData& g) {
  return static_cast<std::int64_t>(g.graph.edges.size() * sizeof(std::uint32_t) +
                                   g.graph.entries.size() * sizeof(std::uint32_t) +
                                   g.vectors.size() * sizeof(float));
}

}  // namespace

void ResidentImages::begin_graph(int requester, const ResidentKey& key, std::int64_t rows, int degree,
                                 std::int64_t entries, int dim, gknn::Metric metric, std::uint64_t seed) {
  if (rows < 0 || rows > std::int64_t{gknn::graph::kNoNode}) invalid("row count out of range");
  if (degree < 1 || degree > gknn::graph::kMaxDegree) invalid("degree out of range");
  if (entries < 0 || entries > rows) invalid("entry count out of range");
  if (dim < 1 || dim > gknn::graph::kMaxDim) invalid("dimension out of range");
  if (metric != gknn::Metric::L2 && metric != gknn::Metric::InnerProduct && metric != gknn::Metric::Cosine)
    invalid("unknown metric");
  staging_.erase(requester);  // a requester ships one image at a time
  auto r = std::make_unique<Resident>();
  r->key = key;
  r->kind = kImageGraph;
  r->graph = std::make_unique<GraphImageData>();
  GraphImageData& g = *r->graph;
  g.graph.n = rows;
  g.graph.degree = degree;
  g.graph.edges.resize(static_cast<std::size_t>(rows) * degree);
  g.graph.entries.resize(static_cast<std::size_t>(entries));
  g.vectors.resize(static_cast<std::size_t>(rows) * dim);
  g.ids.resize(static_cast<std::size_t>(rows));
  g.dim = dim;
  g.metric = metric;
  g.seed = seed;
  graph_staging_[requester] = std::move(r);
}

void ResidentImages::piece_graph(int requester, int section, std::int64_t offset, const void* data,
                                 std::int64_t bytes) {
  auto it = graph_staging_.find(requester);
  if (it == graph_staging_.end()) invalid("a piece arrived before its shape");
  GraphImageData& g = *it->second->graph;
  char* base = nullptr;
  std::int64_t size = 0;
  switch (section) {
    case kGraphEdges:
      base = reinterpret_cast<char*>(g.graph.edges.data());
      size = g.graph.edges.size() * sizeof(std::uint32_t);
      break;
    case kGraphEntries:
      base = reinterpret_cast<char*>(g.graph.entries.data());
      size = g.graph.entries.size() * sizeof(std::uint32_t);
      break;
    case kGraphVectors:
      base = reinterpret_cast<char*>(g.vectors.data());
      size = g.vectors.size() * sizeof(float);
      break;
    case kGraphIds:
      base = reinterpret_cast<char*>(g.ids.data());
      size = g.ids.size() * sizeof(std::int64_t);
      break;
    default:
      invalid("unknown section " + std::to_string(section));
  }
  if (offset < 0 || bytes < 0 || offset > size || bytes > size - offset) invalid("a piece past its array");
  if (bytes > 0) std::memcpy(base + offset, data, bytes);
}

Resident* ResidentImages::finish_graph(int requester, std::int64_t now_us) {
  auto it = graph_staging_.find(requester);
  if (it == graph_staging_.end()) invalid("finished before its shape");
  std::unique_ptr<Resident> r = std::move(it->second);
  graph_staging_.erase(it);
  GraphImageData& g = *r->graph;
  // The core's own check of the rows (ids in range, no self edges nor
  // duplicates, kNoNode only at a row's end, entries ascending): a search
  // never walks a malformed graph. A heap id is a TID (block << 16 | offset).
  gknn::graph::validate(g.graph);
  for (std::int64_t id : g.ids)
    if (id <= 0 || id >= (std::int64_t{1} << 48)) invalid("a row's heap TID is out of range");
  // Another backend shipped the same image meanwhile: keep the first.
  if (auto held_now = find(r->key, now_us)) return held_now.get();
  // A newer generation arrived meanwhile: this one is of no more use.
  std::uint64_t held = 0;
  if (resident_generation(r->key, &held) && held > r->key.generation) return nullptr;
  drop_other_generations(r->key);

  r->entries = g.graph.n;
  r->loaded_us = r->last_used_us = now_us;
  // An empty graph needs no device.
  r->device = r->entries > 0 ? pick_device() : -1;
  const std::int64_t need = graph_bytes(g);
  if (!make_room(r->device, need))
    throw Error(ErrorCode::OutOfMemory, over_budget("graph index image", need, budget_));
  if (r->device >= 0) {
    // A device that runs out anyway (other processes' memory, allocator
    // overhead): evict and try again while anything is left to evict.
    for (;;) {
      try {
        r->graph_gpu =
            std::make_unique<gknn::graph::DeviceGraph>(g.graph, g.vectors.data(), g.dim, g.metric, r->device);
        break;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::InvalidArgument) break;  // a shape the GPU search does not take
        if (e.code() != ErrorCode::OutOfMemory || !evict_one(r->device)) throw;
      }
    }
  }
  if (r->graph_gpu) {
    r->bytes = static_cast<std::int64_t>(r->graph_gpu->bytes());
    // The device holds the rows and vectors now; the host keeps the ids.
    std::vector<std::uint32_t>().swap(g.graph.edges);
    std::vector<std::uint32_t>().swap(g.graph.entries);
    std::vector<float>().swap(g.vectors);
  } else {  // the CPU's search (gknn.service = cpu, an empty graph, a shape the GPU does not take)
    r->device = -1;
    r->bytes = need + static_cast<std::int64_t>(g.ids.size() * sizeof(std::int64_t));
  }
  images_.push_back(std::shared_ptr<Resident>(std::move(r)));
  return images_.back().get();
}

void ResidentImages::search_graph(const Resident& r, const float* queries, std::int64_t nq,
                                  const gknn::graph::SearchParams& params, std::int64_t* ids,
                                  double* distances) {
  const GraphImageData& g = *r.graph;
  gknn::graph::SearchParams sp = params;
  sp.seed = g.seed;  // the index's: the backend's own CPU search starts from the same nodes
  sp.skip = nullptr;
  if (r.graph_gpu)
    r.graph_gpu->search(queries, nq, sp, ids, distances);
  else
    gknn::graph::search_cpu(g.graph, g.vectors.data(), g.dim, g.metric, queries, nq, sp, ids, distances);
  const std::int64_t rows = static_cast<std::int64_t>(g.ids.size());
  for (std::int64_t i = 0; i < nq * sp.k; ++i) ids[i] = ids[i] >= 0 && ids[i] < rows ? g.ids[ids[i]] : -1;
}

}  // namespace gknn_service
