// Batched k-selection on the GPU: the k best of each of nq rows (k <= 2048),
// exactly as select_rows_cpu orders them.
//
// One kernel template, rows_kernel<Loader, Cfg, queue>, does every mode:
//  - WarpSelect: one warp per row, 4 rows per block (many rows);
//  - BlockSelect: G = 2 or 4 warps of a block share a row, each with its own
//    queues over interleaved tiles, sharing the radius through shared memory,
//    merged at the end through shared memory (few rows, long rows);
//  - partitioned: the row is also split over P blocks (blockIdx.y), each
//    writing its k best words; the blocks of a row share the radius through a
//    global atomicMin. A second pass selects from the P k words per row with
//    the same kernel reading words instead of keys (one huge row, or few rows);
//  - k = 1: a per-lane running minimum and a warp/block reduction.
// The choice of mode (plan()) and the bucket table (Cfg) are the one place
// where the kernel is tuned. plan(): with W resident warps on the device (from
// the occupancy calculator), one warp per row while nq >= W; else G doubles
// (up to the block's warps) while each warp keeps >= 4 tiles of the row; if
// nq * G is still below W, P parts per row (about 2 W / (nq G) of them, each
// >= 8 tiles per warp and >= 16 K keys). GKNN_ROWSEL_PLAN="G,P" overrides it.
//
// Words: a 32-bit key packs with its 32-bit column into a uint64 (float and
// uint64 payloads too: the column is widened on output); 64-bit keys use a
// 96-bit word. Rows are therefore limited to 2^32 - 2 keys.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gknn/error.h"
#include "gknn/select.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"
#include "select/key_order.cuh"
#include "select/rows_async.h"
#include "select/warp_select.cuh"

