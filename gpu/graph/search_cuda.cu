// DeviceGraph: the graph and its vectors on one GPU, searched in batches.
// One CTA per query runs the CPU search's algorithm (search_cpu.cpp): a
// sorted candidate list of ef (shared memory), the first `width` unexpanded
// entries expanded each step (found by one warp's ballots over the list's
// flags), their rows' unvisited nodes scored by groups of eight threads with
// group_distance's lanes and combining tree (the query in shared memory; the
// library is built without FMA contraction, so the distances equal the CPU's
// bit for bit), then merged into the list. A call of a few queries gives
// each a thread block cluster (sm_90, see Team): its other CTAs score
// shares of the entry sample's and every step's rows for the leader. Calls
// of up to kWideUpTo queries without clusters have the entry sample (the
// same nodes for every query of a seed) scored first by
// entry_scores_kernel, many CTAs per query, and handed to the search as
// given scores.
// A step's rows reach shared memory by asynchronous copies, the CTA's
// threads sharing them (one round trip for a step), before each group sums
// its row there (each lane's own staging area where the rows do not fit).
// The merge drops the candidates that cannot enter the list (after a full
// list's last entry, or after a bound from the batch itself), sorts a large
// rest, and places every element by its rank (its index plus how many of
// the other side precede it), so one pass of the CTA merges any batch.
// Where a lone query's time went (H200, 60,000 x 784, ef 16, clock64 per
// phase; bench/results/graph-kernel-phases-H200-2026-11-28.md): ~6 steps of
// ~8 us (scoring with its two cluster barriers 4, the merge 2.5, picking,
// the edge rows and the visited set 0.6 each) after an entry phase of ~20.
// The visited set is a hash in shared memory; when half full it is cleared
// and refilled with the list's ids (as CAGRA does): a node outside the list
// may then be scored again, never listed twice.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "distance/group_distance.cuh"
#include "distance/pad_results.h"
#include "graph/common.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

// Threads per CTA (also the merge batch): 512 for a few queries, 256 for
// small batches, where one CTA per query leaves most of the GPU idle and a
// lone query's time is the chain of rows each group scores in turn; 128
// for large ones, where more CTAs fit an SM.
constexpr int kMaxThreads = 512;
constexpr std::int64_t kWidestUpTo = 16;  // queries per call that get 512 threads
constexpr std::int64_t kWideUpTo = 128;   // ... 256
constexpr int kMaxEf = kMaxDeviceEf;      // the list in shared memory
constexpr int kHashSlots = 4096;          // visited set, power of 2
constexpr std::uint32_t kExpanded = 1;    // list flag bits
constexpr int kEntryThreads = 64;         // threads per CTA scoring the entry sample
constexpr int kOwnBoundAbove = 32;        // batches drop_hopeless may bound by themselves
constexpr int kSortAbove = 32;            // larger calls' merges of more candidates sort them first
constexpr int kMinRankLanes = 4;          // merges that would rank with fewer lanes a candidate sort first
constexpr int kPrefetch = 32;             // elements per lane in registers without staging: dim <= 256
constexpr int kSearchEnded = -1;          // Shared::published: the search ended
constexpr int kEntriesPublished = -2;     // ... at or below: kEntriesPublished - n, the entry sample of n
static_assert(kMaxDeviceEf >= 2 * kMaxThreads, "offer_entries keeps the sample in a list");

struct Lists {
  double d[kMaxEf];
  std::uint32_t id[kMaxEf];
  std::uint8_t flag[kMaxEf];
};

struct Shared {
  Lists list[2];  // current and next (the merge writes the other)
  double bd[kMaxThreads];
  std::uint32_t bid[kMaxThreads];
  double wd[kMaxThreads / 32];  // drop_hopeless: each warp's j-th least candidate
  std::uint32_t wid[kMaxThreads / 32];
  std::uint32_t hash[kHashSlots];
  int hash_count;
  int size;                         // list entries in use
  int cur;                          // which list is current
  int npick;                        // entries picked this step
  std::uint32_t pick[kMaxWidth];    // their ids
  std::uint32_t rows[kMaxThreads];  // the ids of the rows offered next (a follower's: those it stages)
  int batch;                        // new candidates in bd/bid
  int reset;                        // the hash is half full: clear it before the next batch
  int published;                    // a cluster's leader: rows in bid to score (see kSearchEnded)
  int job;                          // serve_kernel: the slot being searched (-1: stop)
  unsigned job_seq;                 // ... its request's sequence number
  int job_ef, job_k;                // ... its candidate list (-1: refused) and answers
  // The query follows (dim floats, dynamic shared memory).
};

// Where a search CTA keeps its query (query_in_shared): after Shared, in
// the dynamic shared memory.
__device__ __forceinline__ float* shared_query(Shared& sh) { return reinterpret_cast<float*>(&sh + 1); }

__device__ __forceinline__ bool less(double da, std::uint32_t ia, double db, std::uint32_t ib) {
  return score_less(da, ia, db, ib);
}

// A query's CTAs: one (the search alone), or a thread block cluster of
// `size` (4, 6 or 8; sm_90) whose leader (rank 0) runs the search and whose every CTA
// scores a share of each step's rows, staged in its own shared memory and
// summed by its own groups, the distances written into the leader's batch
// (distributed shared memory). A lone query's step is bound by its rows'
// trip into one SM; the cluster takes them into `size` SMs. The leader's
// list, hash and merges are the single CTA's, and each row's distance the
// same function of the same row: the same results, bit for bit.
struct Team {
  int rank = 0, size = 1;
};

__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
#else
  __trap();  // cluster kernels are launched on sm_90 and later only
#endif
}

__device__ __forceinline__ int cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return int(r);
#else
  return 0;
#endif
}

// The generic address of `p` (this CTA's shared memory) in CTA `rank` of the cluster.
template <typename T>
__device__ __forceinline__ T* in_rank(T* p, int rank) {
#if __CUDA_ARCH__ >= 900
  T* out;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
  return out;
#else
  __trap();
  return p;
#endif
}

__device__ __forceinline__ std::uint32_t hash_slot(std::uint32_t id) {
  return (id * 2654435761u) & (kHashSlots - 1);
}

// Inserts id; true when it was not there (the caller counts it in
// hash_count). Threads of the CTA may race.
__device__ bool hash_insert(Shared& sh, std::uint32_t id) {
  for (std::uint32_t h = hash_slot(id);; h = (h + 1) & (kHashSlots - 1)) {
    const std::uint32_t prev = atomicCAS(&sh.hash[h], kNoNode, id);
    if (prev == kNoNode) return true;
    if (prev == id) return false;
  }
}

// Clears the hash and puts the list's ids (distinct) back. Call with the CTA.
__device__ void hash_reset(Shared& sh) {
  for (int i = threadIdx.x; i < kHashSlots; i += blockDim.x) sh.hash[i] = kNoNode;
  __syncthreads();
  const Lists& l = sh.list[sh.cur];
  for (int i = threadIdx.x; i < sh.size; i += blockDim.x) hash_insert(sh, l.id[i]);
  if (threadIdx.x == 0) sh.hash_count = sh.size;
  __syncthreads();
}

// This thread's slot among the CTA's threads that take one (take), counted
// in *count by one shared atomic per warp; meaningless where !take. Call
// with whole warps.
__device__ __forceinline__ int warp_slot(bool take, int* count) {
  const unsigned takers = __ballot_sync(0xffffffffu, take);
  int base = 0;
  if ((threadIdx.x & 31) == 0 && takers) base = atomicAdd(count, __popc(takers));
  base = __shfl_sync(0xffffffffu, base, 0);
  return base + __popc(takers & ((1u << (threadIdx.x & 31)) - 1));
}

// One compare-exchange of a bitonic network over thread-held elements: the
// partner's (pd, pid) replaces (d, id) where it belongs at this thread's
// place (t, the element's index; k, the run length; j, the partner's distance).
__device__ __forceinline__ void bitonic_step(double& d, std::uint32_t& id, double pd, std::uint32_t pid,
                                             int t, int k, int j) {
  // The lower index of a pair keeps the lesser in an ascending run.
  const bool keep_less = ((t & j) == 0) == ((t & k) == 0);
  if (keep_less ? less(pd, pid, d, id) : less(d, id, pd, pid)) d = pd, id = pid;
}

// Sorts the warp's (d, id), one a lane, ascending by lane: lane t then
// holds the warp's t-th least (bitonic network by shuffles).
__device__ __forceinline__ void warp_sort(double& d, std::uint32_t& id) {
  const int t = threadIdx.x & 31;
  for (int k = 2; k <= 32; k <<= 1)
    for (int m = k >> 1; m > 0; m >>= 1)
      bitonic_step(d, id, __shfl_xor_sync(0xffffffffu, d, m), __shfl_xor_sync(0xffffffffu, id, m), t, k, m);
}

