// DeviceGraph: the graph and its vectors on one GPU, searched in batches.
// One CTA per query runs the CPU search's algorithm (search_cpu.cpp): a
// sorted candidate list of ef (shared memory), the first `width` unexpanded
// entries expanded each step (found by one warp's ballots over the list's
// flags), their rows' unvisited nodes scored by groups of eight threads with
// group_distance (gknn::distance's lanes and combining tree, the query in
// shared memory; the library is built without FMA contraction, so the
// distances equal the CPU's bit for bit), then merged into the list.
// The merge places every element by its rank (list and new batch each
// sorted; an element's place is its index plus how many of the other side
// precede it), so one pass of the CTA merges any batch. The visited set is
// a hash in shared memory; when half full it is cleared and refilled with
// the list's ids (as CAGRA does): a node outside the list may then be
// scored again, never listed twice.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "distance/group_distance.cuh"
#include "graph/common.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

// Threads per CTA (also the merge batch): 512 for a few queries, 256 for
// small batches, where one CTA per query leaves most of the GPU idle and a
// lone query's time is the chain of rows each group scores in turn (the
// entry sample, ~2 sqrt(n) nodes, 64 rows a group at 256 threads for 1M
// nodes: the larger part of one query's 0.45 ms there, ncu on the H100);
// 128 for large ones, where more CTAs fit an SM.
constexpr int kMaxThreads = 512;
constexpr std::int64_t kWidestUpTo = 16;  // queries per call that get 512 threads
constexpr std::int64_t kWideUpTo = 128;   // ... 256
constexpr int kPrefetch = 32;             // elements per lane held in registers: dim <= 256
constexpr int kMaxEf = kMaxDeviceEf;      // the list in shared memory
constexpr int kHashSlots = 4096;          // visited set, power of 2
constexpr std::uint32_t kExpanded = 1;    // list flag bits

struct Lists {
  double d[kMaxEf];
  std::uint32_t id[kMaxEf];
  std::uint8_t flag[kMaxEf];
};

struct Shared {
  Lists list[2];  // current and next (the merge writes the other)
  double bd[kMaxThreads];
  std::uint32_t bid[kMaxThreads];
  std::uint32_t hash[kHashSlots];
  int hash_count;
  int size;                         // list entries in use
  int cur;                          // which list is current
  int npick;                        // entries picked this step
  std::uint32_t pick[kMaxWidth];    // their ids
  std::uint32_t rows[kMaxThreads];  // the ids of the rows offered next
  int batch;                        // new candidates in bd/bid
  int reset;                        // the hash is half full: clear it before the next batch
  // The query follows (dim floats, dynamic shared memory).
};

__device__ __forceinline__ bool less(double da, std::uint32_t ia, double db, std::uint32_t ib) {
  return score_less(da, ia, db, ib);
}

__device__ __forceinline__ std::uint32_t hash_slot(std::uint32_t id) {
  return (id * 2654435761u) & (kHashSlots - 1);
}

// Inserts id; true when it was not there. Threads of the CTA may race.
__device__ bool hash_insert(Shared& sh, std::uint32_t id) {
  for (std::uint32_t h = hash_slot(id);; h = (h + 1) & (kHashSlots - 1)) {
    const std::uint32_t prev = atomicCAS(&sh.hash[h], kNoNode, id);
    if (prev == kNoNode) {
      atomicAdd(&sh.hash_count, 1);
      return true;
    }
    if (prev == id) return false;
  }
}

// Clears the hash and puts the list's ids back (call with the CTA).
__device__ void hash_reset(Shared& sh) {
  for (int i = threadIdx.x; i < kHashSlots; i += blockDim.x) sh.hash[i] = kNoNode;
  if (threadIdx.x == 0) sh.hash_count = 0;
  __syncthreads();
  const Lists& l = sh.list[sh.cur];
  for (int i = threadIdx.x; i < sh.size; i += blockDim.x) hash_insert(sh, l.id[i]);
  __syncthreads();
}

