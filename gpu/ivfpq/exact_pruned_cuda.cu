// DeviceImage::search_exact_pruned: search_exact_pruned_cpu's pruning on the
// GPU, inside the exact scan (knn_scan.cu), so that the answers are the
// scan's (ties by row, rows in id order) and no step waits for the host.
// Per group of up to 16 queries, all on the call's stream:
//   1. each query's precise (double) distance to every centroid;
//   2. a first k-th best per query (a block each): the entries of its
//      nearest lists (at least max(2k, kFirstEntries), at most kFirstCap),
//      their float sums, the k-th smallest by a radix select, its distance. It is
//      the distance of a real entry, so at least k entries are that near:
//      an upper bound of the query's true k-th best;
//   3. the scan's passes with this file's keys: for each (row, query), the
//      row's list bound and ring bound (prune_margins.h, the CPU's margins)
//      against that k-th best; where either exceeds it the key is +inf, and
//      the row is strictly farther than k rows: never among the k best, not
//      even by a tie. Elsewhere the key is the row's float sum, as the scan
//      kernel computes it (group_l2_squared: distance()'s bits).
// Reading far fewer rows is the gain: the pruned rows' vectors are never
// loaded, and their arithmetic is skipped (the full scan's cost at a few
// queries: bench/results/knn-resident-scan-H200-2026-11-28.md). Measured
// (exact-pruned-gpu-H200-2026-11-28.md): 1M x 128 in 1024 lists, 2.5 % of
// the distances, 0.67-0.8x the whole scan's time; the fixed steps (the
// first k-th best, the row tests, the selection over every row) dominate.
#include <cub/block/block_scan.cuh>

#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>

#include "distance/distances_many.cuh"
#include "distance/group_distance.cuh"
#include "distance/knn_resident.h"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/select.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
#include "ivfpq/prune_margins.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Step 2's block, and the entries it takes at most.
constexpr int kFirstThreads = 1024;
constexpr int kFirstCap = 4096;
constexpr int kFirstEntries = 256;
constexpr int kFirstLists = 64;  // lists taken at most (empty lists count)
static_assert(2 * kMaxRowK <= kFirstCap, "2k entries fit the block's select");

__device__ double precise_l2(const float* a, const float* b, int dim) {
  double s = 0;
  for (int i = 0; i < dim; ++i) {
    const double d = double(a[i]) - double(b[i]);
    s += d * d;
  }
  return sqrt(s);
}

// A block per list: its entries' lists and centre distances, by rank, and
// its radius (list_bounds' rule: NaN where any is NaN, 0 when empty).
__global__ void __launch_bounds__(kThreads)
    make_bounds(const float* vectors, const float* centroids, const std::int64_t* offsets,
                const std::int64_t* rank, int dim, std::int32_t* row_list, double* row_centre,
                double* radius) {
  __shared__ double warp_most[kWarps];
  const int l = blockIdx.x;
  const float* c = centroids + std::int64_t(l) * dim;
  double most = 0;
  bool nan = false;
  for (std::int64_t e = offsets[l] + threadIdx.x; e < offsets[l + 1]; e += blockDim.x) {
    const std::int64_t r = rank[e];
    const double d = precise_l2(vectors + r * dim, c, dim);
    row_list[r] = l;
    row_centre[r] = d;
    if (isnan(d))
      nan = true;
    else
      most = fmax(most, d);
  }
  for (int off = 16; off > 0; off /= 2) most = fmax(most, __shfl_down_sync(~0u, most, off));
  if (threadIdx.x % 32 == 0) warp_most[threadIdx.x / 32] = most;
  const bool any_nan = __syncthreads_or(nan);  // also orders warp_most's writes
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) most = fmax(most, warp_most[w]);
    radius[l] = any_nan ? __longlong_as_double(0x7ff8000000000000LL) : most;
  }
}

// Each query's distance to each centroid, as list_bounds' and
// search_exact_pruned_cpu's (double sums; the margins cover any order): a
// warp a pair, its lanes striding the dimensions (a thread a pair, reading
// a centroid alone, took tens of microseconds).
__global__ void centre_distances(const float* queries, std::int64_t nq, const float* centroids, int lists,
                                 int dim, double* out) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = std::int64_t(gridDim.x) * blockDim.x / 32;
  for (std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < nq * lists;
       i += warps) {
    const float* a = queries + (i / lists) * dim;
    const float* b = centroids + (i % lists) * std::int64_t(dim);
    double sum = 0;
    for (int d = lane; d < dim; d += 32) {
      const double x = double(a[d]) - double(b[d]);
      sum += x * x;
    }
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(~0u, sum, off);
    if (lane == 0) out[i] = sqrt(sum);
  }
}

