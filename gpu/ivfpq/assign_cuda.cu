// The direct nearest-centroid kernel (assign_gpu.h), the Assigner, and the
// GPU encoder.
//
// The direct kernel serves the coarse quantizer (1 group, 1024+ centroids of the
// full dimension) and the PQ (m groups of 2^nbits codewords of dim/m, all in
// one launch). A block stages a tile of rows of one group in shared memory
// (rows padded to an odd stride: lanes reading different rows hit different
// banks), then streams that group's centroids through shared memory in
// chunks (all lanes of a warp read the same centroid: a broadcast). Warp w
// takes centroids w, w + kWarps, ... of each chunk, lane l rows l, l + 32, ...
// of the tile, and each (centroid, row) distance is l2_squared_distance, the
// CPU's code. Partial winners meet in shared memory, compared by nearer(),
// a total order, so the split over warps cannot change the winner.
//
// The tile is as tall as shared memory allows (the centroids are re-read
// from L2 once per tile, which is what bounds the coarse assignment), then
// lowered to even out the last wave of blocks. Dimensions too large to stage
// even 32 rows read rows and centroids straight from global memory.
#include <algorithm>
#include <cstring>

#include "gknn/error.h"
#include "gknn/runtime.h"
#include "ivfpq/arith.h"
#include "ivfpq/assign.h"
#include "ivfpq/assign_gpu.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxRowsPerLane = 16;   // a tile holds at most 32 x this rows
constexpr int kChunkBytes = 8 << 10;  // centroids staged at a time (at least kWarps of them)
// Rows per encode batch: bounded in floats so that large dimensions still fit.
constexpr std::int64_t kBatchRows = 65536;
constexpr std::int64_t kBatchFloats = std::int64_t(1) << 25;

struct NearestArgs {
  const float* x;  // group g of row i: x + i * ld + g * dim
  std::int64_t n, ld;
  const float* centroids;  // group g: centroids + g * k * dim
  int k, dim;
  std::int32_t* out;  // out[g * n + i]
  int rows_per_lane;  // the tile: 32 x rows_per_lane rows
  int chunk;          // centroids staged at a time
  int stride;         // floats between staged rows
};

__host__ __device__ inline int row_stride(int dim) { return dim | 1; }

// Bytes of shared memory: the staged rows and centroid chunk, or the partial
// winners of every warp, whichever is larger (they are used one after the other).
std::size_t nearest_smem(int rows_per_lane, int chunk, int dim, bool staged) {
  const std::size_t tile = 32 * std::size_t(rows_per_lane);
  const std::size_t partials = kWarps * tile * (sizeof(float) + sizeof(int));
  if (!staged) return partials;
  return std::max(partials, sizeof(float) * (tile * row_stride(dim) + std::size_t(chunk) * dim));
}

template <bool kStaged>
__global__ void __launch_bounds__(kThreads) nearest_kernel(NearestArgs a) {
  extern __shared__ __align__(16) float smem[];
  const int g = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = 32 * a.rows_per_lane;
  const std::int64_t r0 = std::int64_t(blockIdx.x) * tile;
  const int rows = int(a.n - r0 < tile ? a.n - r0 : tile);
  const float* xg = a.x + r0 * a.ld + std::int64_t(g) * a.dim;
  const float* cg = a.centroids + std::int64_t(g) * a.k * a.dim;
  float* staged_rows = smem;
  float* chunk = smem + tile * a.stride;
  if (kStaged)
    for (int i = threadIdx.x; i < rows * a.dim; i += kThreads) {
      const int r = i / a.dim, d = i - r * a.dim;
      staged_rows[r * a.stride + d] = xg[r * a.ld + d];
    }

  float best[kMaxRowsPerLane];
  int at[kMaxRowsPerLane];
#pragma unroll
  for (int r = 0; r < kMaxRowsPerLane; ++r) best[r] = 0.0f, at[r] = -1;
  for (int c0 = 0; c0 < a.k; c0 += a.chunk) {
    const int count = a.k - c0 < a.chunk ? a.k - c0 : a.chunk;
    if (kStaged) {
      __syncthreads();  // the previous chunk is no longer read (and the rows are staged)
      for (int i = threadIdx.x; i < count * a.dim; i += kThreads) chunk[i] = cg[std::int64_t(c0) * a.dim + i];
      __syncthreads();
    }
    for (int c = warp; c < count; c += kWarps) {
      const float* cv = kStaged ? chunk + c * a.dim : cg + std::int64_t(c0 + c) * a.dim;
#pragma unroll
      for (int r = 0; r < kMaxRowsPerLane; ++r) {
        const int row = r * 32 + lane;
        if (r < a.rows_per_lane && row < rows) {
          const float* xv = kStaged ? staged_rows + row * a.stride : xg + row * a.ld;
          const float d = l2_squared_distance(cv, xv, a.dim);
          if (nearer(d, c0 + c, best[r], at[r])) best[r] = d, at[r] = c0 + c;
        }
      }
    }
  }

  __syncthreads();  // staging space becomes the partial winners
  float* part_d = smem;
  int* part_i = reinterpret_cast<int*>(smem + kWarps * tile);
#pragma unroll
  for (int r = 0; r < kMaxRowsPerLane; ++r)
    if (r < a.rows_per_lane) {
      part_d[warp * tile + r * 32 + lane] = best[r];
      part_i[warp * tile + r * 32 + lane] = at[r];
    }
  __syncthreads();
  for (int row = threadIdx.x; row < rows; row += kThreads) {
    float d = part_d[row];
    int i = part_i[row];
    for (int w = 1; w < kWarps; ++w)
      if (nearer(part_d[w * tile + row], part_i[w * tile + row], d, i))
        d = part_d[w * tile + row], i = part_i[w * tile + row];
    a.out[std::int64_t(g) * a.n + r0 + row] = i;
  }
}