namespace gknn {
namespace rowsel {
namespace {

enum class KeyType : int { F32, I32, F64, I64 };

template <typename Key>
constexpr KeyType key_type() {
  if constexpr (std::is_same_v<Key, float>) return KeyType::F32;
  if constexpr (std::is_same_v<Key, std::int32_t>) return KeyType::I32;
  if constexpr (std::is_same_v<Key, double>) return KeyType::F64;
  return KeyType::I64;
}

// ---- the bucket table --------------------------------------------------------
// Queue implementations (warp_select.cuh): kQueueSmem is the default;
// kQueueSmemV2 is the same with half the tile (fewer registers, more warps);
// the two register ones (the paper's) are built for float keys only, for
// comparison. GKNN_ROWSEL_QUEUE=smem2|regs|thread picks one (float keys).
enum : int { kQueueSmem = 0, kQueueRegs = 1, kQueueThread = 2, kQueueSmemV2 = 3 };

// K: warp queue length (k rounded up to a power of two, >= 32; 1 = reduction).
// kCap: candidate buffer words (shared-memory queues: a power of two).
// kNB: buffer registers of the register queue (kQueueRegs; 32 kNB words).
// kV: 16-byte loads per lane per tile (two tiles in flight, a third in L2).
// kSmemQ: the queue lives in shared memory: SmemSelect, and the register
//     variants where a register queue would spill (K = 2048, and K = 1024
//     with 96-bit words).
// kWarps: warps per block; kMinBlocks: the register budget for ptxas
//     (__launch_bounds__), chosen so that no bucket spills.
template <int K_, typename W, int kVariant = kQueueSmem>
struct Cfg {
  static constexpr bool kWide = sizeof(W) > 8;
  static constexpr bool kSmemVar = kVariant == kQueueSmem || kVariant == kQueueSmemV2;
  static constexpr int kK = K_;
  static constexpr int kNB = K_ <= 32 ? 2 : K_ <= 64 ? 3 : K_ <= 256 ? 4 : 8;
  static constexpr int kCap = kSmemVar ? (K_ <= 32    ? 64
                                          : K_ <= 128 ? 128
                                          : K_ <= 512 ? 256
                                                      : 512)
                                       : kWarpSize * kNB;
  static constexpr int kV = (kWide || kVariant == kQueueSmemV2) ? 2 : 4;
  static constexpr bool kSmemQ = kSmemVar || K_ >= 2048 || (kWide && K_ >= 1024);
  static constexpr int kWarps = (K_ >= 2048 && (kSmemVar || kWide)) ? 2 : 4;
  static constexpr int kMinBlocks = K_ == 1                    ? 4
                                    : kVariant == kQueueSmem   ? 4
                                    : kVariant == kQueueSmemV2 ? (K_ >= 1024 ? 5 : 6)
                                    : kSmemQ                   ? 3
                                    : K_ >= 1024               ? 1
                                    : K_ >= 512                ? 3
                                                               : 4;
  // Shared memory words past the candidate buffers: the queues, or (register
  // queues, BlockSelect) the slots of the tree merge.
  GKNN_HDI static constexpr int area_words(int G) {
    return kSmemQ ? kWarps * K_ : (G > 1 ? (kWarps / 2) * K_ : 0);
  }
};

enum : int { kModeFinal = 0, kModeWords = 1 };

struct RowsArgs {
  const void* in;
  std::int64_t nq, len, ld;
  int kk;    // results per row: min(k, len), 1..2048
  int kout;  // output row length in final mode (k; columns kk..k-1 are padding)
  std::uint64_t flip;
  int G;  // warps per row
  int P;  // parts per row (blockIdx.y)
  std::int64_t chunk;
  int mode;
  KeyType kt;
  bool payload64;
  void* out_keys;
  void* out_payloads;
  void* out_words;  // kModeWords: row r, part p at ((r * P + p) * kk)
  unsigned long long* g_radius;
};

// ---- output ----------------------------------------------------------------------
// Writes ordered key bits `o` (already un-flipped) as the caller's key type.
template <typename Bits>
__device__ __forceinline__ void store_key(const RowsArgs& a, std::int64_t at, Bits o) {
  if constexpr (sizeof(Bits) == 4) {
    if (a.kt == KeyType::F32)
      static_cast<float*>(a.out_keys)[at] = select::KeyBits<float>::key(o);
    else
      static_cast<std::int32_t*>(a.out_keys)[at] = select::KeyBits<std::int32_t>::key(o);
  } else {
    if (a.kt == KeyType::F64)
      static_cast<double*>(a.out_keys)[at] = select::KeyBits<double>::key(o);
    else
      static_cast<std::int64_t*>(a.out_keys)[at] = select::KeyBits<std::int64_t>::key(o);
  }
}

__device__ __forceinline__ void store_payload(const RowsArgs& a, std::int64_t at, std::uint64_t p) {
  if (a.payload64)
    static_cast<std::uint64_t*>(a.out_payloads)[at] = p;
  else
    static_cast<std::uint32_t*>(a.out_payloads)[at] = static_cast<std::uint32_t>(p);
}

template <typename W>
__device__ __forceinline__ void store_final(const RowsArgs& a, std::int64_t at, const W& w) {
  using WT = WordTraits<W>;
  using Bits = typename WT::KeyBits;
  store_key<Bits>(a, at, WT::key(w) ^ Bits(a.flip));
  store_payload(a, at, WT::col(w));
}

// Padding: the worst key (all-ones ordered bits) and payload ~0, as the CPU
// reference writes for rows shorter than k.
template <typename Bits>
__device__ __forceinline__ void store_pad(const RowsArgs& a, std::int64_t at) {
  store_key<Bits>(a, at, ~Bits(0) ^ Bits(a.flip));
  store_payload(a, at, ~std::uint64_t(0));
}

// The first kk words of the selection, then padding. s.get(r): word
// r * 32 + lane of the sorted queue.
template <typename W, int NW, class S>
__device__ __forceinline__ void write_row(const RowsArgs& a, std::int64_t row, int part, S& s) {
  const int lane = lane_id();
  if (a.mode == kModeWords) {
    W* out = static_cast<W*>(a.out_words) + (row * a.P + part) * std::int64_t(a.kk);
    GKNN_UNROLL
    for (int r = 0; r < NW; ++r) {
      const int i = r * kWarpSize + lane;
      if (i < a.kk) out[i] = s.get(r);
    }
  } else {
    const std::int64_t base = row * std::int64_t(a.kout);
    GKNN_UNROLL
    for (int r = 0; r < NW; ++r) {
      const int i = r * kWarpSize + lane;
      if (i < a.kk) store_final<W>(a, base + i, s.get(r));
    }
    for (int i = a.kk + lane; i < a.kout; i += kWarpSize)
      store_pad<typename WordTraits<W>::KeyBits>(a, base + i);
  }
}

// ---- the kernel ----------------------------------------------------------------
template <class L, class C>
constexpr std::size_t smem_bytes(int G) {
  using W = typename L::Word;
  if (C::kK == 1) return std::size_t(C::kWarps) * sizeof(W);
  std::size_t s = std::size_t(C::kWarps) * C::kCap * sizeof(W);
  s += std::size_t(C::area_words(G)) * sizeof(W);
  s += std::size_t(C::kWarps) * sizeof(unsigned long long);
  return s;
}

// The paper's thread-queue lengths t by bucket (for kQueueThread).
template <int K>
constexpr int kFaissT = K <= 32    ? 2
                        : K <= 128 ? 3
                        : K <= 256 ? 4
                                   : 8;

template <class L, class C, int kVariant>
struct SinkOf {
  using type =
      std::conditional_t<C::kSmemVar, SmemSelect<L, C::kK, C::kCap>,
                         std::conditional_t<kVariant == kQueueRegs, WarpSelect<L, C::kK, C::kNB, C::kSmemQ>,
                                            ThreadQueueSelect<L, C::kK, kFaissT<C::kK>, C::kSmemQ>>>;
};

template <class L, class C, int kVariant>
__global__ void __launch_bounds__(C::kWarps* kWarpSize, C::kMinBlocks) rows_kernel(const RowsArgs a) {
  using W = typename L::Word;
  using Elem = typename L::Elem;
  using Bits = typename L::Bits;
  constexpr int kWarps = C::kWarps;
  constexpr int K = C::kK;
  extern __shared__ __align__(16) unsigned char smem[];

  const int warp = int(threadIdx.x) / kWarpSize;
  const int lane = lane_id();
  const int G = a.G;
  const int rg = warp / G, sub = warp - rg * G;
  const std::int64_t row = std::int64_t(blockIdx.x) * (kWarps / G) + rg;
  const int part = int(blockIdx.y);
  const bool active = row < a.nq;
  const std::int64_t c0 = std::int64_t(part) * a.chunk;
  const std::int64_t c1 = a.len < c0 + a.chunk ? a.len : c0 + a.chunk;
  const Elem* rowp = static_cast<const Elem*>(a.in) + (active ? row * a.ld : 0);
  const Bits flip = Bits(a.flip);

  if constexpr (K == 1) {
    MinSelect<L> s;
    s.init(flip);
    if (active) scan_row<L, C::kV>(s, rowp, c0, c1, sub, G);
    s.reduce();
    if (G > 1) {
      W* area = reinterpret_cast<W*>(smem);
      if (lane == 0) area[warp] = s.best;
      __syncthreads();
      if (sub == 0)
        for (int g = 1; g < G; ++g) {
          const W o = area[warp + g];
          s.best = wsel(wless(o, s.best), o, s.best);
        }
    }
    if (active && sub == 0) write_row<W, 1>(a, row, part, s);
  } else {
    constexpr int NW = K / kWarpSize;
    constexpr int kCap = C::kCap;
    W* bufs = reinterpret_cast<W*>(smem);
    W* area = bufs + kWarps * kCap;
    unsigned long long* srad = reinterpret_cast<unsigned long long*>(area + C::area_words(G));

    if (sub == 0 && lane == 0) srad[rg] = ~0ull;
    typename SinkOf<L, C, kVariant>::type ws;
    ws.init(bufs + warp * kCap, C::kSmemQ ? area + warp * K : nullptr, a.kk, flip,
            G > 1 ? srad + rg : nullptr, (a.g_radius != nullptr && active) ? a.g_radius + row : nullptr);
    __syncthreads();
    if (active) scan_row<L, C::kV>(ws, rowp, c0, c1, sub, G);
    ws.flush();

    // BlockSelect: pairwise tree merge of the G queues through shared memory.
    for (int s = 1; s < G; s <<= 1) {
      const int pid = sub / (2 * s), pos = sub - pid * 2 * s;
      W* slot = area + std::int64_t(rg * (G / 2) + pid) * K;
      if constexpr (!C::kSmemQ) {
        if (pos == s) {
          GKNN_UNROLL
          for (int r = 0; r < NW; ++r) slot[r * kWarpSize + lane] = ws.q[r];
        }
      }
      __syncthreads();
      if (pos == 0) ws.merge_sorted_from(C::kSmemQ ? area + (warp + s) * K : slot);
      __syncthreads();
    }

    if (active && sub == 0) write_row<W, NW>(a, row, part, ws);
  }
}

template <typename Key, typename Payload>
__global__ void pad_kernel(Key* keys, Payload* payloads, std::int64_t n, Key key) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    keys[i] = key;
    payloads[i] = ~Payload(0);
  }
}

// ---- planning and launch -----------------------------------------------------------
struct Plan {
  int G = 1;
  int P = 1;
  std::int64_t chunk = 0;
};

int sm_count() {
  int dev = 0, sms = 0;
  GKNN_CUDA(cudaGetDevice(&dev));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Optional override for tuning and benchmarks: GKNN_ROWSEL_PLAN="G,P".
bool plan_override(Plan& p) {
  const char* s = std::getenv("GKNN_ROWSEL_PLAN");
  if (s == nullptr || *s == 0) return false;
  int g = 0, parts = 0;
  if (std::sscanf(s, "%d,%d", &g, &parts) != 2) return false;
  if (g != 1 && g != 2 && g != 4) return false;
  if (parts < 1 || parts > 65535) return false;
  p.G = g;
  p.P = parts;
  return true;
}

template <class L, class C, int kVariant>
void set_smem(std::size_t bytes) {
  if (bytes > 48 * 1024)
    GKNN_CUDA(cudaFuncSetAttribute(rows_kernel<L, C, kVariant>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(bytes)));
}

// Which mode: enough warps in flight to fill the GPU, without cutting a row
// into pieces so short that the per-piece merges dominate.
template <class L, class C>
Plan plan(std::int64_t nq, std::int64_t len, bool top) {
  constexpr std::int64_t TE = std::int64_t(kWarpSize) * C::kV * L::kVec;
  const std::size_t bytes1 = smem_bytes<L, C>(1);
  set_smem<L, C, kQueueSmem>(bytes1);
  int occ = 0;
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, rows_kernel<L, C, kQueueSmem>,
                                                          C::kWarps * kWarpSize, bytes1));
  const std::int64_t slots = std::int64_t(sm_count()) * std::max(occ, 1) * C::kWarps;  // resident warps