// (centre distance, list) order, NaN last.
__device__ __forceinline__ bool nearer(double a, int la, double b, int lb) {
  if (isnan(a) != isnan(b)) return isnan(b);
  return a < b || (!(b < a) && la < lb);
}

// The block's nearest list after (after_c, after_l) in nearer's order, or
// -1; every thread gets it.
__device__ int next_list(const double* cq, int lists, double after_c, int after_l, double* best_c,
                         double* warp_c, int* warp_l) {
  double bc = __longlong_as_double(0x7ff8000000000000LL);
  int bl = -1;
  for (int l = threadIdx.x; l < lists; l += blockDim.x) {
    const double c = cq[l];
    if ((after_l < 0 || nearer(after_c, after_l, c, l)) && (bl < 0 || nearer(c, l, bc, bl))) bc = c, bl = l;
  }
  for (int off = 16; off > 0; off /= 2) {
    const double oc = __shfl_down_sync(~0u, bc, off);
    const int ol = __shfl_down_sync(~0u, bl, off);
    if (ol >= 0 && (bl < 0 || nearer(oc, ol, bc, bl))) bc = oc, bl = ol;
  }
  if (threadIdx.x % 32 == 0) warp_c[threadIdx.x / 32] = bc, warp_l[threadIdx.x / 32] = bl;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x / 32); ++w)
      if (warp_l[w] >= 0 && (bl < 0 || nearer(warp_c[w], warp_l[w], bc, bl))) bc = warp_c[w], bl = warp_l[w];
    warp_l[0] = bl;
    *best_c = bc;
  }
  __syncthreads();
  const int found = warp_l[0];
  __syncthreads();  // warp_l is written again by the next call
  return found;
}

// Step 2, a block per query: tau[q] = the distance of the k-th best of the
// entries of the query's nearest lists, or +inf (no pruning) where fewer
// than k of them have a number (NaN sums count as +inf).
__global__ void __launch_bounds__(kFirstThreads)
    first_kth(const double* centre, int lists, const std::int64_t* offsets, const std::int64_t* rank,
              const float* vectors, const float* queries, int dim, int k, double* tau) {
  __shared__ float sums[kFirstCap];
  __shared__ std::uint32_t rows[kFirstCap];
  __shared__ unsigned hist[256], pick_digit, pick_left;
  __shared__ int chosen[kFirstLists];
  __shared__ std::int64_t ends[kFirstLists];  // entries taken up to and including chosen[i]
  __shared__ double warp_c[kFirstThreads / 32], best_c;
  __shared__ int warp_l[kFirstThreads / 32];
  const int q = blockIdx.x;
  const double* cq = centre + std::int64_t(q) * lists;
  const float* query = queries + std::int64_t(q) * dim;
  const std::int64_t want = min(kFirstCap, max(2 * k, kFirstEntries));

  // The nearest lists, until `want` entries (block-uniform loop).
  int n = 0, last = -1;
  double last_c = 0;
  std::int64_t taken = 0;
  while (n < kFirstLists && taken < want) {
    const int l = next_list(cq, lists, last_c, last, &best_c, warp_c, warp_l);
    if (l < 0) break;
    last = l;
    last_c = best_c;
    taken += offsets[l + 1] - offsets[l];
    if (threadIdx.x == 0) chosen[n] = l, ends[n] = taken;
    ++n;
  }
  __syncthreads();
  const int m = int(taken < kFirstCap ? taken : kFirstCap);
  if (m < k) {  // block-uniform
    if (threadIdx.x == 0) tau[q] = INFINITY;
    return;
  }

  // Their rows (ranks), then their float sums, eight threads an entry (the
  // bits of distance(); a thread an entry, each reading its own row, took
  // twice as long).
  for (int j = threadIdx.x; j < m; j += kFirstThreads) {
    int i = 0;
    while (ends[i] <= j) ++i;
    rows[j] = std::uint32_t(rank[offsets[chosen[i]] + (j - (i ? ends[i - 1] : 0))]);
  }
  __syncthreads();
  const int g_lane = threadIdx.x % kGroupLanes;
  for (int j = threadIdx.x / kGroupLanes; j < m; j += kFirstThreads / kGroupLanes) {
    const float s = group_l2_squared(vectors + std::int64_t(rows[j]) * dim, query, dim, g_lane);
    if (g_lane == 0) sums[j] = isnan(s) ? INFINITY : s;
  }

  // The k-th smallest, a byte of its bits at a time (sums are >= +0 or
  // +inf: they order as their bits): a histogram of the next byte among
  // the sums that share the bytes found so far, and the bin where the
  // k-th falls.
  unsigned prefix = 0, mask = 0, left = unsigned(k);
  const int lane = threadIdx.x % 32;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kFirstThreads) hist[i] = 0;
    __syncthreads();  // also: the sums are written
    for (int j = threadIdx.x; j < m; j += kFirstThreads) {
      const unsigned u = __float_as_uint(sums[j]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      unsigned own = 0;
      for (int b = 0; b < 8; ++b) own += hist[lane * 8 + b];
      unsigned upto = own;
      for (int off = 1; off < 32; off *= 2) {
        const unsigned t = __shfl_up_sync(~0u, upto, off);
        if (lane >= off) upto += t;
      }
      unsigned before = upto - own;
      if (before < left && left <= upto) {
        int b = lane * 8;
        while (before + hist[b] < left) before += hist[b++];
        pick_digit = unsigned(b);
        pick_left = left - before;
      }
    }
    __syncthreads();
    prefix |= pick_digit << shift;
    mask |= 255u << shift;
    left = pick_left;
  }
  if (threadIdx.x == 0) tau[q] = sqrt(double(__uint_as_float(prefix)));
}