// Cosine: every row to unit length, one thread per row (the CPU's code).
__global__ void normalize_kernel(float* x, std::int64_t n, int dim) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    normalize_row(x + i * dim, dim);
}

__global__ void residual_kernel(const float* x, const std::int32_t* list_of, const float* centroids,
                                std::int64_t n, int dim, float* out) {
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n * dim;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e / dim;
    out[e] = x[e] - centroids[std::int64_t(list_of[i]) * dim + (e - i * dim)];
  }
}

__global__ void pack_kernel(const std::int32_t* sub, std::int64_t n, int m, int nbits, int code_size,
                            std::uint8_t* codes) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    pack_codes(sub + i, n, m, nbits, code_size, codes + i * code_size);
}

// Page-locked host memory, so that copies are asynchronous and overlap.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t count) {
    if (count) GKNN_CUDA(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// One encode batch in flight: its stream and buffers. The destructor waits
// for the stream before the buffers go (an error or a cancel can leave work
// queued).
struct Slot {
  Slot(std::int64_t rows, const Params& p)
      : in(rows * p.dim),
        x(rows * p.dim),
        resid(rows * p.dim),
        list_of(rows),
        sub(rows * p.m),
        codes(rows * code_size(p)),
        out_list(rows),
        out_codes(rows * code_size(p)) {}
  ~Slot() { cudaStreamSynchronize(stream.s); }
  OwnedStream stream;
  PinnedBuffer<float> in;
  DeviceBuffer<float> x, resid;
  DeviceBuffer<std::int32_t> list_of, sub;
  DeviceBuffer<std::uint8_t> codes;
  PinnedBuffer<std::int32_t> out_list;
  PinnedBuffer<std::uint8_t> out_codes;
  std::int64_t first = 0, rows = 0;  // the batch in flight; rows == 0: none
};

}  // namespace

// Launches the direct kernel on s.n device rows against device centroids.
void nearest_direct_gpu(const Groups& s, const float* x, const float* centroids, std::int32_t* out,
                        cudaStream_t stream) {
  if (s.n == 0) return;
  int device = 0, optin = 0, sms = 0;
  GKNN_CUDA(cudaGetDevice(&device));
  GKNN_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  GKNN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int chunk = std::min(s.k, std::max(kWarps, kChunkBytes / int(sizeof(float) * s.dim)));
  const std::int64_t lane_rows = (s.n + 31) / 32;  // rows per lane if one block took them all
  int rpl = int(std::min<std::int64_t>(kMaxRowsPerLane, lane_rows));
  const bool staged = nearest_smem(1, chunk, s.dim, true) <= std::size_t(optin);
  if (staged)
    while (nearest_smem(rpl, chunk, s.dim, true) > std::size_t(optin)) --rpl;
  else
    rpl = std::min(rpl, 4);  // only the partials use shared memory; rows come from L1/L2
  auto kernel = staged ? nearest_kernel<true> : nearest_kernel<false>;
  GKNN_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  int per_sm = 0;
  GKNN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                          nearest_smem(rpl, chunk, s.dim, staged)));
  // The fewest rows per lane that keep the same number of waves.
  const std::int64_t slots = std::int64_t(std::max(per_sm, 1)) * sms;
  const std::int64_t blocks = (lane_rows + rpl - 1) / rpl * s.groups;
  const std::int64_t waves = (blocks + slots - 1) / slots;
  const std::int64_t per_group = std::max<std::int64_t>(1, waves * slots / s.groups);
  rpl = int(std::min<std::int64_t>(rpl, (lane_rows + per_group - 1) / per_group));

  const NearestArgs a{x, s.n, s.ld, centroids, s.k, s.dim, out, rpl, chunk, row_stride(s.dim)};
  const dim3 grid(unsigned((s.n + 32 * rpl - 1) / (32 * rpl)), unsigned(s.groups));
  kernel<<<grid, kThreads, nearest_smem(rpl, chunk, s.dim, staged), stream>>>(a);
  GKNN_CUDA(cudaGetLastError());
}

struct Assigner::Device {
  Device(std::int64_t count, AssignPath path) : rows(count), assign(path) {}
  OwnedStream stream;
  DeviceBuffer<float> rows;
  DeviceAssign assign;
  int ordinal = 0;
};