// Keeps, of the sh.batch candidates in bd/bid, those that can enter the
// list's ef best, compacted in any order. Call with the CTA. Two bounds:
// a full list's last entry (a candidate after it would be placed at ef or
// beyond), and while the list is not full, for a large batch (the entry
// sample, which a lone query's search sorted whole: 9 of its 67 us) one of
// its own: if each of c warps has j candidates at or below T and c j >= ef,
// nothing after T can enter. Each warp's j-th least, with j = ceil(ef /
// warps full of candidates), and T their greatest, keeps about a tenth of
// the entry sample where j is 1. Once the list is full, the batch's own
// bound is taken only in a team's CTAs (Spare) and only where the merge
// would otherwise sort what the list's bound keeps (more than a quarter of
// the CTA's threads' worth, see merge_batch): the first step after the
// entry sample, where the list is the sample's best and the width-8 step's
// ~230 fresh candidates keep ~192 by the list's bound, ~42 by the batch's
// (gknn_bench_graph_steps' simulation, 20,000 Fashion-MNIST rows, ef 16);
// at the later steps (~27, ~3, then 0 kept) a warp sort a step bought
// nothing.
template <bool Spare>
__device__ void drop_hopeless(Shared& sh, int ef) {
  const int nb = sh.batch;
  const Lists& in = sh.list[sh.cur];
  const bool full = sh.size >= ef;
  // Warps that hold a full 32 candidates: a 256-entry sample fills 8 of a
  // 512-thread CTA's 16, and j from all 16 left the bound unused at ef 16.
  const int warps = int(blockDim.x) / 32, filled = max(1, min(warps, nb / 32));
  const int j = (ef + filled - 1) / filled;
  const bool can_own = nb > kOwnBoundAbove && nb >= ef && j <= 32;  // the same in every thread
  if (nb == 0 || (!full && !can_own)) return;
  const int i = threadIdx.x, nt = int(blockDim.x);
  double d = __longlong_as_double(0x7ff8000000000000LL);  // NaN, kNoNode: after everything
  std::uint32_t id = kNoNode;
  if (i < nb) d = sh.bd[i], id = sh.bid[i];
  double td = __longlong_as_double(0x7ff8000000000000LL);
  std::uint32_t tid = kNoNode;
  if (full) td = in.d[sh.size - 1], tid = in.id[sh.size - 1];
  // Worth its warp sorts: no list bound yet, or the merge would sort what
  // the list's bound keeps (counted by one barrier, only where it might).
  bool own = can_own && !full;
  if (can_own && full && Spare && nb * kMinRankLanes > nt)
    own = __syncthreads_count(i < nb && !less(td, tid, d, id)) * kMinRankLanes > nt;
  if (own) {
    double wd = d;
    std::uint32_t wid = id;
    if (j == 1) {  // the warp's least, in every lane
      for (int m = 16; m > 0; m >>= 1) {
        const double pd = __shfl_xor_sync(0xffffffffu, wd, m);
        const std::uint32_t pid = __shfl_xor_sync(0xffffffffu, wid, m);
        if (less(pd, pid, wd, wid)) wd = pd, wid = pid;
      }
    } else {
      warp_sort(wd, wid);  // lane t: the warp's t-th least
    }
    const int lane = i & 31, w = i >> 5, covering = min(warps, (nb - j) / 32 + 1);
    // Where the covering warps' j least fit one warp, the bound is the ef-th
    // least of them (at least ef candidates are at or before it), far
    // tighter than the greatest j-th: a width-8 step's ~230 candidates
    // after the entry sample keep ~42 instead of ~125 at ef 16
    // (gknn_bench_graph_steps). They wait in the next list, unused until
    // the merge writes it. Only on a full list: the entry sample's merge
    // (~15-30 kept) was no faster for it, its drop 1.3 us slower; nor where
    // they are exactly ef (the ef-th is then the greatest j-th)
    // (graph-kernel-phases-H200-2026-11-29-*.log).
    const bool gather = Spare && full && covering * j <= 32 && covering * j > ef;  // the same in every thread
    Lists& spare = sh.list[sh.cur ^ 1];
    if (gather && w < covering && lane < j) spare.d[w * j + lane] = wd, spare.id[w * j + lane] = wid;
    if (!gather) {
      const double jd = __shfl_sync(0xffffffffu, wd, j - 1);
      const std::uint32_t jid = __shfl_sync(0xffffffffu, wid, j - 1);
      if (lane == 0) sh.wd[w] = jd, sh.wid[w] = jid;
    }
    __syncthreads();
    double md = -__longlong_as_double(0x7ff0000000000000LL);  // -inf: below every candidate
    std::uint32_t mid = 0;
    if (!gather) {
      // The greatest of the warps with j candidates (lanes below nb are
      // the batch's), lane w holding warp w's, by a warp's butterfly.
      if (lane < covering) md = sh.wd[lane], mid = sh.wid[lane];
      for (int m = 16; m > 0; m >>= 1) {
        const double pd = __shfl_xor_sync(0xffffffffu, md, m);
        const std::uint32_t pid = __shfl_xor_sync(0xffffffffu, mid, m);
        if (less(md, mid, pd, pid)) md = pd, mid = pid;
      }
    } else {  // every warp alike: no barrier
      double ud = __longlong_as_double(0x7ff8000000000000LL);
      std::uint32_t uid = kNoNode;
      if (lane < covering * j) ud = spare.d[lane], uid = spare.id[lane];
      warp_sort(ud, uid);
      md = __shfl_sync(0xffffffffu, ud, ef - 1);
      mid = __shfl_sync(0xffffffffu, uid, ef - 1);
    }
    if (covering * j >= ef && less(md, mid, td, tid)) td = md, tid = mid;
  }
  // At or before the bound (a list entry is never a candidate: distinct ids).
  const bool keep = i < nb && !less(td, tid, d, id);
  __syncthreads();  // everyone has read bd/bid, sh.batch and sh.wd
  if (threadIdx.x == 0) sh.batch = 0;
  __syncthreads();
  const int at = warp_slot(keep, &sh.batch);
  if (keep) {
    sh.bd[at] = d;
    sh.bid[at] = id;
  }
  __syncthreads();
}

// Sorts bd/bid[0..nb) by score_less, padded to a power of two n with
// entries that sort last (NaN, kNoNode: no node has that id). Call with the
// CTA (n <= blockDim.x). A bitonic network with thread t holding element t:
// partners less than a warp apart are exchanged by shuffles, farther ones
// through shared memory (bd/bid and the next list's arrays, unused until
// the merge places into them, by turns: one barrier a stage): 12 barriers
// for 512 elements instead of 45.
__device__ void sort_batch(Shared& sh, int nb) {
  int n = 1;
  while (n < nb) n <<= 1;
  const int t = threadIdx.x;
  double d = __longlong_as_double(0x7ff8000000000000LL);
  std::uint32_t id = kNoNode;
  if (t < nb) d = sh.bd[t], id = sh.bid[t];
  Lists& spare = sh.list[sh.cur ^ 1];
  static_assert(kMaxEf >= kMaxThreads, "sort_batch exchanges through the next list");
  int turn = 0;
  for (int k = 2; k <= n; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      double pd = d;
      std::uint32_t pid = id;
      if (j >= 32) {
        double* xd = turn ? spare.d : sh.bd;
        std::uint32_t* xid = turn ? spare.id : sh.bid;
        turn ^= 1;
        if (t < n) xd[t] = d, xid[t] = id;
        __syncthreads();
        if (t < n) pd = xd[t ^ j], pid = xid[t ^ j];
      } else {
        // Whole warps take part (t >= n too: their partners are >= n).
        pd = __shfl_xor_sync(0xffffffffu, d, j);
        pid = __shfl_xor_sync(0xffffffffu, id, j);
      }
      if (t < n) bitonic_step(d, id, pd, pid, t, k, j);
    }
  __syncthreads();  // every read of bd/bid is done
  if (t < n) sh.bd[t] = d, sh.bid[t] = id;
  __syncthreads();
}

// Lanes per element when `count` elements share `threads` threads: the
// largest power of two up to 32 (a group within a warp) that fits, and not
// above count rounded up to a power of two (a lane for each other element).
__device__ __forceinline__ int rank_lanes(int count, int threads) {
  int g = 32;
  while (g > 1 && (g * count > threads || g / 2 >= count)) g >>= 1;  // and no more than count needs
  return g;
}

// How many of the batch's nb candidates precede (d, id), counted by the g
// lanes of this thread's group (lane l takes candidates l, l + g, ...),
// summed across the group: every lane of the warp calls (with any (d, id)).
__device__ __forceinline__ int batch_rank(const Shared& sh, int nb, double d, std::uint32_t id, bool mine,
                                          int g) {
  int r = 0;
  if (mine)
    for (int j = int(threadIdx.x) % g; j < nb; j += g) r += less(sh.bd[j], sh.bid[j], d, id);
  for (int m = g >> 1; m > 0; m >>= 1) r += __shfl_xor_sync(0xffffffffu, r, m);
  return r;
}