// Step 3a, a thread per row of the pass: for each query, the row's list
// and ring bounds against its first k-th best. Ruled out: the key +inf.
// Left: the pair (p, q) appended to `pairs` (as p * kSharedConstants + q;
// one atomic a block).
__global__ void __launch_bounds__(kThreads)
    test_rows(const std::int32_t* row_list, const double* row_centre, const double* radius,
              const double* centre, int lists, const double* tau, int nq, std::int64_t first,
              std::int64_t rows, double keep, double dd, double slack, float* matrix, std::uint32_t* pairs,
              unsigned* pair_count) {
  using Scan = cub::BlockScan<unsigned, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ double limit[kSharedConstants];
  __shared__ unsigned base;
  if (threadIdx.x < nq) limit[threadIdx.x] = tau[threadIdx.x] + slack;
  __syncthreads();
  const std::int64_t p = std::int64_t(blockIdx.x) * kThreads + threadIdx.x;
  unsigned left = 0;  // bit q: query q computes this row
  if (p < rows) {
    const std::int64_t r = first + p;
    const int l = row_list[r];
    const double ec = row_centre[r], rl = radius[l];
    for (int q = 0; q < nq; ++q) {
      // NaN bounds compare false: read, as on the CPU.
      const double c = centre[std::int64_t(q) * lists + l], t = limit[q];
      if (!(list_bound(c, rl, dd) * keep > t) && !(separation(c, ec, dd) * keep > t))
        left |= 1u << q;
      else
        matrix[q * rows + p] = INFINITY;
    }
  }
  unsigned at = 0, total = 0;
  Scan(scan).ExclusiveSum(unsigned(__popc(left)), at, total);
  if (threadIdx.x == 0 && total) base = atomicAdd(pair_count, total);
  __syncthreads();
  for (; left; left &= left - 1) pairs[base + at++] = std::uint32_t(p) * kSharedConstants + (__ffs(left) - 1);
}

// Step 3b: the pairs' float sums (distance()'s bits), eight threads a pair;
// adds the pass's pairs to *computed.
__global__ void __launch_bounds__(kThreads)
    pair_sums(const std::uint32_t* pairs, const unsigned* pair_count, const float* vectors,
              const float* queries, int dim, std::int64_t first, std::int64_t rows, float* matrix,
              unsigned long long* computed) {
  const unsigned n = *pair_count;
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(computed, (unsigned long long)n);
  const int lane = threadIdx.x % kGroupLanes;
  const std::int64_t groups = std::int64_t(gridDim.x) * (kThreads / kGroupLanes);
  for (std::int64_t i = (std::int64_t(blockIdx.x) * kThreads + threadIdx.x) / kGroupLanes; i < n;
       i += groups) {
    const std::uint32_t pq = pairs[i];
    const std::int64_t p = pq / kSharedConstants;
    const int q = int(pq % kSharedConstants);
    const float s = group_l2_squared(vectors + (first + p) * dim, queries + std::int64_t(q) * dim, dim, lane);
    if (lane == 0) matrix[q * rows + p] = s;
  }
}

