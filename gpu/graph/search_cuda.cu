// DeviceGraph: the graph and its vectors on one GPU, searched in batches.
// One CTA per query runs the CPU search's algorithm (search_cpu.cpp): a
// sorted candidate list of ef (shared memory), the first unexpanded entry
// expanded each step (found by one warp's ballot over the list's flags),
// its row's unvisited nodes scored by groups of eight threads with
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

#include "distance/group_distance.cuh"
#include "graph/common.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

constexpr int kThreads = 128;                    // per CTA; also the merge batch
constexpr int kGroups = kThreads / kGroupLanes;  // distances computed at once
constexpr int kMaxEf = kMaxDeviceEf;             // the list in shared memory
constexpr int kHashSlots = 4096;                 // visited set, power of 2
constexpr std::uint32_t kExpanded = 1;           // list flag bits

struct Lists {
  double d[kMaxEf];
  std::uint32_t id[kMaxEf];
  std::uint8_t flag[kMaxEf];
};

struct Shared {
  Lists list[2];  // current and next (the merge writes the other)
  double bd[kThreads];
  std::uint32_t bid[kThreads];
  std::uint32_t hash[kHashSlots];
  int hash_count;
  int size;   // list entries in use
  int cur;    // which list is current
  int pick;   // the first unexpanded entry, or -1
  int batch;  // new candidates in bd/bid
  int reset;  // the hash is half full: clear it before the next batch
  // The query follows (dim floats, dynamic shared memory).
};

__device__ __forceinline__ const float* shared_query(Shared& sh) {
  return reinterpret_cast<const float*>(&sh + 1);
}

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

// Offers nodes ids[0..count) (count <= kThreads; kNoNode entries ignored):
// the new ones (not visited, not deleted) are scored by the CTA's groups
// into the batch bd/bid, then merged into the list. Call with the CTA.
__device__ void offer_batch(Shared& sh, const float* vectors, int dim, Metric metric,
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
  const float* q = shared_query(sh);
  for (int i = threadIdx.x / kGroupLanes; i < sh.batch; i += kGroups) {
    const std::uint32_t id = sh.bid[i];
    const double d = canonical_score(group_distance(metric, vectors + std::int64_t(id) * dim, q, dim, lane));
    if (lane == 0) sh.bd[i] = d;
  }
  __syncthreads();
  merge_batch(sh, ef);
}