  Plan p;
  const bool forced = top && plan_override(p);
  if (!forced) {
    while (p.G < C::kWarps && nq * p.G < slots && len >= std::int64_t(2 * p.G) * TE * 4) p.G *= 2;
    if (nq * p.G < slots) {
      const std::int64_t chunk_min =
          std::max<std::int64_t>(std::int64_t(p.G) * TE * 8, 16 * std::int64_t(C::kK));
      const std::int64_t want = (2 * slots + nq * p.G - 1) / (nq * p.G);
      const std::int64_t most = std::min<std::int64_t>(len / chunk_min, 65535);
      p.P = int(std::max<std::int64_t>(1, std::min(want, most)));
    }
  }
  p.G = std::min(p.G, C::kWarps);
  p.P = int(std::min<std::int64_t>(p.P, std::max<std::int64_t>(1, (len + TE - 1) / TE)));
  std::int64_t chunk = (len + p.P - 1) / p.P;
  chunk = (chunk + TE - 1) / TE * TE;
  p.chunk = std::max<std::int64_t>(chunk, 1);
  p.P = int((len + p.chunk - 1) / p.chunk);
  if (p.P < 1) p.P = 1;
  return p;
}

// Tuning switch (float keys only): GKNN_ROWSEL_QUEUE=smem2 runs the shared
// queue with half tiles, =regs the paper's lane-stride register queue,
// =thread its per-lane thread queues.
int queue_variant() {
  const char* s = std::getenv("GKNN_ROWSEL_QUEUE");
  if (s == nullptr) return kQueueSmem;
  if (std::strcmp(s, "smem2") == 0) return kQueueSmemV2;
  if (std::strcmp(s, "regs") == 0) return kQueueRegs;
  if (std::strcmp(s, "thread") == 0) return kQueueThread;
  return kQueueSmem;
}