// Merges the sh.batch candidates in bd/bid (unsorted, distinct, not in the
// list) into the current list, keeping the ef best. Call with the CTA.
__device__ void merge_batch(Shared& sh, int ef) {
  const int nb = sh.batch;
  const int size = sh.size;
  const Lists& in = sh.list[sh.cur];
  Lists& out = sh.list[sh.cur ^ 1];
  // New candidates: rank among the batch + rank in the list (binary search).
  for (int i = threadIdx.x; i < nb; i += blockDim.x) {
    const double d = sh.bd[i];
    const std::uint32_t id = sh.bid[i];
    int r = 0;
    for (int j = 0; j < nb; ++j) r += less(sh.bd[j], sh.bid[j], d, id);
    int lo = 0, hi = size;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (less(in.d[mid], in.id[mid], d, id))
        lo = mid + 1;
      else
        hi = mid;
    }
    const int at = r + lo;
    if (at < ef) out.d[at] = d, out.id[at] = id, out.flag[at] = 0;
  }
  // List entries: index + new candidates before them.
  for (int i = threadIdx.x; i < size; i += blockDim.x) {
    int before = 0;
    for (int j = 0; j < nb; ++j) before += less(sh.bd[j], sh.bid[j], in.d[i], in.id[i]);
    const int at = i + before;
    if (at < ef) out.d[at] = in.d[i], out.id[at] = in.id[i], out.flag[at] = in.flag[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sh.size = min(ef, size + nb);
    sh.cur ^= 1;
    sh.batch = 0;
    // Decided here, between barriers: every thread reads the same value.
    sh.reset = sh.hash_count > kHashSlots / 2;
  }
  __syncthreads();
}

// group_lane_sum (distance/group_distance.cuh) with the lane's elements of
// a loaded before any arithmetic: one memory round trip per row instead of
// one per few elements. The same operations in the same order: same bits.
template <typename Op>
__device__ __forceinline__ float prefetched_lane_sum(const float (&x)[kPrefetch], const float* b, int n,
                                                     Op op, int lane) {
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int i = lane + j * kGroupLanes;
    if (i < n) acc += op(x[j], b[i]);
  }
  const unsigned mask = group_mask();
  acc += __shfl_xor_sync(mask, acc, 4, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 1, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 2, kGroupLanes);
  return acc;
}

// The same, of a . a.
__device__ __forceinline__ float prefetched_self_product(const float (&x)[kPrefetch], int n, int lane) {
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j)
    if (lane + j * kGroupLanes < n) acc += detail::Product{}(x[j], x[j]);
  const unsigned mask = group_mask();
  acc += __shfl_xor_sync(mask, acc, 4, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 1, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 2, kGroupLanes);
  return acc;
}

// group_distance(metric, a, q, n, lane), term for term: a row of the
// vectors against the query.
__device__ __forceinline__ double row_distance(Metric metric, const float* a, const float* q, int n,
                                               int lane) {
  if (n > kPrefetch * kGroupLanes) return group_distance(metric, a, q, n, lane);
  float x[kPrefetch];
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int i = lane + j * kGroupLanes;
    x[j] = i < n ? __ldg(a + i) : 0.0f;
  }
  switch (metric) {
    case Metric::L2:
      return sqrt(static_cast<double>(prefetched_lane_sum(x, q, n, detail::SquaredDiff{}, lane)));
    case Metric::InnerProduct:
      return -static_cast<double>(prefetched_lane_sum(x, q, n, detail::Product{}, lane));
    case Metric::Cosine: {
      const float dot = prefetched_lane_sum(x, q, n, detail::Product{}, lane);
      const float na = prefetched_self_product(x, n, lane);
      const float nb = group_inner_product(q, q, n, lane);
      if (na == 0.0f || nb == 0.0f) return __longlong_as_double(0x7ff8000000000000LL);
      double similarity = static_cast<double>(dot) / sqrt(static_cast<double>(na) * nb);
      if (similarity > 1.0) similarity = 1.0;
      if (similarity < -1.0) similarity = -1.0;
      return 1.0 - similarity;
    }
    default:
      return group_distance(metric, a, q, n, lane);
  }
}