// How many of (ds, ids)[0..size), sorted, precede (d, id): a binary search.
__device__ __forceinline__ int sorted_rank(const double* ds, const std::uint32_t* ids, int size, double d,
                                           std::uint32_t id) {
  int lo = 0, hi = size;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (less(ds[mid], ids[mid], d, id))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Merges the sh.batch candidates in bd/bid (unsorted, distinct, not in the
// list) into the current list, keeping the ef best. Call with the CTA.
// Candidates that cannot enter go first. Every element is placed by its
// rank: its index plus how many of the other side precede it. In a team's
// CTA (Spare, see search_kernel) with kMinRankLanes threads or more for
// each candidate, a group of lanes counts a candidate's rank among the
// others, and a list entry's among the candidates (a width-8 search's first
// step keeps ~117 after the drop, its second ~26: both were sorted, ranked
// one thread a candidate above 32; gknn_bench_graph_steps); elsewhere one
// thread counts for each up to kSortAbove. A larger rest is sorted first,
// so that binary searches find the ranks.
template <bool Spare>
__device__ void merge_batch(Shared& sh, int ef) {
  drop_hopeless<Spare>(sh, ef);
  const int nb = sh.batch;
  const int size = sh.size;
  const Lists& in = sh.list[sh.cur];
  Lists& out = sh.list[sh.cur ^ 1];
  const int nt = int(blockDim.x);
  const bool sorted = Spare ? nb * kMinRankLanes > nt : nb > kSortAbove;
  if (sorted) {
    sort_batch(sh, nb);
    for (int i = threadIdx.x; i < nb; i += nt) {
      const int at = i + sorted_rank(in.d, in.id, size, sh.bd[i], sh.bid[i]);
      if (at < ef) out.d[at] = sh.bd[i], out.id[at] = sh.bid[i], out.flag[at] = 0;
    }
  } else if (nb > 0) {
    const int g = Spare ? rank_lanes(nb, nt) : 1, c = int(threadIdx.x) / g;
    const bool mine = c < nb;
    const double d = mine ? sh.bd[c] : 0.0;
    const std::uint32_t id = mine ? sh.bid[c] : kNoNode;
    const int r = batch_rank(sh, nb, d, id, mine, g);
    if (mine && int(threadIdx.x) % g == 0) {
      const int at = r + sorted_rank(in.d, in.id, size, d, id);
      if (at < ef) out.d[at] = d, out.id[at] = id, out.flag[at] = 0;
    }
  }
  // List entries: index + new candidates before them.
  if (sorted || nb == 0 || size > nt) {
    for (int i = threadIdx.x; i < size; i += nt) {
      const double d = in.d[i];
      const std::uint32_t id = in.id[i];
      int before = 0;  // sorted: a binary search; else (nb == 0 or size > nt) a count
      if (sorted)
        before = sorted_rank(sh.bd, sh.bid, nb, d, id);
      else
        for (int j = 0; j < nb; ++j) before += less(sh.bd[j], sh.bid[j], d, id);
      const int at = i + before;
      if (at < ef) out.d[at] = d, out.id[at] = id, out.flag[at] = in.flag[i];
    }
  } else {
    const int g = Spare ? rank_lanes(size, nt) : 1, e = int(threadIdx.x) / g;
    const bool mine = e < size;
    const double d = mine ? in.d[e] : 0.0;
    const std::uint32_t id = mine ? in.id[e] : kNoNode;
    const int before = batch_rank(sh, nb, d, id, mine, g);
    if (mine && int(threadIdx.x) % g == 0 && e + before < ef) {
      out.d[e + before] = d;
      out.id[e + before] = id;
      out.flag[e + before] = in.flag[e];
    }
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

// The group's lanes combined in distance.h's tree: acc, and aa into *self
// when self is given.
__device__ __forceinline__ float combine_lanes(float acc, float aa, float* self) {
  const unsigned mask = group_mask();
  acc += __shfl_xor_sync(mask, acc, 4, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 1, kGroupLanes);
  acc += __shfl_xor_sync(mask, acc, 2, kGroupLanes);
  if (self) {
    aa += __shfl_xor_sync(mask, aa, 4, kGroupLanes);
    aa += __shfl_xor_sync(mask, aa, 1, kGroupLanes);
    aa += __shfl_xor_sync(mask, aa, 2, kGroupLanes);
    *self = aa;
  }
  return acc;
}

// The lane sums below are group_lane_sum's (distance/group_distance.cuh):
// lane l sums op(a[i], q[i]) for i = l, l + 8, ... in order (and a[i] a[i]
// into *self when given, the cosine's norm); they differ in where a row's
// elements come from. Same operations in the same order: same bits.

// A row of at most 8 kPrefetch elements, the lane's loaded before any
// arithmetic: one round trip to memory.
template <typename Op>
__device__ __forceinline__ float prefetched_lane_sum(const float* a, const float* q, int n, Op op, int lane,
                                                     float* self) {
  float x[kPrefetch];
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int i = lane + j * kGroupLanes;
    x[j] = i < n ? __ldg(a + i) : 0.0f;
  }
  float acc = 0.0f, aa = 0.0f;
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int i = lane + j * kGroupLanes;
    if (i < n) {
      acc += op(x[j], q[i]);
      if (self) aa += detail::Product{}(x[j], x[j]);
    }
  }
  return combine_lanes(acc, aa, self);
}

// One 4-byte asynchronous copy, global to shared (sm_80+): no register
// holds it, so a whole round is in flight at once (plain loads are
// scheduled by ptxas a few at a time: most of a step's time on H200 was
// FADDs waiting on one load after another, ncu).
__device__ __forceinline__ void copy_async(float* to, const float* from) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(at), "l"(from) : "memory");
}
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Through the lane's own staging area (per_round floats): a round copies
// the lane's next elements there, then sums them. Each lane reads only what
// it copied: no barrier.
template <typename Op>
__device__ __forceinline__ float staged_lane_sum(const float* a, const float* q, int n, Op op, int lane,
                                                 float* stage, int per_round, float* self) {
  float acc = 0.0f, aa = 0.0f;
  for (int base = lane; base < n; base += per_round * kGroupLanes) {
    const int m = min(per_round, (n - base + kGroupLanes - 1) / kGroupLanes);
    for (int j = 0; j < m; ++j) copy_async(stage + j, a + base + j * kGroupLanes);
    wait_copies();
    for (int j = 0; j < m; ++j) {
      const float x = stage[j];
      acc += op(x, q[base + j * kGroupLanes]);
      if (self) aa += detail::Product{}(x, x);
    }
  }
  return combine_lanes(acc, aa, self);
}

// Of a row already in shared memory (stage_rows).
template <typename Op>
__device__ __forceinline__ float shared_lane_sum(const float* row, const float* q, int n, Op op, int lane,
                                                 float* self) {
  float acc = 0.0f, aa = 0.0f;
#pragma unroll 7
  for (int i = lane; i < n; i += kGroupLanes) {
    const float x = row[i];
    acc += op(x, q[i]);
    if (self) aa += detail::Product{}(x, x);
  }
  return combine_lanes(acc, aa, self);
}