Assigner::Assigner(const float* rows, std::int64_t n, std::int64_t ld, int device, AssignPath path)
    : rows_(rows), n_(n), ld_(ld) {
  if (device < 0) return;
  use_device(device);
  device_ = std::make_unique<Device>(n * ld, path);
  device_->ordinal = device;
  GKNN_CUDA(cudaMemcpy(device_->rows.get(), rows, sizeof(float) * n * ld, cudaMemcpyHostToDevice));
}

Assigner::~Assigner() = default;

void Assigner::nearest(const float* centroids, int k, int dim, int groups, std::int32_t* out) {
  const Groups s{n_, ld_, dim, k, groups};
  if (!device_) return nearest_cpu(s, rows_, centroids, out);
  GKNN_CUDA(cudaSetDevice(device_->ordinal));
  const cudaStream_t st = device_->stream.s;
  const std::size_t nc = std::size_t(groups) * k * dim, nl = std::size_t(groups) * n_;
  AsyncBuffer<float> d_c(nc, st);
  AsyncBuffer<std::int32_t> d_l(nl, st);
  GKNN_CUDA(cudaMemcpyAsync(d_c.get(), centroids, sizeof(float) * nc, cudaMemcpyHostToDevice, st));
  device_->assign.nearest(s, device_->rows.get(), d_c.get(), d_l.get(), st);
  GKNN_CUDA(cudaMemcpyAsync(out, d_l.get(), sizeof(std::int32_t) * nl, cudaMemcpyDeviceToHost, st));
  GKNN_CUDA(cudaStreamSynchronize(st));
}

void encode_gpu(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
                std::uint8_t* codes, const Progress& progress) {
  if (n == 0) return;
  use_device(device);
  const Params& p = q.params;
  const int cs = code_size(p);
  DeviceBuffer<float> centroids(q.centroids.size()), codebooks(q.codebooks.size());
  GKNN_CUDA(cudaMemcpy(centroids.get(), q.centroids.data(), sizeof(float) * q.centroids.size(),
                       cudaMemcpyHostToDevice));
  GKNN_CUDA(cudaMemcpy(codebooks.get(), q.codebooks.data(), sizeof(float) * q.codebooks.size(),
                       cudaMemcpyHostToDevice));
  const std::int64_t batch = std::min({n, kBatchRows, std::max<std::int64_t>(1, kBatchFloats / p.dim)});
  DeviceAssign assign(AssignPath::Auto);
  Slot slots[2] = {Slot(batch, p), Slot(batch, p)};

  // Batch b runs in slot b % 2: while the GPU works on one, the host hands
  // the other's results over and stages its next input.
  auto launch = [&](Slot& s, int slot, std::int64_t first, std::int64_t rows) {
    const cudaStream_t st = s.stream.s;
    std::memcpy(s.in.get(), x + first * p.dim, sizeof(float) * rows * p.dim);
    GKNN_CUDA(
        cudaMemcpyAsync(s.x.get(), s.in.get(), sizeof(float) * rows * p.dim, cudaMemcpyHostToDevice, st));
    if (p.metric == Metric::Cosine)
      normalize_kernel<<<grid_for(rows, 256), 256, 0, st>>>(s.x.get(), rows, p.dim);
    assign.nearest({rows, p.dim, p.dim, p.lists, 1}, s.x.get(), centroids.get(), s.list_of.get(), st, slot);
    residual_kernel<<<grid_for(rows * p.dim, 256), 256, 0, st>>>(s.x.get(), s.list_of.get(), centroids.get(),
                                                                 rows, p.dim, s.resid.get());
    assign.nearest({rows, p.dim, dsub(p), ksub(p), p.m}, s.resid.get(), codebooks.get(), s.sub.get(), st,
                   slot);
    pack_kernel<<<grid_for(rows, 256), 256, 0, st>>>(s.sub.get(), rows, p.m, p.nbits, cs, s.codes.get());
    GKNN_CUDA(cudaGetLastError());
    GKNN_CUDA(cudaMemcpyAsync(s.out_list.get(), s.list_of.get(), sizeof(std::int32_t) * rows,
                              cudaMemcpyDeviceToHost, st));
    GKNN_CUDA(cudaMemcpyAsync(s.out_codes.get(), s.codes.get(), std::size_t(rows) * cs,
                              cudaMemcpyDeviceToHost, st));
    s.first = first, s.rows = rows;
  };
  auto finish = [&](Slot& s) {
    if (s.rows == 0) return;
    GKNN_CUDA(cudaStreamSynchronize(s.stream.s));
    std::memcpy(list_of + s.first, s.out_list.get(), sizeof(std::int32_t) * s.rows);
    std::memcpy(codes + s.first * cs, s.out_codes.get(), std::size_t(s.rows) * cs);
    const std::int64_t done = s.first + s.rows;
    s.rows = 0;
    check_progress(progress, Phase::Encode, done, n);
  };
  std::int64_t b = 0;
  for (std::int64_t first = 0; first < n; first += batch, ++b) {
    finish(slots[b % 2]);
    launch(slots[b % 2], int(b % 2), first, std::min(batch, n - first));
  }
  finish(slots[b % 2]);  // the older of the two in flight
  finish(slots[(b + 1) % 2]);
}

}  // namespace gknn::ivfpq