__global__ void __launch_bounds__(kThreads)
    search_kernel(const float* __restrict__ vectors, const std::uint32_t* __restrict__ edges, std::int64_t n,
                  int degree, int dim, Metric metric, const float* __restrict__ queries,
                  const std::uint32_t* __restrict__ entries, int n_entries,
                  const std::uint8_t* __restrict__ skip, int ef, int k, std::int64_t* __restrict__ ids,
                  double* __restrict__ distances) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  const float* q = queries + std::int64_t(blockIdx.x) * dim;
  float* qs = reinterpret_cast<float*>(&sh + 1);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) qs[i] = q[i];
  for (int i = threadIdx.x; i < kHashSlots; i += blockDim.x) sh.hash[i] = kNoNode;
  if (threadIdx.x == 0) sh.hash_count = 0, sh.size = 0, sh.cur = 0, sh.batch = 0, sh.reset = 0;
  __syncthreads();
  // The entry sample, a batch of kThreads at a time.
  for (int b = 0; b < n_entries; b += kThreads) {
    if (sh.reset) hash_reset(sh);
    offer_batch(sh, vectors, dim, metric, edges, degree, skip, entries + b, min(kThreads, n_entries - b), ef);
  }
  for (;;) {
    if (sh.reset) hash_reset(sh);
    if (threadIdx.x < 32) {  // the first unexpanded entry: one warp, 32 flags a step
      const Lists& l = sh.list[sh.cur];
      const int size = sh.size;
      int at = -1;
      for (int base = 0; base < size; base += 32) {
        const int i = base + int(threadIdx.x);
        const unsigned open = __ballot_sync(0xffffffffu, i < size && !(l.flag[i] & kExpanded));
        if (open) {
          at = base + __ffs(open) - 1;
          break;
        }
      }
      if (threadIdx.x == 0) {
        sh.pick = at;
        if (at >= 0) sh.list[sh.cur].flag[at] |= kExpanded;
      }
    }
    __syncthreads();
    if (sh.pick < 0) break;
    const std::uint32_t node = sh.list[sh.cur].id[sh.pick];
    offer_batch(sh, vectors, dim, metric, edges, degree, skip, edges + std::int64_t(node) * degree, degree,
                ef);
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

  Impl(const Graph& g, const float* v, int d, Metric m, int dev)
      : device(dev), dim(d), metric(m), host(g), vectors(std::size_t(g.n) * d), edges(g.edges.size()) {
    keep_pool_memory(device);
    if (g.n > 0) {
      GKNN_CUDA(cudaMemcpy(vectors.get(), v, std::size_t(g.n) * d * sizeof(float), cudaMemcpyHostToDevice));
      GKNN_CUDA(cudaMemcpy(edges.get(), g.edges.data(), g.edges.size() * sizeof(std::uint32_t),
                           cudaMemcpyHostToDevice));
    }
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
  if (nq < 0 || sp.k < 1 || sp.ef < 1 || (nq > 0 && (!queries || !ids || !distances)))
    throw Error(ErrorCode::InvalidArgument, "DeviceGraph: bad sizes (nq, k or ef) or missing input");
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
  const std::vector<std::uint32_t> entries = entry_points(im.host, sp.seed, sp.skip);
  AsyncBuffer<float> dq(std::size_t(nq) * im.dim, s);
  AsyncBuffer<std::uint32_t> de(entries.size(), s);
  AsyncBuffer<std::uint8_t> dskip(sp.skip ? std::size_t(im.host.n) : 0, s);
  AsyncBuffer<std::int64_t> dids(std::size_t(nq) * sp.k, s);
  AsyncBuffer<double> dd(std::size_t(nq) * sp.k, s);
  GKNN_CUDA(cudaMemcpyAsync(dq.get(), queries, std::size_t(nq) * im.dim * sizeof(float),
                            cudaMemcpyHostToDevice, s));
  GKNN_CUDA(cudaMemcpyAsync(de.get(), entries.data(), entries.size() * sizeof(std::uint32_t),
                            cudaMemcpyHostToDevice, s));
  if (sp.skip)
    GKNN_CUDA(cudaMemcpyAsync(dskip.get(), sp.skip, std::size_t(im.host.n), cudaMemcpyHostToDevice, s));
  static_assert(sizeof(Shared) + kMaxDim * sizeof(float) < 227 * 1024, "shared memory of the search kernel");
  const std::size_t smem = sizeof(Shared) + std::size_t(im.dim) * sizeof(float);
  GKNN_CUDA(cudaFuncSetAttribute(search_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  for (std::int64_t q0 = 0; q0 < nq; q0 += 1 << 30) {
    const std::int64_t rows = std::min<std::int64_t>(nq - q0, 1 << 30);
    search_kernel<<<unsigned(rows), kThreads, smem, s>>>(
        im.vectors.get(), im.edges.get(), im.host.n, im.host.degree, im.dim, im.metric,
        dq.get() + q0 * im.dim, de.get(), int(entries.size()), sp.skip ? dskip.get() : nullptr, ef, sp.k,
        dids.get() + q0 * sp.k, dd.get() + q0 * sp.k);
    GKNN_CUDA(cudaGetLastError());
  }
  GKNN_CUDA(cudaMemcpyAsync(ids, dids.get(), std::size_t(nq) * sp.k * sizeof(std::int64_t),
                            cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaMemcpyAsync(distances, dd.get(), std::size_t(nq) * sp.k * sizeof(double),
                            cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaStreamSynchronize(s));
}

}  // namespace gknn::graph