// What the keys read of a resident image (device pointers).
struct PruneImage {
  const float *vectors, *centroids;
  const std::int64_t *offsets, *rank;
  int lists, dim;
};

// The scan's keys for one call: the centre distances and first k-th bests
// of the current group of queries and the counters in one allocation, the
// pairs' list in another (made by the first pass, the largest), all on the
// call's stream. The distances computed come back to pinned memory after
// each pass: read once the scan has waited for its results.
class PrunedKeys final : public ScanKeys {
 public:
  PrunedKeys(const PruneImage& im, const PruneBase& pb, int k, cudaStream_t s)
      : im_(im),
        pb_(pb),
        k_(k),
        stream_(s),
        block_(at_counts(im.lists) + 256, s),
        pinned_(sizeof(unsigned long long)) {
    centre_ = in_block<double>(block_, 0);
    tau_ = in_block<double>(block_, at_tau(im.lists));
    computed_ = in_block<unsigned long long>(block_, at_counts(im.lists));
    pair_count_ = reinterpret_cast<unsigned*>(computed_ + 1);
    GKNN_CUDA(cudaMemsetAsync(computed_, 0, sizeof(unsigned long long), s));
    *pinned_as<unsigned long long>(pinned_) = 0;
    keep_ = 1.0 - relative_margin(im.dim), dd_ = double_error(im.dim), slack_ = underflow_floor(im.dim);
  }
  // The pinned block goes back to a process-wide free list: where the scan
  // threw before its final wait, a copy into it may still be queued
  // (found by review). After that wait this costs nothing.
  ~PrunedKeys() override { cudaStreamSynchronize(stream_); }
  PrunedKeys(const PrunedKeys&) = delete;
  PrunedKeys& operator=(const PrunedKeys&) = delete;