template <class L, class C, int kVariant>
void launch_variant(const RowsArgs& a, cudaStream_t st) {
  const std::size_t bytes = smem_bytes<L, C>(a.G);
  const int rows_per_block = C::kWarps / a.G;
  const std::int64_t blocks = (a.nq + rows_per_block - 1) / rows_per_block;
  if (blocks > 0x7fffffff) throw Error(ErrorCode::InvalidArgument, "select_rows_gpu: too many rows");
  set_smem<L, C, kVariant>(bytes);
  dim3 grid(unsigned(blocks), unsigned(a.P));
  rows_kernel<L, C, kVariant><<<grid, C::kWarps * kWarpSize, bytes, st>>>(a);
  GKNN_CUDA(cudaGetLastError());
}

template <class L, class C>
void launch(const RowsArgs& a, cudaStream_t st) {
  using W = typename L::Word;
  if constexpr (std::is_same_v<L, KeyLoad<float>> && C::kK > 1) {
    const int v = queue_variant();
    if (v == kQueueRegs) return launch_variant<L, Cfg<C::kK, W, kQueueRegs>, kQueueRegs>(a, st);
    if (v == kQueueThread) return launch_variant<L, Cfg<C::kK, W, kQueueThread>, kQueueThread>(a, st);
    if (v == kQueueSmemV2) return launch_variant<L, Cfg<C::kK, W, kQueueSmemV2>, kQueueSmemV2>(a, st);
  }
  launch_variant<L, C, kQueueSmem>(a, st);
}