// Offers nodes ids[0..count) (count <= blockDim.x; kNoNode entries ignored):
// the new ones (not visited, not deleted) are scored by the CTA's groups
// into the batch bd/bid, then merged into the list. Call with the CTA.
__device__ void offer_batch(Shared& sh, const float* q, const float* vectors, int dim, Metric metric,
                            const std::uint32_t* edges, int degree, const std::uint8_t* skip,
                            const std::uint32_t* ids, int count, int ef) {
  if (int(threadIdx.x) < count) {
    const std::uint32_t id = ids[threadIdx.x];
    // A deleted node (skipped, empty row) takes no place: see search_cpu.
    const bool dead = id == kNoNode || (skip && skip[id] && edges[std::int64_t(id) * degree] == kNoNode);
    if (!dead && hash_insert(sh, id)) sh.bid[atomicAdd(&sh.batch, 1)] = id;
  }
  __syncthreads();
  const int lane = threadIdx.x % kGroupLanes;
  for (int i = threadIdx.x / kGroupLanes; i < sh.batch; i += blockDim.x / kGroupLanes) {
    const std::uint32_t id = sh.bid[i];
    const double d = canonical_score(row_distance(metric, vectors + std::int64_t(id) * dim, q, dim, lane));
    if (lane == 0) sh.bd[i] = d;
  }
  __syncthreads();
  merge_batch(sh, ef);
}

__global__ void __launch_bounds__(kMaxThreads)
    search_kernel(const float* __restrict__ vectors, const std::uint32_t* __restrict__ edges, std::int64_t n,
                  int degree, int dim, Metric metric, const float* __restrict__ queries,
                  const std::uint32_t* __restrict__ entries, int n_entries,
                  const std::uint8_t* __restrict__ skip, int ef, int k, int width, bool query_in_shared,
                  std::int64_t* __restrict__ ids, double* __restrict__ distances) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  const float* q = queries + std::int64_t(blockIdx.x) * dim;
  if (query_in_shared) {  // after Shared, when the device's shared memory holds it
    float* qs = reinterpret_cast<float*>(&sh + 1);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) qs[i] = q[i];
    q = qs;
  }
  for (int i = threadIdx.x; i < kHashSlots; i += blockDim.x) sh.hash[i] = kNoNode;
  if (threadIdx.x == 0) sh.hash_count = 0, sh.size = 0, sh.cur = 0, sh.batch = 0, sh.reset = 0;
  __syncthreads();
  // The entry sample, a batch of blockDim.x at a time.
  const int nt = blockDim.x;
  for (int b = 0; b < n_entries; b += nt) {
    if (sh.reset) hash_reset(sh);
    offer_batch(sh, q, vectors, dim, metric, edges, degree, skip, entries + b, min(nt, n_entries - b), ef);
  }
  // Rows offered per batch: as many whole rows as the CTA has threads.
  const int rows_per_batch = nt / degree;
  for (;;) {
    if (sh.reset) hash_reset(sh);
    if (threadIdx.x < 32) {  // the first `width` unexpanded entries: one warp, 32 flags a ballot
      Lists& l = sh.list[sh.cur];
      const int size = sh.size;
      int found = 0;  // the same in every lane (ballots)
      for (int base = 0; base < size && found < width; base += 32) {
        const int i = base + int(threadIdx.x);
        unsigned open = __ballot_sync(0xffffffffu, i < size && !(l.flag[i] & kExpanded));
        for (; open && found < width; open &= open - 1, ++found)
          if (threadIdx.x == 0) {
            const int at = base + __ffs(open) - 1;
            sh.pick[found] = l.id[at];
            l.flag[at] |= kExpanded;
          }
      }
      if (threadIdx.x == 0) sh.npick = found;
    }
    __syncthreads();
    const int npick = sh.npick;
    if (npick == 0) break;
    // The picked rows, a batch of whole rows at a time: merging in pieces
    // keeps the ef best of the same union (the list only gets better, so a
    // node dropped once, or forgotten by a hash reset, is dropped again).
    for (int p0 = 0; p0 < npick; p0 += rows_per_batch) {
      if (p0 > 0 && sh.reset) hash_reset(sh);
      const int nrows = min(rows_per_batch, npick - p0);
      for (int t = threadIdx.x; t < nrows * degree; t += nt)
        sh.rows[t] = edges[std::int64_t(sh.pick[p0 + t / degree]) * degree + t % degree];
      __syncthreads();
      offer_batch(sh, q, vectors, dim, metric, edges, degree, skip, sh.rows, nrows * degree, ef);
    }
  }
  if (threadIdx.x == 0) {
    const Lists& l = sh.list[sh.cur];
    std::int64_t* oid = ids + std::int64_t(blockIdx.x) * k;
    double* od = distances + std::int64_t(blockIdx.x) * k;
    int out = 0;
    for (int i = 0; i < sh.size && out < k; ++i) {
      if (skip && skip[l.id[i]]) continue;
      oid[out] = l.id[i];
      od[out] = l.d[i];
      ++out;
    }
    for (; out < k; ++out) oid[out] = -1, od[out] = canonical_score(NAN);
  }
}

}  // namespace