// group_distance(metric, a, q, n, lane), term for term, from lane sums:
// sum(op, self) is one of the lane sums above over row a. Metrics other
// than DeviceGraph's three (its constructor refuses them) go to
// group_distance itself.
template <typename Sum>
__device__ __forceinline__ double distance_from_sums(Metric metric, const float* a, const float* q, int n,
                                                     int lane, Sum sum) {
  switch (metric) {
    case Metric::L2:
      return sqrt(static_cast<double>(sum(detail::SquaredDiff{}, nullptr)));
    case Metric::InnerProduct:
      return -static_cast<double>(sum(detail::Product{}, nullptr));
    case Metric::Cosine: {
      float na = 0.0f;
      const float dot = sum(detail::Product{}, &na);
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

// A row of the vectors against the query: through the lane's staging area
// when it has one, else by registers (rows of up to 8 kPrefetch elements)
// or group_distance's chunks.
__device__ __forceinline__ double row_distance(Metric metric, const float* a, const float* q, int n, int lane,
                                               float* stage, int per_round) {
  if (!stage && n > kPrefetch * kGroupLanes) return group_distance(metric, a, q, n, lane);
  return distance_from_sums(metric, a, q, n, lane, [&](auto op, float* self) {
    return stage ? staged_lane_sum(a, q, n, op, lane, stage, per_round, self)
                 : prefetched_lane_sum(a, q, n, op, lane, self);
  });
}

__device__ __forceinline__ void copy16_async(float* to, const float* from) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(from) : "memory");
}

// Copies the rows of ids[0..nr) into `stage` (`stride` floats apart), every
// thread of the CTA taking a share of the copies (16 bytes each when rows
// are 16-byte aligned), then waits for them. Call with the CTA. Given
// `local` (this CTA's shared memory, nr <= blockDim.x), the ids are copied
// there first: a cluster follower's are in its leader's, and a thread's
// copies would each wait on a remote load of their row's id (asm volatile
// keeps them in order; the entry sample's 62 rows a CTA took 11.5 us).
__device__ void stage_rows(float* stage, int stride, const float* vectors, int dim, const std::uint32_t* ids,
                           std::uint32_t* local, int nr) {
  if (local) {
    if (int(threadIdx.x) < nr) local[threadIdx.x] = ids[threadIdx.x];
    __syncthreads();
    ids = local;
  }
  const bool wide = (dim & 3) == 0;
  const int per_row = wide ? dim >> 2 : dim;
  const int total = nr * per_row;
  for (int t = threadIdx.x; t < total; t += blockDim.x) {
    const int r = t / per_row, c = t - r * per_row;
    const float* from = vectors + std::int64_t(ids[r]) * dim;
    float* to = stage + std::size_t(r) * stride;
    if (wide)
      copy16_async(to + 4 * c, from + 4 * c);
    else
      copy_async(to + c, from + c);
  }
  wait_copies();
  __syncthreads();
}

// row_distance of a staged row.
__device__ __forceinline__ double shared_row_distance(Metric metric, const float* row, const float* q, int n,
                                                      int lane) {
  return distance_from_sums(metric, row, q, n, lane,
                            [&](auto op, float* self) { return shared_lane_sum(row, q, n, op, lane, self); });
}

// Where a search CTA's rows go before they are summed: `rows` of `stride`
// floats for the CTA together (stage_rows), else each thread's per_round
// floats (staged_lane_sum), else registers.
struct Staging {
  float* rows;
  int stride;
  int nrows;
  std::uint32_t* ids;  // room for a follower's copy of its rows' ids (stage_rows)
  float* lane;
  int per_round;
};

// Scores rows bid[first, end) into bd (generic pointers: the leader's
// shared memory, this CTA's or, when `remote`, another's of the cluster).
// Call with the CTA.
__device__ void score_rows(const float* q, const Staging& st, const float* vectors, int dim, Metric metric,
                           const std::uint32_t* bid, double* bd, int first, int end, bool remote) {
  const int lane = threadIdx.x % kGroupLanes;
  if (st.rows) {
    // A chunk of rows at a time: copied by the CTA (one round trip), then
    // a group sums each.
    for (int c0 = first; c0 < end; c0 += st.nrows) {
      const int nr = min(st.nrows, end - c0);
      stage_rows(st.rows, st.stride, vectors, dim, bid + c0, remote ? st.ids : nullptr, nr);
      for (int i = threadIdx.x / kGroupLanes; i < nr; i += blockDim.x / kGroupLanes) {
        const double d =
            canonical_score(shared_row_distance(metric, st.rows + std::size_t(i) * st.stride, q, dim, lane));
        if (lane == 0) bd[c0 + i] = d;
      }
      __syncthreads();  // the chunk's rows are read before the next one's copies
    }
  } else {
    for (int i = first + int(threadIdx.x) / kGroupLanes; i < end; i += blockDim.x / kGroupLanes) {
      const std::uint32_t id = bid[i];
      const double d = canonical_score(
          row_distance(metric, vectors + std::int64_t(id) * dim, q, dim, lane, st.lane, st.per_round));
      if (lane == 0) bd[i] = d;
    }
    __syncthreads();
  }
}

// A team member's share of `batch` rows: [first, end).
__device__ __forceinline__ void share_of(const Team& t, int batch, int* first, int* end) {
  const int per = (batch + t.size - 1) / t.size;
  *first = min(batch, t.rank * per);
  *end = min(batch, *first + per);
}

// Scores rows ids[0..n) into ds: the CTA alone, or a team whose leader
// publishes `published` (what follow() reads: a batch's size, or the entry
// sample's code) and scores its share beside the followers. Call with the
// CTA (the leader's, in a team).
__device__ __forceinline__ void score_by_team(Shared& sh, const Team& team, const float* q, const Staging& st,
                                              const float* vectors, int dim, Metric metric,
                                              const std::uint32_t* ids, double* ds, int n, int published) {
  int first = 0, end = n;
  if (team.size > 1) {
    if (threadIdx.x == 0) sh.published = published;
    cluster_sync();  // the followers read what is published
    share_of(team, n, &first, &end);
  }
  score_rows(q, st, vectors, dim, metric, ids, ds, first, end, false);
  if (team.size > 1) cluster_sync();  // every share's distances are in
}

// No node, or a deleted one (skipped, its row emptied): it takes no place
// in the list (see search_cpu).
__device__ __forceinline__ bool takes_no_place(std::uint32_t id, const std::uint8_t* skip,
                                               const std::uint32_t* edges, int degree) {
  return id == kNoNode || (skip && skip[id] && edges[std::int64_t(id) * degree] == kNoNode);
}

// Offers nodes ids[0..count) (count <= blockDim.x; kNoNode entries ignored):
// the new ones (not visited, not deleted) are scored (by the team: the
// leader publishes them, every CTA scores its share) into the batch bd/bid,
// then merged into the list. Call with the CTA (the leader's, in a team).
template <bool Spare>
__device__ void offer_batch(Shared& sh, const Team& team, const float* q, const Staging& st,
                            const float* vectors, int dim, Metric metric, const std::uint32_t* edges,
                            int degree, const std::uint8_t* skip, const std::uint32_t* ids,
                            const double* given, int count, int ef) {
  std::uint32_t id = kNoNode;
  bool fresh = false;
  if (int(threadIdx.x) < count) {
    id = ids[threadIdx.x];
    fresh = !takes_no_place(id, skip, edges, degree) && hash_insert(sh, id);
  }
  // Slots in the batch a warp at a time (a thread each, 2,000 entries took
  // 6 us of a lone query on 1M x 128); the batch starts empty, so its size
  // is also what the visited set gained.
  const int at = warp_slot(fresh, &sh.batch);
  if (fresh) {
    sh.bid[at] = id;
    if (given) sh.bd[at] = given[threadIdx.x];
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.hash_count += sh.batch;
  if (!given) score_by_team(sh, team, q, st, vectors, dim, metric, sh.bid, sh.bd, sh.batch, sh.batch);
  merge_batch<Spare>(sh, ef);
}

// An entry sample of two batches (blockDim.x < n <= 2 x blockDim.x nodes:
// 1M x 128's 1,000 parts) before the list exists, with ef <= blockDim.x:
// the live entries compacted into the next list and scored there at once
// (a team's CTAs a share each: one publish instead of two), merged into the
// list a half at a time (the second half waits beyond where the first's
// merge writes), and only the list's nodes entered into the visited set.
// An entry left out may be offered again by an edge and scored again; the
// list only gets better, so it is dropped again (as after a hash reset):
// the same list and results as offering the sample in batches, with a
// visited set a thousand nodes emptier (fewer resets: 20 % fewer nodes
// offered on 1M x 128; graph-entry-once-H200-2026-11-30.md). Call with
// the CTA (the leader's, in a team).
template <bool Spare>
__device__ void offer_entries(Shared& sh, const Team& team, const float* q, const Staging& st,
                              const float* vectors, int dim, Metric metric, const std::uint32_t* edges,
                              int degree, const std::uint8_t* skip, const std::uint32_t* entries,
                              const double* given, int n, int ef) {
  const int nt = int(blockDim.x);
  Lists& sample = sh.list[sh.cur ^ 1];
  for (int base = 0; base < n; base += nt) {
    const int i = base + int(threadIdx.x);
    std::uint32_t id = kNoNode;
    bool live = false;
    if (i < n) {
      id = entries[i];
      live = !takes_no_place(id, skip, edges, degree);
    }
    const int at = warp_slot(live, &sh.batch);
    if (live) {
      sample.id[at] = id;
      if (given) sample.d[at] = given[i];
    }
  }
  __syncthreads();
  const int live = sh.batch;
  if (!given)
    score_by_team(sh, team, q, st, vectors, dim, metric, sample.id, sample.d, live, kEntriesPublished - live);
  // The first half's merge writes the next list below ef <= nt, and its
  // sort exchanges there below nt: the second half, at nt and beyond, waits.
  for (int base = 0; base < live; base += nt) {
    const int count = min(nt, live - base);
    if (int(threadIdx.x) < count)
      sh.bd[threadIdx.x] = sample.d[base + threadIdx.x], sh.bid[threadIdx.x] = sample.id[base + threadIdx.x];
    __syncthreads();  // and every thread has read `live`
    if (threadIdx.x == 0) sh.batch = count;
    __syncthreads();
    merge_batch<Spare>(sh, ef);
  }
  const Lists& list = sh.list[sh.cur];
  for (int i = threadIdx.x; i < sh.size; i += nt) hash_insert(sh, list.id[i]);
  if (threadIdx.x == 0) sh.hash_count = sh.size, sh.batch = 0, sh.reset = 0;
  __syncthreads();
}

// A follower of a team: scores its share of each batch its leader
// publishes, until the leader says the search ended. Call with the CTA.
__device__ void follow(Shared& sh, const Team& team, const float* q, const Staging& st, const float* vectors,
                       int dim, Metric metric) {
  Shared* lead = in_rank(&sh, 0);
  for (;;) {
    cluster_sync();
    const int batch = lead->published;
    if (batch == kSearchEnded) break;
    // The entry sample is in the leader's next list (offer_entries).
    const bool sample = batch <= kEntriesPublished;
    Lists* sampled = sample ? &lead->list[lead->cur ^ 1] : nullptr;
    int first, end;
    share_of(team, sample ? kEntriesPublished - batch : batch, &first, &end);
    score_rows(q, st, vectors, dim, metric, sample ? sampled->id : lead->bid, sample ? sampled->d : lead->bd,
               first, end, true);
    cluster_sync();
  }
}

// The entry sample's scores for every query of a call (the same sample for
// all: it depends on the seed alone), scores[q * n_entries + e]: a group per
// entry, many CTAs per query, so that a batch's sample (~sqrt(n) rows, 0.8
// MB at 60,000 x 784) is read by many SMs instead of each search CTA's one
// (calls of up to kWideUpTo queries without clusters). Through staging areas (per_round floats per thread)
// when given.
__global__ void __launch_bounds__(kEntryThreads)
    entry_scores_kernel(const float* __restrict__ vectors, int dim, Metric metric,
                        const float* __restrict__ queries, const std::uint32_t* __restrict__ entries,
                        int n_entries, int per_round, double* __restrict__ scores) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int e = blockIdx.x * (kEntryThreads / kGroupLanes) + threadIdx.x / kGroupLanes;
  if (e >= n_entries) return;  // a whole group (shuffles stay within it)
  float* stage = per_round ? reinterpret_cast<float*>(smem) + std::size_t(threadIdx.x) * per_round : nullptr;
  const float* q = queries + std::int64_t(blockIdx.y) * dim;
  const int lane = threadIdx.x % kGroupLanes;
  const double d = canonical_score(
      row_distance(metric, vectors + std::int64_t(entries[e]) * dim, q, dim, lane, stage, per_round));
  if (lane == 0) scores[std::int64_t(blockIdx.y) * n_entries + e] = d;
}

// Copies n floats from `from` (device, mapped host or another CTA's shared
// memory) to `to`, the CTA's threads loading up to 4 each before storing
// any: every load in flight at once, one round trip for a query of up to
// 4 x blockDim.x elements (a mapped query is a trip over the bus).
__device__ __forceinline__ void copy_in_flight(float* to, const float* from, int n) {
  constexpr int kPer = 4;
  for (int base = 0; base < n; base += kPer * int(blockDim.x)) {
    float v[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = base + u * int(blockDim.x) + int(threadIdx.x);
      if (i < n) v[u] = from[i];
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = base + u * int(blockDim.x) + int(threadIdx.x);
      if (i < n) to[i] = v[u];
    }
  }
}

// One query's search by its CTA (CL = 1) or its cluster of CL CTAs (see
// Team): q its query (global or mapped memory), entry_scores its entry
// sample's scores or null, oid/od its k answers. The body of search_kernel
// and of serve_kernel.
template <int CL>
__device__ __forceinline__ void search_one(
    const float* __restrict__ vectors, const std::uint32_t* __restrict__ edges, int degree, int dim,
    Metric metric, const float* q, const std::uint32_t* __restrict__ entries, const double* entry_scores,
    int n_entries, const std::uint8_t* __restrict__ skip, int ef, int k, int width, bool query_in_shared,
    int per_round, int row_stride, int stage_rows, std::int64_t* oid, double* od,
    const std::int64_t* __restrict__ row_ids = nullptr) {
  // Teams (clusters) serve calls of at most kWidestUpTo queries, in CTAs
  // of kMaxThreads: there a lone query's time is its chain of steps and
  // idle lanes cost nothing, so the merge ranks by groups of lanes and a
  // full list may take the batch's own bound (batches of 1 and 8 ~5 %
  // faster on the H200). Larger calls' CTAs share SMs, where that extra
  // work cost throughput (batches of 1,000 4-8 % slower): they keep one
  // thread a candidate and sort above kSortAbove.
  constexpr bool kSpare = CL > 1;
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  Team team;
  if (CL > 1) team = Team{cluster_rank(), CL};
  if (query_in_shared) {  // after Shared, when the device's shared memory holds it
    float* qs = shared_query(sh);
    if (q != qs) copy_in_flight(qs, q, dim);  // serve_kernel's leader has it there already
    q = qs;
  }
  // The staging area, after the query (16-byte aligned): the CTA's rows
  // (stage_rows > 0), else each thread's per_round floats, else none.
  float* const area = reinterpret_cast<float*>(
      (reinterpret_cast<std::uintptr_t>(shared_query(sh) + (query_in_shared ? dim : 0)) + 15) &
      ~std::uintptr_t(15));
  Staging st{stage_rows ? area : nullptr,
             row_stride,
             stage_rows,
             sh.rows,
             !stage_rows && per_round ? area + std::size_t(threadIdx.x) * per_round : nullptr,
             per_round};
  for (int i = threadIdx.x; i < kHashSlots; i += blockDim.x) sh.hash[i] = kNoNode;
  if (threadIdx.x == 0) sh.hash_count = 0, sh.size = 0, sh.cur = 0, sh.batch = 0, sh.reset = 0;
  __syncthreads();
  if (team.rank > 0) {
    follow(sh, team, q, st, vectors, dim, metric);
    cluster_sync();  // the leader's shared memory is no longer read
    return;
  }
  // The entry sample: a batch of blockDim.x at a time, but scored at once
  // where it takes two batches, two a thread hold it and the list fits a
  // batch (offer_entries: 1M x 128's 1,000, a lone query 0.080 -> 0.077 ms;
  // where one batch takes it, the batch was faster: Fashion-MNIST's 256,
  // 0.059 against 0.061; graph-entry-once-H200-2026-11-30.md).
  const int nt = blockDim.x;
  if (nt < n_entries && n_entries <= 2 * nt && ef <= nt)
    offer_entries<kSpare>(sh, team, q, st, vectors, dim, metric, edges, degree, skip, entries, entry_scores,
                          n_entries, ef);
  else
    for (int b = 0; b < n_entries; b += nt) {
      if (sh.reset) hash_reset(sh);
      offer_batch<kSpare>(sh, team, q, st, vectors, dim, metric, edges, degree, skip, entries + b,
                          entry_scores ? entry_scores + b : nullptr, min(nt, n_entries - b), ef);
    }
  // Rows offered per batch: as many whole rows as the CTA has threads.
  const int rows_per_batch = nt / degree;
  for (;;) {
    if (sh.reset) hash_reset(sh);
    if (threadIdx.x < 32) {  // the first `width` unexpanded entries: one warp, 32 flags a ballot
      Lists& l = sh.list[sh.cur];
      const int lane = int(threadIdx.x), size = sh.size;
      int found = 0;  // the same in every lane (ballots)
      for (int base = 0; base < size && found < width; base += 32) {
        const int i = base + lane;
        const bool open = i < size && !(l.flag[i] & kExpanded);
        const unsigned ballot = __ballot_sync(0xffffffffu, open);
        // Each open entry's place among the picks is the open ones before it:
        // the lanes pick at once, not thread 0 one after another
        // (bench/results/graph-ring-read-H200-2026-11-30.md, with the ring's read).
        const int at = found + __popc(ballot & ((1u << lane) - 1u));
        if (open && at < width) {
          sh.pick[at] = l.id[i];
          l.flag[i] |= kExpanded;
        }
        found = min(width, found + __popc(ballot));
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
      offer_batch<kSpare>(sh, team, q, st, vectors, dim, metric, edges, degree, skip, sh.rows, nullptr,
                          nrows * degree, ef);
    }
  }
  if (team.size > 1) {
    if (threadIdx.x == 0) sh.published = kSearchEnded;
    cluster_sync();  // the followers read the end
    cluster_sync();  // ... and are done with this CTA's shared memory
  }
  // The k best live entries in list order, by the first warp: 32 entries
  // a ballot, so that their row id loads (row_ids, device memory) and the
  // answers' writes (mapped host memory in the ring) are in flight together
  // instead of one after another from one thread.
  if (threadIdx.x < 32) {
    const Lists& l = sh.list[sh.cur];
    const int lane = int(threadIdx.x), size = sh.size;
    int out = 0;  // the same in every lane (ballots)
    for (int base = 0; base < size && out < k; base += 32) {
      const int i = base + lane;
      const bool live = i < size && !(skip && skip[l.id[i]]);
      const unsigned ballot = __ballot_sync(0xffffffffu, live);
      const int at = out + __popc(ballot & ((1u << lane) - 1u));
      if (live && at < k) {
        oid[at] = row_ids ? row_ids[l.id[i]] : std::int64_t(l.id[i]);
        od[at] = l.d[i];
      }
      out += __popc(ballot);
    }
    for (int at = min(out, k) + lane; at < k; at += 32) oid[at] = -1, od[at] = canonical_score(NAN);
  }
}

// One query per CTA (CL = 1) or per cluster of CL CTAs (see Team).
template <int CL>
__global__ void __launch_bounds__(kMaxThreads, 1)
    search_kernel(const float* __restrict__ vectors, const std::uint32_t* __restrict__ edges, std::int64_t n,
                  int degree, int dim, Metric metric, const float* __restrict__ queries,
                  const std::uint32_t* __restrict__ entries, const double* __restrict__ entry_scores,
                  int n_entries, const std::uint8_t* __restrict__ skip, int ef, int k, int width,
                  bool query_in_shared, int per_round, int row_stride, int stage_rows,
                  std::int64_t* __restrict__ ids, double* __restrict__ distances) {
  const std::int64_t query = blockIdx.x / CL;
  search_one<CL>(vectors, edges, degree, dim, metric, queries + query * dim, entries,
                 entry_scores ? entry_scores + query * n_entries : nullptr, n_entries, skip, ef, k, width,
                 query_in_shared, per_round, row_stride, stage_rows, ids + query * k, distances + query * k);
}

// GraphServer's ring of request slots in mapped host memory. Slot s at base + s * slot_bytes: its
// slots laid out as RingLayout (graph.h) says.
constexpr int kDoneAt = int(RingLayout::kAnsweredAt);
constexpr unsigned long long kServeLifeNs = 4000000;  // 4 ms: a launch (~10 us) per 4 ms under load
struct ServeRing {
  unsigned char* base;
  int slot_bytes, nslots, q_at, ids_at, d_at;
  int max_k;  // the answers' room a slot: a request of more is refused
  const int* stop;
  unsigned long long life_ns;   // a cluster takes no request after this long
  unsigned epoch;               // requests of another are refused
  const std::int64_t* row_ids;  // device, one a row (null: answers are rows)
  const unsigned* doorbell;     // mapped host: each slot's request number, one line
  unsigned* mailbox;            // device: each slot's request number as forwarded, then quit
};

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned load_acquire_sys(const void* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release_sys(void* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned load_acquire_gpu(const void* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release_gpu(void* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The ring's one reader of the bus (the last cluster's first warp): the
// doorbell line read by its lanes at once, each new request number
// forwarded to the slot's mailbox in device memory, which the idle
// clusters poll instead of host memory (their polling over the bus slowed a
// searching cluster 2-5x: bench/results/graph-ring-idle-pollers-*). It
// sets the quit word (mailbox[nslots]) once the host's stop flag is set.
__device__ void dispatch_ring(const ServeRing& ring, unsigned long long born) {
  constexpr int kPerLane = RingLayout::kMaxRingSlots / 32;
  const int lane = int(threadIdx.x);
  unsigned fwd[kPerLane] = {};
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < ring.nslots) fwd[i] = load_acquire_gpu(ring.mailbox + lane + 32 * i);
  for (unsigned pass = 0; global_ns() - born < ring.life_ns; ++pass) {
    bool stop = false;
    if ((pass & 63) == 0 && lane == 0) stop = load_acquire_sys(ring.stop) != 0;
    if (__shfl_sync(0xffffffffu, stop ? 1 : 0, 0)) {
      if (lane == 0) store_release_gpu(ring.mailbox + ring.nslots, 1u);
      return;
    }
    for (int i = 0; i < kPerLane; ++i) {
      const int at = lane + 32 * i;
      if (at >= ring.nslots) break;
      const unsigned r = *reinterpret_cast<const volatile unsigned*>(ring.doorbell + at);
      if (r != fwd[i]) {
        fwd[i] = r;
        __threadfence_system();  // the request's slot as written before its number
        store_release_gpu(ring.mailbox + at, r);
      }
    }
  }
}

// A resident search: each cluster (CTA, CL = 1) but the last serves the
// slots cluster, cluster + clusters, ... (at most kMaxSlotsPerCluster), its
// leader's thread 0 polling their mailboxes (the last cluster's dispatcher
// fills them from the doorbell), until the dispatcher passes on the host's
// stop or ring.life_ns have passed (the host keeps the next launch queued:
// a synchronizing CUDA call elsewhere waits for two lifetimes at most, never
// forever). A slot whose request number differs
// from its answered one waits, also across launches. Every query is
// search_one's, so its answers are a call's.
template <int CL>
__global__ void __launch_bounds__(kMaxThreads, 1)
    serve_kernel(const float* __restrict__ vectors, const std::uint32_t* __restrict__ edges, int degree,
                 int dim, Metric metric, const std::uint32_t* __restrict__ entries, int n_entries, int width,
                 int per_round, int row_stride, int stage_rows, ServeRing ring) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  const int rank = CL > 1 ? cluster_rank() : 0;
  // The last cluster dispatches (its first CTA's first warp); the others serve.
  const int cluster = int(blockIdx.x) / CL, clusters = int(gridDim.x) / CL - 1;
  const unsigned long long born = global_ns();
  if (cluster == clusters) {
    if (rank == 0 && threadIdx.x < 32) dispatch_ring(ring, born);
    return;  // it takes no part in any cluster barrier
  }
  unsigned seen[kMaxSlotsPerCluster] = {};  // the leader's thread 0: the last sequence served per slot
  if (rank == 0 && threadIdx.x == 0)
    for (int i = 0; i < kMaxSlotsPerCluster && cluster + i * clusters < ring.nslots; ++i)
      seen[i] = load_acquire_sys(ring.base + std::size_t(cluster + i * clusters) * ring.slot_bytes + kDoneAt);
  int next = 0;  // the leader's thread 0: the slot it looks at first (round robin: none starves)
  float* const qs = shared_query(sh);
  for (;;) {
    if (rank == 0) {
      // Until a request to search (sh.job) or the end (-1); refused ones
      // are answered here and the polling goes on.
      for (;;) {
        if (threadIdx.x == 0) {
          int cand = -1;
          while (cand < 0 && !load_acquire_gpu(ring.mailbox + ring.nslots) &&
                 global_ns() - born < ring.life_ns) {
            for (int j = 0; j < kMaxSlotsPerCluster; ++j) {
              const int i = (next + j) % kMaxSlotsPerCluster;
              const int s = cluster + i * clusters;
              if (s >= ring.nslots) continue;
              const unsigned r = load_acquire_gpu(ring.mailbox + s);
              if (r == seen[i]) continue;
              asm volatile("fence.acq_rel.sys;" ::: "memory");  // the slot as its writer left it
              seen[i] = r;
              next = i + 1;
              cand = s;
              sh.job_seq = r;
              break;
            }
          }
          sh.job = cand;
        }
        __syncthreads();
        const int cand = sh.job;
        if (cand < 0) break;
        // The query read by the leader's threads at once, its numbers by
        // thread 0 whose loads are issued before its share of the query (one
        // trip over the bus for every thread), instead of the numbers, a
        // cluster barrier, then every CTA's copy (the followers copy it from
        // here).
        unsigned char* at = ring.base + std::size_t(cand) * ring.slot_bytes;
        int ef = 0, k = 0;
        unsigned epoch = 0;
        if (threadIdx.x == 0) {
          ef = *reinterpret_cast<const volatile int*>(at + RingLayout::kEfAt);
          k = *reinterpret_cast<const volatile int*>(at + RingLayout::kKAt);
          epoch = *reinterpret_cast<const volatile unsigned*>(at + RingLayout::kEpochAt);
        }
        copy_in_flight(qs, reinterpret_cast<const float*>(at + ring.q_at), dim);
        if (threadIdx.x == 0) {
          // Refused unsearched: another epoch's request, or a list or an
          // answer the kernel has no room for (whatever a writer left in
          // the slot, the kernel never reads or writes past its buffers).
          if (epoch != ring.epoch || !ring_request_fits(ef, k, ring.max_k)) {
            *reinterpret_cast<volatile unsigned*>(at + RingLayout::kStatusAt) = 1u;  // refused
            __threadfence_system();
            store_release_sys(at + kDoneAt, sh.job_seq);
            sh.job_ef = -1;
          } else {
            sh.job_ef = ef;
            sh.job_k = k;
          }
        }
        __syncthreads();
        if (sh.job_ef >= 0) break;
        __syncthreads();  // every thread has read the verdict before thread 0 polls again
      }
    }
    if (CL > 1) cluster_sync();  // the followers read the leader's job
    const int job = CL > 1 ? in_rank(&sh, 0)->job : sh.job;
    if (job < 0) break;
    unsigned char* slot = ring.base + std::size_t(job) * ring.slot_bytes;
    // The leader's query is in place (search_one finds it there and copies
    // nothing); a follower's comes from the leader's shared memory.
    const float* q = rank == 0 ? qs : in_rank(qs, 0);
    search_one<CL>(vectors, edges, degree, dim, metric, q, entries, nullptr, n_entries, nullptr, sh.job_ef,
                   sh.job_k, width, true, per_round, row_stride, stage_rows,
                   reinterpret_cast<std::int64_t*>(slot + ring.ids_at),
                   reinterpret_cast<double*>(slot + ring.d_at), ring.row_ids);
    if (rank == 0 && threadIdx.x < 32) {  // search_one's first warp wrote the answers
      if (threadIdx.x == 0) *reinterpret_cast<volatile unsigned*>(slot + RingLayout::kStatusAt) = 0u;
      __threadfence_system();  // each lane's answers (and the status) before the number
      __syncwarp();
      if (threadIdx.x == 0) store_release_sys(slot + kDoneAt, sh.job_seq);
    }
  }
  if (CL > 1) cluster_sync();  // the followers have read the leader's last job
}

// A launch of `grid` CTAs of `threads` in clusters of cl (attr: its storage).
cudaLaunchConfig_t cluster_config(unsigned grid, int threads, std::size_t smem, cudaStream_t s, int cl,
                                  cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = smem;
  config.stream = s;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(cl);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return config;
}

// Tests' override of the team size (0: the device's choice).
std::atomic<int> forced_team{0};

// CTAs of cluster calls running now, per device (any graph, any thread): a
// call takes clusters of 8 only where its CTAs fit beside them (team_size).
// Devices past the array share slots: a count for a choice of speed only.
constexpr int kCountedDevices = 64;
std::atomic<int> ctas_in_flight_by_device[kCountedDevices];

std::atomic<int>& ctas_in_flight(int device) { return ctas_in_flight_by_device[device % kCountedDevices]; }

// Counts a call's CTAs in ctas_in_flight while it lives. choose(busy) gives
// the call's team size beside `busy` CTAs counted now; the count takes the
// call's CTAs only if it is still `busy` (else choose again with the new
// count), so that two calls choosing at once cannot both take clusters of 8
// for the same SMs.
class InFlight {
 public:
  template <typename Choose>
  InFlight(int device, std::int64_t nq, Choose&& choose) : count_(ctas_in_flight(device)) {
    int busy = count_.load(std::memory_order_relaxed);
    for (;;) {
      team_ = choose(busy);
      ctas_ = team_ > 1 ? int(nq) * team_ : 0;
      if (ctas_ == 0 || count_.compare_exchange_weak(busy, busy + ctas_, std::memory_order_relaxed)) return;
    }
  }
  ~InFlight() {
    if (ctas_) count_.fetch_sub(ctas_, std::memory_order_relaxed);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  int team() const { return team_; }

 private:
  std::atomic<int>& count_;
  int team_ = 1;
  int ctas_ = 0;
};

}  // namespace

void force_search_team_for_tests(int cl) { forced_team.store(cl); }

struct DeviceGraph::Impl {
  int device;
  int dim;
  Metric metric;
  Graph host;  // sizes and rows: the entry sample is chosen on the host per call
  DeviceBuffer<float> vectors;
  DeviceBuffer<std::uint32_t> edges;
  bool query_in_shared = false;
  int active[9] = {};                 // [cl]: clusters of cl CTAs the device runs at once (sm_90; 0 before)
  std::size_t smem = sizeof(Shared);  // without staging
  std::size_t stage_room = 0;         // shared memory left for staging areas
  int row_stride = 0;                 // floats per staged row
  int entry_per_round = 0;            // ... of entry_scores_kernel
  static constexpr int kEntryStageBytes = 32 * 1024;
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
    // 16: the area's alignment.
    stage_room = std::size_t(optin) > smem + 16 ? std::size_t(optin) - smem - 16 : 0;
    row_stride = padded_stride(d);
    entry_per_round =
        std::min((d + kGroupLanes - 1) / kGroupLanes, kEntryStageBytes / int(sizeof(float) * kEntryThreads));
    GKNN_CUDA(cudaFuncSetAttribute(entry_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kEntryStageBytes));
    const int most = int(smem + 16 + stage_room);
    GKNN_CUDA(cudaFuncSetAttribute(search_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
    int major = 0;
    GKNN_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    // Clusters need the kernel's sm_90 code: a binary that carries only
    // older code (the AddressSanitizer build's compute_80 PTX, run by JIT on
    // an H100) has none, its cluster helpers trap.
    cudaFuncAttributes fa = {};
    GKNN_CUDA(cudaFuncGetAttributes(&fa, search_kernel<8>));
    if (major >= 9 && fa.ptxVersion >= 90) {
      GKNN_CUDA(cudaFuncSetAttribute(search_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
      GKNN_CUDA(cudaFuncSetAttribute(search_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
      active[4] = active_clusters(search_kernel<4>, 4, most);
      active[8] = active_clusters(search_kernel<8>, 8, most);
      // GraphServer's only (no search_kernel<6>); the same threads and shared
      // memory as search_kernel's: one CTA an SM either way.
      GKNN_CUDA(cudaFuncSetAttribute(serve_kernel<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
      active[6] = active_clusters(serve_kernel<6>, 6, most);
    }
  }

  // CTAs per query for a call of nq queries, for calls of up to
  // kWidestUpTo queries (else one; clusters of 2 lost to one CTA): 8 where
  // the call's CTAs fit the GPU at once (one wave) beside the `busy` CTAs of
  // other calls running now, else 4 where nq clusters of 4 fit it alone:
  // the GPU service's executors call at once, and clusters of 8 for 32
  // queries in flight wait for each other's SMs (H200, 60,000 x 784, ef 16,
  // 8 threads each calling with 4 queries: a call 0.148 ms with 8, 0.101
  // with 4; up to 16 in flight 8 is ~7 % faster than 4;
  // bench/results/graph-cluster-load-H200-2026-11-29.md).
  int team_size(std::int64_t nq, int busy) const {
    if (nq > kWidestUpTo) return 1;
    const int forced = forced_team.load();
    if (forced == 1 || ((forced == 4 || forced == 8) && active[forced] > 0)) return forced;
    if (active[8] > 0 && busy + nq * 8 <= std::int64_t(active[8]) * 8) return 8;
    if (active[4] > 0 && nq <= active[4]) return 4;
    return 1;
  }

  // Clusters of cl CTAs of the search kernel the device runs at once (0
  // where it cannot place one, or refuses the question).
  template <typename Kernel>
  static int active_clusters(Kernel kernel, int cl, int smem) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t config =
        cluster_config(unsigned(cl), kMaxThreads, std::size_t(smem), nullptr, cl, &attr);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();  // a refusal is an answer here, not an error for a later check
      n = 0;
    }
    return n;
  }

  // Launches the search of `rows` queries with `cl` CTAs each (a cluster
  // when cl > 1: sm_90 and later).
  template <typename... Args>
  static void launch_search(int cl, unsigned rows, int threads, std::size_t smem, cudaStream_t s,
                            Args... args) {
    if (cl == 1) {
      search_kernel<1><<<rows, threads, smem, s>>>(args...);
      return;
    }
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t config = cluster_config(rows * unsigned(cl), threads, smem, s, cl, &attr);
    if (cl == 4)
      GKNN_CUDA(cudaLaunchKernelEx(&config, search_kernel<4>, args...));
    else
      GKNN_CUDA(cudaLaunchKernelEx(&config, search_kernel<8>, args...));
  }

  // Floats per thread per staging round for CTAs of `threads` within
  // `room` bytes: a lane's ceil(dim / 8) elements in as few rounds as fit,
  // an odd count (threads' areas then start in different banks); 0 (plain
  // loads) when under 8 fit.
  static int staging_floats(int dim, std::size_t room, int threads) {
    const int per_lane = (dim + kGroupLanes - 1) / kGroupLanes;
    const int fit = int(std::min<std::size_t>(room / (sizeof(float) * threads), 1 << 20));
    if (fit < 8) return 0;
    const int rounds = (per_lane + fit - 1) / fit;
    int per_round = (per_lane + rounds - 1) / rounds;
    if (per_round % 2 == 0 && per_round + 1 <= fit) ++per_round;
    return per_round;
  }
  // A staged row's floats: dim rounded up to 8, plus 8 when that is a
  // multiple of 16, so that the four rows a warp's groups read start in
  // different banks (stride = 8 or 24 mod 32) and rows stay 16-byte aligned.
  static int padded_stride(int dim) {
    int s = (dim + 7) / 8 * 8;
    if (s % 16 == 0) s += 8;
    return s;
  }

  static std::size_t staging_bytes(int per_round, int threads) {
    return std::size_t(per_round) * threads * sizeof(float);
  }

  // DeviceGraph::search's call through the calling thread's pinned scratch
  // (slots 0 and 1), read and written by the kernel in place: false, with
  // nothing queued, where the scratch is too small or not mapped (the
  // caller then copies as usual). The query is read once per CTA, into its
  // shared memory (query_in_shared); the answers are written once.
  bool search_mapped(const float* queries, std::int64_t nq, const SearchParams& sp, int ef, int cl,
                     int threads, std::size_t smem, int per_round, int stage_rows,
                     const std::uint32_t* entries, int n_entries, const std::uint8_t* skip, cudaStream_t s,
                     std::int64_t* ids, double* distances) const {
    const std::size_t answers = std::size_t(nq) * sp.k;
    const std::size_t q_bytes = std::size_t(nq) * dim * sizeof(float);
    const std::size_t id_bytes = answers * sizeof(std::int64_t);
    const std::size_t d_at = span_offset(id_bytes);
    auto* hq = static_cast<float*>(pinned_scratch_bytes(0, q_bytes));
    auto* hr = static_cast<unsigned char*>(pinned_scratch_bytes(1, d_at + answers * sizeof(double)));
    void *dq = nullptr, *dr = nullptr;
    if (!hq || !hr || cudaHostGetDevicePointer(&dq, hq, 0) != cudaSuccess ||
        cudaHostGetDevicePointer(&dr, hr, 0) != cudaSuccess) {
      (void)cudaGetLastError();  // a refusal is an answer here, not an error for a later check
      return false;
    }
    std::memcpy(hq, queries, q_bytes);
    auto* rids = static_cast<std::int64_t*>(dr);
    auto* rd = reinterpret_cast<double*>(static_cast<unsigned char*>(dr) + d_at);
    launch_search(cl, unsigned(nq), threads, smem, s, vectors.get(), edges.get(), host.n, host.degree, dim,
                  metric, static_cast<const float*>(dq), entries, static_cast<const double*>(nullptr),
                  n_entries, skip, ef, sp.k, sp.width, true, per_round, row_stride, stage_rows, rids, rd);
    // No error check between the launch (which reports its own) and the
    // wait: a throw there would leave the kernel writing into this thread's
    // pinned memory after the call.
    GKNN_CUDA(cudaStreamSynchronize(s));
    std::memcpy(ids, hr, id_bytes);
    std::memcpy(distances, hr + d_at, answers * sizeof(double));
    return true;
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
  if (im.host.n == 0) return pad_results(ids, distances, nq * sp.k);
  GKNN_CUDA(cudaSetDevice(im.device));
  const cudaStream_t s = thread_stream(im.device);
  AsyncBuffer<std::uint8_t> dskip(sp.skip ? std::size_t(im.host.n) : 0, s);
  std::unique_ptr<AsyncBuffer<std::uint32_t>> upload;
  std::vector<std::uint32_t> host_entries;  // kept alive until the wait below
  const auto [entries, n_entries] = im.entries(sp, s, upload, host_entries);
  // A small call's queries take clusters of CTAs (H200, 60,000 x 784, one
  // query: ef 20 0.118 -> 0.108 ms with 8; bench/results/graph-cluster-H200-2026-11-28.md),
  // which score the entry sample themselves, a share each (a separate
  // kernel before the search: one more launch and ~10 us on its few SMs).
  const InFlight counted(im.device, nq, [&](int busy) { return im.team_size(nq, busy); });
  const int cl = counted.team();
  const bool entry_kernel = cl == 1 && nq <= kWideUpTo && n_entries > 0;
  static_assert(sizeof(Shared) < 48 * 1024 + 8 * 1024, "the search kernel's shared memory without the query");
  const int threads = nq <= kWidestUpTo ? kMaxThreads : nq <= kWideUpTo ? kMaxThreads / 2 : kMaxThreads / 4;
  // Staged rows for every call; the entry kernel for calls of up to
  // kWideUpTo queries (a large batch keeps the SMs busy with its own
  // searches: there the separate pass cost 15 %). H200, 60,000 x 784,
  // ef 20: one query 0.175 -> 0.126 ms, batches of 8 36K -> 51K queries/s,
  // of 64 180K -> 250K, of 1,000 unchanged at ~780K
  // (bench/results/graph-staging-H200-2026-11-27.md).
  // Rows staged by the CTA together in as much shared memory as the lanes'
  // areas would take (the same CTAs per SM), when at least 4 rows fit.
  // A cluster's CTAs take all the room there is (a small call leaves SMs
  // idle: no other CTA would share theirs).
  int per_round = Impl::staging_floats(im.dim, im.stage_room, threads);
  const std::size_t stage_bytes = cl > 1 ? im.stage_room : Impl::staging_bytes(per_round, threads);
  int stage_rows =
      int(std::min<std::size_t>(stage_bytes / (std::size_t(im.row_stride) * sizeof(float)), threads));
  if (stage_rows < 4) stage_rows = 0;
  if (stage_rows) per_round = 0;
  const std::size_t smem =
      im.smem + 16 + (stage_rows ? std::size_t(stage_rows) * im.row_stride * sizeof(float) : stage_bytes);
  const std::size_t answers = std::size_t(nq) * sp.k;
  const std::size_t q_bytes = std::size_t(nq) * im.dim * sizeof(float);
  const std::size_t id_bytes = answers * sizeof(std::int64_t);
  if (sp.skip)
    GKNN_CUDA(cudaMemcpyAsync(dskip.get(), sp.skip, std::size_t(im.host.n), cudaMemcpyHostToDevice, s));
  // A call that takes clusters (a few queries, no entry kernel) with its
  // query in shared memory reads its queries from, and writes its answers
  // into, the thread's pinned memory itself (mapped: unified addressing):
  // no copy either way and no allocation, only the launch and the wait.
  if (cl > 1 && im.query_in_shared &&
      im.search_mapped(queries, nq, sp, ef, cl, threads, smem, per_round, stage_rows, entries, n_entries,
                       sp.skip ? dskip.get() : nullptr, s, ids, distances))
    return;
  // One allocation and one copy each way for a call's own buffers (a small
  // call is mostly such host work, and the service's executors make it from
  // four threads at once): the queries, the entry scores, then the ids and
  // distances side by side (downloaded by one copy).
  BlockLayout layout;
  const std::size_t q_at = layout.add<float>(std::size_t(nq) * im.dim),
                    e_at = layout.add<double>(entry_kernel ? std::size_t(nq) * n_entries : 0),
                    a_at = layout.add_span(id_bytes, answers * sizeof(double));
  AsyncBuffer<unsigned char> block(layout.bytes, s);
  const auto* dq = in_block<float>(block, q_at);
  auto* escores = in_block<double>(block, e_at);
  auto* dids = in_block<std::int64_t>(block, a_at);
  auto* dd = in_block<double>(block, a_at + span_offset(id_bytes));
  upload_async(block.get() + q_at, queries, q_bytes, 0, s);
  for (std::int64_t q0 = 0; q0 < nq; q0 += 1 << 30) {  // entry_kernel: one launch (nq <= kWideUpTo)
    const std::int64_t rows = std::min<std::int64_t>(nq - q0, 1 << 30);
    const dim3 egrid(unsigned((n_entries + kEntryThreads / kGroupLanes - 1) / (kEntryThreads / kGroupLanes)),
                     unsigned(rows));
    if (entry_kernel)
      entry_scores_kernel<<<egrid, kEntryThreads,
                            std::size_t(im.entry_per_round) * kEntryThreads * sizeof(float), s>>>(
          im.vectors.get(), im.dim, im.metric, dq + q0 * im.dim, entries, n_entries, im.entry_per_round,
          escores + q0 * n_entries);
    Impl::launch_search(
        cl, unsigned(rows), threads, smem, s, im.vectors.get(), im.edges.get(), im.host.n, im.host.degree,
        im.dim, im.metric, static_cast<const float*>(dq + q0 * im.dim), entries,
        static_cast<const double*>(entry_kernel ? escores + q0 * n_entries : nullptr), n_entries,
        static_cast<const std::uint8_t*>(sp.skip ? dskip.get() : nullptr), ef, sp.k, sp.width,
        im.query_in_shared, per_round, im.row_stride, stage_rows, dids + q0 * sp.k, dd + q0 * sp.k);
    GKNN_CUDA(cudaGetLastError());
  }
  download_span_and_wait(ids, answers * sizeof(std::int64_t), distances, answers * sizeof(double), dids, 1,
                         s);
}

// GraphServer (graph.h).
struct GraphServer::Impl {
  const DeviceGraph::Impl& g;
  int slots, team, k, dim;  // k: the most answers a request may ask
  RingLayout layout;
  std::uint32_t epoch = 0;  // of this server's requests (submit())
  std::size_t slot_bytes = 0, q_at = 0, ids_at = 0, d_at = 0;
  unsigned char* host = nullptr;  // the slots
  bool own_ring = false;          // host is this server's (cudaHostAlloc)
  int* stop = nullptr;            // pinned, this server's
  cudaStream_t stream = nullptr;
  std::vector<unsigned> seq;
  std::function<void()> launch;                        // the serving kernel, as made by the constructor
  std::unique_ptr<AsyncBuffer<std::uint32_t>> upload;  // the entry list where the graph's cache has no room
  std::vector<std::uint32_t> host_entries;
  std::unique_ptr<DeviceBuffer<std::int64_t>> row_ids;
  std::size_t doorbell_at = 0;                      // in host: the slots' request numbers
  std::unique_ptr<DeviceBuffer<unsigned>> mailbox;  // nslots forwarded numbers, then quit
  // Launches made and seen finished; each launch's end (two at most in flight).
  unsigned long long launched = 0, finished = 0;
  cudaEvent_t ends[2] = {nullptr, nullptr};
  std::mutex launching;

  static RingSpec own_spec(const DeviceGraph::Impl& gi, int nslots, const SearchParams& sp) {
    RingSpec r;
    r.slots = nslots;
    r.layout.max_dim = gi.dim;
    r.layout.max_k = sp.k;
    return r;
  }

  Impl(const DeviceGraph::Impl& gi, const RingSpec& ring, int cl, const SearchParams& sp)
      : g(gi),
        slots(ring.slots),
        team(cl),
        k(ring.layout.max_k),
        dim(gi.dim),
        layout(ring.layout),
        epoch(ring.epoch),
        seq(std::size_t(std::max(ring.slots, 0)), 0u) {
    try {
      start(ring, cl, sp);
    } catch (...) {
      shutdown();  // what was made before the failure (the destructor does not run)
      throw;
    }
  }

  void start(const RingSpec& ring, int cl, const SearchParams& sp) {
    const int nslots = ring.slots;
    if (nslots < 1 || (cl != 0 && cl != 1 && cl != 4 && cl != 6 && cl != 8) || sp.skip ||
        !g.query_in_shared || g.host.n == 0)
      throw Error(ErrorCode::InvalidArgument, "GraphServer: bad slots, team, skip flags or graph");
    if (k < 1 || k > kMaxEf || layout.max_dim < dim)
      throw Error(ErrorCode::InvalidArgument,
                  "GraphServer: bad k, or slots too small for the graph's queries");
    // Clusters serve up to kMaxSlotsPerCluster slots each, all of them on the GPU at once.
    const int clusters = serving_clusters(nslots);
    // The device's choice: 6 CTAs a query where the serving clusters and the
    // dispatcher's all fit (H200, 16 slots: a lone Fashion-MNIST query at ef
    // 12 0.065 ms instead of 0.074 with 4, 16 at once 0.078 instead of
    // 0.086; 1M x 128 ef 22 0.097 instead of 0.101:
    // graph-ring-team-H200-2026-11-30.md); 8 leave no room for the
    // dispatcher's cluster there.
    if (cl == 0) cl = g.active[6] >= clusters + 1 ? 6 : g.active[4] >= clusters + 1 ? 4 : 1;
    team = cl;
    int fit = cl == 1 ? 0 : g.active[cl];
    if (cl == 1) {
      int sms = 0;
      GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g.device));
      fit = sms;  // one 512-thread CTA with all the shared memory an SM
    }
    if (nslots > RingLayout::kMaxRingSlots)
      throw Error(ErrorCode::InvalidArgument, "GraphServer: more slots than a doorbell line holds");
    if (clusters + 1 > fit || clusters * kMaxSlotsPerCluster < nslots)  // + the dispatcher
      throw Error(ErrorCode::InvalidArgument, "GraphServer: more clusters than the GPU holds at once");
    q_at = RingLayout::kQueryAt;
    ids_at = layout.ids_at();
    d_at = layout.distances_at();
    slot_bytes = layout.slot_bytes();
    GKNN_CUDA(cudaSetDevice(g.device));
    own_ring = ring.host == nullptr;
    doorbell_at = layout.doorbell_at(nslots);
    if (own_ring) {
      GKNN_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), layout.ring_bytes(nslots),
                              cudaHostAllocMapped | cudaHostAllocPortable));
      std::memset(host, 0, layout.ring_bytes(nslots));
    } else {
      host = static_cast<unsigned char*>(ring.host);
      for (int i = 0; i < nslots; ++i)  // the next request number each slot takes (submit())
        std::memcpy(&seq[std::size_t(i)], host + doorbell_at + 4 * std::size_t(i), sizeof(unsigned));
    }
    // The mailboxes start as the doorbell is (a request waiting there is
    // one whose number differs from its slot's answered number), quit 0.
    mailbox = std::make_unique<DeviceBuffer<unsigned>>(std::size_t(nslots) + 1);
    {
      std::vector<unsigned> box(std::size_t(nslots) + 1, 0u);
      std::memcpy(box.data(), host + doorbell_at, std::size_t(nslots) * sizeof(unsigned));
      GKNN_CUDA(
          cudaMemcpy(mailbox->get(), box.data(), box.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
    }
    if (ring.row_ids) {
      row_ids = std::make_unique<DeviceBuffer<std::int64_t>>(std::size_t(g.host.n));
      GKNN_CUDA(cudaMemcpy(row_ids->get(), ring.row_ids, std::size_t(g.host.n) * sizeof(std::int64_t),
                           cudaMemcpyHostToDevice));
    }
    GKNN_CUDA(
        cudaHostAlloc(reinterpret_cast<void**>(&stop), 128, cudaHostAllocMapped | cudaHostAllocPortable));
    *stop = 0;
    void* dev = nullptr;
    GKNN_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
    void* dev_stop = nullptr;
    GKNN_CUDA(cudaHostGetDevicePointer(&dev_stop, stop, 0));
    GKNN_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const auto entry_list = g.entries(sp, stream, upload, host_entries);
    const std::uint32_t* entries = entry_list.first;
    const int n_entries = entry_list.second;
    GKNN_CUDA(cudaStreamSynchronize(stream));
    // The small call's staging: a cluster's CTAs take all the room (search()).
    int per_round = DeviceGraph::Impl::staging_floats(dim, g.stage_room, kMaxThreads);
    const std::size_t stage_bytes =
        cl > 1 ? g.stage_room : DeviceGraph::Impl::staging_bytes(per_round, kMaxThreads);
    int stage_rows =
        int(std::min<std::size_t>(stage_bytes / (std::size_t(g.row_stride) * sizeof(float)), kMaxThreads));
    if (stage_rows < 4) stage_rows = 0;
    if (stage_rows) per_round = 0;
    const std::size_t smem =
        g.smem + 16 + (stage_rows ? std::size_t(stage_rows) * g.row_stride * sizeof(float) : stage_bytes);
    const ServeRing served{static_cast<unsigned char*>(dev),
                           int(slot_bytes),
                           nslots,
                           int(q_at),
                           int(ids_at),
                           int(d_at),
                           k,
                           static_cast<const int*>(dev_stop),
                           kServeLifeNs,
                           ring.epoch,
                           row_ids ? row_ids->get() : nullptr,
                           reinterpret_cast<const unsigned*>(static_cast<unsigned char*>(dev) + doorbell_at),
                           mailbox->get()};
    const int most = int(g.smem + 16 + g.stage_room);
    const DeviceGraph::Impl* gp = &g;
    const cudaStream_t st = stream;
    const int width = sp.width;
    auto clustered = [=](auto kernel) {
      GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
      return [=] {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t config =
            cluster_config(unsigned((clusters + 1) * cl), kMaxThreads, smem, st, cl, &attr);
        GKNN_CUDA(cudaLaunchKernelEx(&config, kernel, gp->vectors.get(), gp->edges.get(), gp->host.degree,
                                     gp->dim, gp->metric, entries, n_entries, width, per_round,
                                     gp->row_stride, stage_rows, served));
      };
    };
    if (cl == 1) {
      GKNN_CUDA(cudaFuncSetAttribute(serve_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
      launch = [=] {
        serve_kernel<1><<<clusters + 1, kMaxThreads, smem, st>>>(
            gp->vectors.get(), gp->edges.get(), gp->host.degree, gp->dim, gp->metric, entries, n_entries,
            width, per_round, gp->row_stride, stage_rows, served);
        GKNN_CUDA(cudaGetLastError());
      };
    } else if (cl == 4) {
      launch = clustered(serve_kernel<4>);
    } else if (cl == 6) {
      launch = clustered(serve_kernel<6>);
    } else {
      launch = clustered(serve_kernel<8>);
    }
    for (cudaEvent_t& e : ends) GKNN_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    keep_alive();
  }

  // Keeps a launch queued behind the running one (same stream: they never
  // overlap), so that the kernel serves without a gap where a lifetime
  // (kServeLifeNs) ends; a launch that failed reports it.
  void keep_alive() {
    const std::lock_guard<std::mutex> hold(launching);  // search() calls it from any thread
    while (finished < launched) {
      const cudaError_t e = cudaEventQuery(ends[finished % 2]);
      if (e == cudaErrorNotReady) break;
      if (e != cudaSuccess) throw_cuda(e, "GraphServer: the serving kernel");
      ++finished;
    }
    while (launched - finished < 2) {
      launch();
      GKNN_CUDA(cudaEventRecord(ends[launched % 2], stream));
      ++launched;
    }
  }

  ~Impl() { shutdown(); }

  // Stops the kernel and frees what was made (any part of it).
  void shutdown() {
    if (stop) __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
    // It ends within one search (the flag) or its lifetime; a kernel that
    // does neither leaves its pinned memory and stream behind (a log line).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (stream && cudaStreamQuery(stream) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > until) {
        std::fprintf(stderr, "GraphServer: the serving kernel did not stop\n");
        return;
      }
    }
    for (cudaEvent_t e : ends)
      if (e) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
    if (own_ring && host) cudaFreeHost(host);
    if (stop) cudaFreeHost(stop);
  }

  void submit(int slot, const float* query, int ef, int nk) {
    if (slot < 0 || slot >= slots || nk < 1 || nk > k || ef < 1)
      throw Error(ErrorCode::InvalidArgument, "GraphServer: no such slot, or a bad ef or k");
    ef = std::max(ef, nk);
    if (ef > kMaxEf) throw Error(ErrorCode::InvalidArgument, "GraphServer: ef above the device list");
    unsigned char* s = host + std::size_t(slot) * slot_bytes;
    std::memcpy(s + q_at, query, std::size_t(dim) * sizeof(float));
    std::memcpy(s + RingLayout::kEfAt, &ef, sizeof ef);
    std::memcpy(s + RingLayout::kKAt, &nk, sizeof nk);
    std::memcpy(s + RingLayout::kEpochAt, &epoch, sizeof epoch);
    const unsigned v = ++seq[std::size_t(slot)];
    __atomic_store_n(reinterpret_cast<unsigned*>(host + doorbell_at + 4 * std::size_t(slot)), v,
                     __ATOMIC_SEQ_CST);
  }

  bool answered(int slot) const {
    const unsigned char* s = host + std::size_t(slot) * slot_bytes;
    return __atomic_load_n(reinterpret_cast<const unsigned*>(s + kDoneAt), __ATOMIC_ACQUIRE) ==
           seq[std::size_t(slot)];
  }

  void answers(int slot, int nk, std::int64_t* ids, double* distances) const {
    const unsigned char* s = host + std::size_t(slot) * slot_bytes;
    std::memcpy(ids, s + ids_at, std::size_t(nk) * sizeof(std::int64_t));
    std::memcpy(distances, s + d_at, std::size_t(nk) * sizeof(double));
  }

  void search(int slot, const float* query, int ef, int nk, std::int64_t* ids, double* distances) {
    submit(slot, query, ef, nk);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    unsigned spins = 0;
    keep_alive();
    while (!answered(slot)) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      if ((++spins & 255) == 0) {
        keep_alive();
        if (std::chrono::steady_clock::now() > until)
          throw Error(ErrorCode::DeviceFault, "GraphServer: a search was not answered within 2 s");
      }
    }
    answers(slot, nk, ids, distances);
  }
};

GraphServer::GraphServer(const DeviceGraph& g, int slots, int team, const SearchParams& sp) {
  if (!g.impl_) throw Error(ErrorCode::InvalidArgument, "GraphServer: a moved-from graph");
  impl_ = new Impl(*g.impl_, Impl::own_spec(*g.impl_, slots, sp), team, sp);
}
GraphServer::GraphServer(const DeviceGraph& g, const RingSpec& ring, int team, const SearchParams& sp) {
  if (!g.impl_) throw Error(ErrorCode::InvalidArgument, "GraphServer: a moved-from graph");
  impl_ = new Impl(*g.impl_, ring, team, sp);
}
GraphServer::~GraphServer() { delete impl_; }
void GraphServer::search(int slot, const float* query, int ef, int k, std::int64_t* ids, double* distances) {
  impl_->search(slot, query, ef, k, ids, distances);
}
void GraphServer::submit(int slot, const float* query, int ef, int k) { impl_->submit(slot, query, ef, k); }
bool GraphServer::answered(int slot) const { return impl_->answered(slot); }
void GraphServer::answers(int slot, int k, std::int64_t* ids, double* distances) const {
  impl_->answers(slot, k, ids, distances);
}
int GraphServer::slots() const { return impl_->slots; }
int GraphServer::team() const { return impl_->team; }
void GraphServer::keep_alive() { impl_->keep_alive(); }

}  // namespace gknn::graph