struct Out {
  void* keys;
  void* payloads;
  bool payload64;
  KeyType kt;
  std::uint64_t flip;
  int kout;
};

template <class L>
void run_rows(const typename L::Elem* in, std::int64_t nq, std::int64_t len, std::int64_t ld, int kk,
              const Out& out, cudaStream_t st, bool top);

template <class L, class C>
void run_bucket(const typename L::Elem* in, std::int64_t nq, std::int64_t len, std::int64_t ld, int kk,
                const Out& out, cudaStream_t st, bool top) {
  using W = typename L::Word;
  const Plan p = plan<L, C>(nq, len, top);
  RowsArgs a{};
  a.in = in;
  a.nq = nq;
  a.len = len;
  a.ld = ld;
  a.kk = kk;
  a.kout = out.kout;
  a.flip = out.flip;
  a.G = p.G;
  a.P = p.P;
  a.chunk = p.chunk;
  a.kt = out.kt;
  a.payload64 = out.payload64;
  a.out_keys = out.keys;
  a.out_payloads = out.payloads;
  if (p.P == 1) {
    a.mode = kModeFinal;
    launch<L, C>(a, st);
    return;
  }
  // Partitioned: P partial k-best lists per row, then a pass over them.
  // Stream-ordered: freed after the pass that reads them, no wait here; one
  // allocation for both arrays (BlockLayout: the pool's allocations
  // serialise threads selecting at once).
  BlockLayout layout;
  const std::size_t at_partial = layout.add<W>(std::size_t(nq) * p.P * kk),
                    at_radius = layout.add<unsigned long long>(C::kK > 1 ? std::size_t(nq) : 0);
  AsyncBuffer<unsigned char> block(layout.bytes, st);
  W* const partial = in_block<W>(block, at_partial);
  unsigned long long* const radius = in_block<unsigned long long>(block, at_radius);
  if (C::kK > 1) GKNN_CUDA(cudaMemsetAsync(radius, 0xff, sizeof(unsigned long long) * std::size_t(nq), st));
  a.mode = kModeWords;
  a.out_words = partial;
  a.g_radius = C::kK > 1 ? radius : nullptr;
  launch<L, C>(a, st);
  const std::int64_t len2 = std::int64_t(p.P) * kk;
  run_rows<WordLoad<W>>(partial, nq, len2, len2, kk, out, st, false);
}