struct DeviceGraph::Impl {
  int device;
  int dim;
  Metric metric;
  Graph host;  // sizes and rows: the entry sample is chosen on the host per call
  DeviceBuffer<float> vectors;
  DeviceBuffer<std::uint32_t> edges;
  bool query_in_shared = false;
  std::size_t smem = sizeof(Shared);
  // Entry lists of searches without skip flags, by seed, resident (at most
  // kCachedSeeds): a single query then uploads only itself.
  static constexpr std::size_t kCachedSeeds = 8;
  mutable std::mutex mu;
  mutable std::map<std::uint64_t, std::unique_ptr<DeviceBuffer<std::uint32_t>>> cached;

  Impl(const Graph& g, const float* v, int d, Metric m, int dev)
      : device(dev), dim(d), metric(m), host(g), vectors(std::size_t(g.n) * d), edges(g.edges.size()) {
    keep_pool_memory(device);
    if (g.n > 0) {
      GKNN_CUDA(cudaMemcpy(vectors.get(), v, std::size_t(g.n) * d * sizeof(float), cudaMemcpyHostToDevice));
      GKNN_CUDA(cudaMemcpy(edges.get(), g.edges.data(), g.edges.size() * sizeof(std::uint32_t),
                           cudaMemcpyHostToDevice));
    }
    int optin = 0;
    GKNN_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    query_in_shared = sizeof(Shared) + std::size_t(d) * sizeof(float) <= std::size_t(optin);
    if (query_in_shared) smem += std::size_t(d) * sizeof(float);
    GKNN_CUDA(cudaFuncSetAttribute(search_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }

  // The device copy of the entry list for sp (cached when sp has no skip
  // flags), its length; `upload` holds a per-call copy otherwise.
  std::pair<const std::uint32_t*, int> entries(const SearchParams& sp, cudaStream_t s,
                                               std::unique_ptr<AsyncBuffer<std::uint32_t>>& upload,
                                               std::vector<std::uint32_t>& host_copy) const {
    if (!sp.skip) {
      std::lock_guard<std::mutex> lock(mu);
      auto it = cached.find(sp.seed);
      if (it == cached.end() && cached.size() < kCachedSeeds) {
        const std::vector<std::uint32_t> e = entry_points(host, sp.seed, nullptr);
        auto buf = std::make_unique<DeviceBuffer<std::uint32_t>>(e.size());
        GKNN_CUDA(cudaMemcpy(buf->get(), e.data(), e.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
        it = cached.emplace(sp.seed, std::move(buf)).first;
      }
      if (it != cached.end()) return {it->second->get(), int(it->second->size())};
    }
    host_copy = entry_points(host, sp.seed, sp.skip);
    upload = std::make_unique<AsyncBuffer<std::uint32_t>>(host_copy.size(), s);
    GKNN_CUDA(cudaMemcpyAsync(upload->get(), host_copy.data(), host_copy.size() * sizeof(std::uint32_t),
                              cudaMemcpyHostToDevice, s));
    return {upload->get(), int(host_copy.size())};
  }
};

DeviceGraph::DeviceGraph(const Graph& g, const float* vectors, int dim, Metric metric, int device) {
  validate(g);
  if (dim < 1 || dim > kMaxDim || (g.n > 0 && !vectors))
    throw Error(ErrorCode::InvalidArgument, "DeviceGraph: bad dim or missing vectors");
  if (metric != Metric::L2 && metric != Metric::InnerProduct && metric != Metric::Cosine)
    throw Error(ErrorCode::InvalidArgument, "DeviceGraph: metric must be L2, inner product or cosine");
  use_device(device);
  impl_ = new Impl(g, vectors, dim, metric, device);
}

DeviceGraph::~DeviceGraph() {
  if (impl_) {
    cudaSetDevice(impl_->device);
    delete impl_;
  }
}
DeviceGraph::DeviceGraph(DeviceGraph&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
DeviceGraph& DeviceGraph::operator=(DeviceGraph&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}

std::size_t DeviceGraph::bytes() const {
  return impl_ ? impl_->vectors.size() * sizeof(float) + impl_->edges.size() * sizeof(std::uint32_t) : 0;
}
std::int64_t DeviceGraph::n() const { return impl_ ? impl_->host.n : 0; }
int DeviceGraph::degree() const { return impl_ ? impl_->host.degree : 0; }
int DeviceGraph::device() const { return impl_ ? impl_->device : -1; }

void DeviceGraph::search(const float* queries, std::int64_t nq, const SearchParams& sp, std::int64_t* ids,
                         double* distances) const {
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "DeviceGraph: search on a moved-from graph");
  const Impl& im = *impl_;
  if (nq < 0 || sp.k < 1 || sp.ef < 1 || sp.width < 1 || sp.width > kMaxWidth ||
      (nq > 0 && (!queries || !ids || !distances)))
    throw Error(ErrorCode::InvalidArgument, "DeviceGraph: bad sizes (nq, k, ef or width) or missing input");
  const int ef = std::max(sp.ef, sp.k);
  if (ef > kMaxEf)
    throw Error(ErrorCode::InvalidArgument, "DeviceGraph: ef (or k) above " + std::to_string(kMaxEf));
  if (nq == 0) return;
  if (im.host.n == 0) {
    for (std::int64_t i = 0; i < nq * sp.k; ++i) ids[i] = -1, distances[i] = canonical_score(NAN);
    return;
  }
  GKNN_CUDA(cudaSetDevice(im.device));
  const cudaStream_t s = thread_stream(im.device);
  AsyncBuffer<float> dq(std::size_t(nq) * im.dim, s);
  AsyncBuffer<std::uint8_t> dskip(sp.skip ? std::size_t(im.host.n) : 0, s);
  AsyncBuffer<std::int64_t> dids(std::size_t(nq) * sp.k, s);
  AsyncBuffer<double> dd(std::size_t(nq) * sp.k, s);
  std::unique_ptr<AsyncBuffer<std::uint32_t>> upload;
  std::vector<std::uint32_t> host_entries;  // kept alive until the wait below
  const auto [entries, n_entries] = im.entries(sp, s, upload, host_entries);
  GKNN_CUDA(cudaMemcpyAsync(dq.get(), queries, std::size_t(nq) * im.dim * sizeof(float),
                            cudaMemcpyHostToDevice, s));
  if (sp.skip)
    GKNN_CUDA(cudaMemcpyAsync(dskip.get(), sp.skip, std::size_t(im.host.n), cudaMemcpyHostToDevice, s));
  static_assert(sizeof(Shared) < 48 * 1024 + 8 * 1024, "the search kernel's shared memory without the query");
  const int threads = nq <= kWidestUpTo ? kMaxThreads : nq <= kWideUpTo ? kMaxThreads / 2 : kMaxThreads / 4;
  for (std::int64_t q0 = 0; q0 < nq; q0 += 1 << 30) {
    const std::int64_t rows = std::min<std::int64_t>(nq - q0, 1 << 30);
    search_kernel<<<unsigned(rows), threads, im.smem, s>>>(
        im.vectors.get(), im.edges.get(), im.host.n, im.host.degree, im.dim, im.metric,
        dq.get() + q0 * im.dim, entries, n_entries, sp.skip ? dskip.get() : nullptr, ef, sp.k, sp.width,
        im.query_in_shared, dids.get() + q0 * sp.k, dd.get() + q0 * sp.k);
    GKNN_CUDA(cudaGetLastError());
  }
  GKNN_CUDA(cudaMemcpyAsync(ids, dids.get(), std::size_t(nq) * sp.k * sizeof(std::int64_t),
                            cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaMemcpyAsync(distances, dd.get(), std::size_t(nq) * sp.k * sizeof(double),
                            cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaStreamSynchronize(s));
}

}  // namespace gknn::graph