  void prepare(const float* queries, std::int64_t nq, cudaStream_t s) override {
    centre_distances<<<grid_for(nq * im_.lists * 32, kThreads), kThreads, 0, s>>>(
        queries, nq, im_.centroids, im_.lists, im_.dim, centre_);
    GKNN_CUDA(cudaGetLastError());
    first_kth<<<unsigned(nq), kFirstThreads, 0, s>>>(centre_, im_.lists, im_.offsets, im_.rank, im_.vectors,
                                                     queries, im_.dim, k_, tau_);
    GKNN_CUDA(cudaGetLastError());
  }
  void keys(const float* queries, std::int64_t nq, std::int64_t first, std::int64_t rows, float* matrix,
            cudaStream_t s) override {
    // A pair is row * kSharedConstants + query in 32 bits: the scan's
    // passes are far shorter (at most 2^24 rows).
    if (rows > (std::int64_t(1) << 28))
      throw Error(ErrorCode::InvalidArgument, "ivfpq: a pruned scan's pass of more than 2^28 rows");
    if (!pairs_) pairs_ = std::make_unique<AsyncBuffer<std::uint32_t>>(std::size_t(nq * rows), s);
    GKNN_CUDA(cudaMemsetAsync(pair_count_, 0, sizeof(unsigned), s));
    test_rows<<<unsigned((rows + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        pb_.row_list.get(), pb_.row_centre.get(), pb_.radius.get(), centre_, im_.lists, tau_, int(nq), first,
        rows, keep_, dd_, slack_, matrix, pairs_->get(), pair_count_);
    GKNN_CUDA(cudaGetLastError());
    pair_sums<<<unsigned(distance_blocks<pair_sums>(0)), kThreads, 0, s>>>(
        pairs_->get(), pair_count_, im_.vectors, queries, im_.dim, first, rows, matrix, computed_);
    GKNN_CUDA(cudaGetLastError());
    GKNN_CUDA(
        cudaMemcpyAsync(pinned_.data(), computed_, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  }
  // The distances computed: valid once the stream has run the last pass.
  std::int64_t computed() const { return std::int64_t(*pinned_as<unsigned long long>(pinned_)); }

 private:
  static std::size_t at_tau(int lists) {
    return (sizeof(double) * kSharedConstants * lists + 255) / 256 * 256;
  }
  static std::size_t at_counts(int lists) { return at_tau(lists) + 256; }

  PruneImage im_;
  const PruneBase& pb_;
  int k_;
  cudaStream_t stream_;
  AsyncBuffer<unsigned char> block_;
  PinnedBlock pinned_;
  std::unique_ptr<AsyncBuffer<std::uint32_t>> pairs_;
  double *centre_ = nullptr, *tau_ = nullptr;
  unsigned long long* computed_ = nullptr;
  unsigned* pair_count_ = nullptr;
  double keep_, dd_, slack_;
};
static_assert(kSharedConstants * sizeof(double) <= 256, "a group's k-th bests fit before the counters");

}  // namespace

PruneBase::PruneBase(const float* vectors, const float* centroids, const std::int64_t* d_offsets,
                     const std::int64_t* rank, std::int64_t entries, int lists, int dim, cudaStream_t s)
    : row_list(entries), row_centre(entries), radius(lists) {
  make_bounds<<<unsigned(lists), kThreads, 0, s>>>(vectors, centroids, d_offsets, rank, dim, row_list.get(),
                                                   row_centre.get(), radius.get());
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaStreamSynchronize(s));  // complete before another thread's search sees it
}

const PruneBase* DeviceImage::Impl::prune_base(cudaStream_t s) const {
  std::lock_guard<std::mutex> lock(prune_mu);
  if (!prune)
    prune = std::make_unique<PruneBase>(vectors.get(), centroids.get(), d_offsets.get(), rank.get(), entries,
                                        params.lists, params.dim, s);
  return prune.get();
}

// Whether this call prunes: on an image whose recent calls computed more
// than kPruneShareMax of the distances the pruned scan costs more than the
// whole one (bench/results/exact-pruned-gpu-H200-2026-11-28.md), so there
// the whole scan runs, and one call in kPruneRetry prunes to follow the
// queries.
constexpr float kPruneShareMax = 0.25f;
constexpr std::uint32_t kPruneRetry = 16;
bool DeviceImage::Impl::prune_now(Pruning pruning) const {
  if (pruning == Pruning::Always || prune_share.load(std::memory_order_relaxed) <= kPruneShareMax)
    return true;
  return prune_skips.fetch_add(1, std::memory_order_relaxed) % kPruneRetry == kPruneRetry - 1;
}

void DeviceImage::Impl::note_pruned(std::int64_t computed, std::int64_t possible) const {
  const float share = float(double(computed) / double(possible));
  float old = prune_share.load(std::memory_order_relaxed);
  // A moving average over about four calls; a lost race loses one call's note.
  prune_share.compare_exchange_strong(old, old + (share - old) / 4, std::memory_order_relaxed);
}

void DeviceImage::search_exact_pruned(const float* queries, std::int64_t nq, int k, std::int64_t* ids,
                                      double* distances, std::int64_t* computed, Pruning pruning) const {
  check_exact(queries, nq, k, ids, distances);
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: search on a moved-from DeviceImage");
  const Impl& im = *impl_;
  const bool prunable = im.with_vectors && im.element == VectorElement::Float32 &&
                        im.params.metric == Metric::L2 && exact_knn_gpu_scan_fits(im.params.dim, k) &&
                        im.entries <= std::int64_t(UINT32_MAX);  // first_kth's rows

  if (!prunable || nq == 0 || k == 0 || im.entries == 0 || !im.prune_now(pruning)) {
    search_exact(queries, nq, k, ids, distances);
    if (computed) *computed = k > 0 ? nq * im.entries : 0;
    return;
  }
  GKNN_CUDA(cudaSetDevice(im.device));
  const cudaStream_t s = thread_stream(im.device);
  const PruneBase* pb = im.prune_base(s);
  const PruneImage pi{im.vectors.get(), im.centroids.get(), im.d_offsets.get(),
                      im.rank.get(),    im.params.lists,    im.params.dim};
  PrunedKeys keys(pi, *pb, int(std::min<std::int64_t>(k, im.entries)), s);
  const KnnRequest r = im.exact_request(queries, nq, k);                              // L2, float vectors
  exact_knn_resident_scan(r, im.device, ids, distances, im.ranked_ids.get(), &keys);  // waits
  im.note_pruned(keys.computed(), nq * im.entries);
  if (computed) *computed = keys.computed();
}

}  // namespace gknn::ivfpq