template <class L>
void run_rows(const typename L::Elem* in, std::int64_t nq, std::int64_t len, std::int64_t ld, int kk,
              const Out& out, cudaStream_t st, bool top) {
  using W = typename L::Word;
  if (kk == 1) return run_bucket<L, Cfg<1, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 32) return run_bucket<L, Cfg<32, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 64) return run_bucket<L, Cfg<64, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 128) return run_bucket<L, Cfg<128, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 256) return run_bucket<L, Cfg<256, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 512) return run_bucket<L, Cfg<512, W>>(in, nq, len, ld, kk, out, st, top);
  if (kk <= 1024) return run_bucket<L, Cfg<1024, W>>(in, nq, len, ld, kk, out, st, top);
  return run_bucket<L, Cfg<2048, W>>(in, nq, len, ld, kk, out, st, top);
}

}  // namespace
}  // namespace rowsel

template <typename Key, typename Payload>
void select_rows_async(const Key* d_keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                       SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, cudaStream_t st) {
  if (k < 1 || k > kMaxRowK)
    throw Error(ErrorCode::InvalidArgument, "select_rows_gpu: k must be in 1.." + std::to_string(kMaxRowK));
  if (nq < 0 || len < 0) throw Error(ErrorCode::InvalidArgument, "select_rows_gpu: negative size");
  if (nq > 1 && ld < len) throw Error(ErrorCode::InvalidArgument, "select_rows_gpu: ld < len");
  // Columns travel as 32-bit numbers inside the packed words.
  if (len >= std::int64_t(0xffffffff))
    throw Error(ErrorCode::InvalidArgument,
                "select_rows_gpu: rows of 2^32 - 1 keys or more are not supported");
  if (nq == 0) return;
  if (d_out_keys == nullptr || d_out_payloads == nullptr || (len > 0 && d_keys == nullptr))
    throw Error(ErrorCode::InvalidArgument, "select_rows_gpu: null buffer");

  using Bits = typename select::KeyBits<Key>::Bits;
  const bool largest = order == SelectOrder::Largest;
  const Bits flip = largest ? ~Bits(0) : Bits(0);
  const int kk = int(std::min<std::int64_t>(k, len));
  if (kk == 0) {
    using P = select::Packing<Key, Payload>;
    const std::int64_t n = nq * k;
    rowsel::pad_kernel<Key, Payload><<<unsigned((n + 255) / 256), 256, 0, st>>>(
        d_out_keys, d_out_payloads, n, P::key(P::sentinel(), largest));
    GKNN_CUDA(cudaGetLastError());
  } else {
    rowsel::Out out{
        d_out_keys, d_out_payloads, sizeof(Payload) == 8, rowsel::key_type<Key>(), std::uint64_t(flip), k};
    rowsel::run_rows<rowsel::KeyLoad<Key>>(d_keys, nq, len, ld, kk, out, st, true);
  }
}

template <typename Key, typename Payload>
void select_rows_gpu(const Key* d_keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                     SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  select_rows_async(d_keys, nq, len, ld, k, order, d_out_keys, d_out_payloads, st);
  GKNN_CUDA(cudaStreamSynchronize(st));
}

#define GKNN_INSTANTIATE(K, P)                                                                              \
  template void select_rows_gpu<K, P>(const K*, std::int64_t, std::int64_t, std::int64_t, int, SelectOrder, \
                                      K*, P*, void*);                                                       \
  template void select_rows_async<K, P>(const K*, std::int64_t, std::int64_t, std::int64_t, int,            \
                                        SelectOrder, K*, P*, cudaStream_t);
GKNN_FOR_EACH_KEY_PAYLOAD(GKNN_INSTANTIATE)
#undef GKNN_INSTANTIATE

}  // namespace gknn
