// DeviceImage: IVF-PQ search on the GPU (Faiss §5.2-5.3), with the results
// of search_cpu bit for bit. Per batch of queries:
//   1. coarse keys of every (query, list), one thread each (scoring.h), and
//      the `probes` best lists per query by the project's row selection;
//   2. the host lays out each query's candidate row from the probed lists'
//      sizes (probe p's list at [starts[p], starts[p+1]), scoring.h);
//   3. one block per (query, probe) builds the LUT in shared memory (fp32;
//      fp16 only where fp32 does not fit) and scores its list's codes;
//   4. the k best columns per row (ties by column = probe rank, position),
//      mapped back to ids.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/runtime.h"
#include "gknn/select.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"
#include "ivfpq/scoring.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::ivfpq {
namespace {

constexpr int kThreads = 256;
// Elements of the largest per-batch buffer (coarse keys or candidate rows).
constexpr std::int64_t kBatchElems = std::int64_t(1) << 26;
constexpr std::int64_t kMaxGridY = 65535;

// The LUT kernel's shared memory: lut_input (dim floats, 16-byte aligned),
// then m x ksub entries.
__host__ __device__ inline std::size_t vec_bytes(int dim) {
  return (std::size_t(dim) * sizeof(float) + 15) / 16 * 16;
}
std::size_t scan_smem(const Params& p, std::size_t entry) {
  return vec_bytes(p.dim) + std::size_t(p.m) * ksub(p) * entry;
}

__global__ void coarse_keys(const float* queries, std::int64_t nq, const float* centroids, int lists, int dim,
                            Metric metric, float* keys) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nq * lists;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t q = i / lists, l = i % lists;
    keys[i] = coarse_key(metric, queries + q * dim, centroids + l * dim, dim);
  }
}

struct ScanArgs {
  const float* queries;       // rows x dim, prepared
  const float* centroids;     // lists x dim
  const float* codebooks;     // m x ksub x dsub
  const std::uint8_t* codes;  // entries x code_size
  const std::int64_t* offsets;
  const std::uint32_t* probe_lists;  // rows x probes
  const float* probe_keys;           // rows x probes (the lists' coarse keys)
  const std::int64_t* starts;        // rows x (probes + 1)
  int probes, dim, m, ksub, dsub, nbits, code_size;
  Metric metric;
  std::int64_t ld;  // candidate row length
  float* cand;      // rows x ld
};

__device__ __forceinline__ void store_lut(float* lut, int e, float v) { lut[e] = v; }
__device__ __forceinline__ void store_lut(__half* lut, int e, float v) { lut[e] = __float2half_rn(v); }
__device__ __forceinline__ float load_lut(const float* lut, int e) { return lut[e]; }
__device__ __forceinline__ float load_lut(const __half* lut, int e) { return __half2float(lut[e]); }

// One block per (probe, query): LUT of that list in shared memory, then the
// list's entries scored, one thread per entry, LUT summed over j in order.
template <typename Lut>
__global__ void __launch_bounds__(kThreads) scan_lists(ScanArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* vec = reinterpret_cast<float*>(smem);
  Lut* lut = reinterpret_cast<Lut*>(smem + vec_bytes(a.dim));
  const std::int64_t q = blockIdx.y;
  const int p = blockIdx.x;
  const std::uint32_t list = a.probe_lists[q * a.probes + p];
  const float* query = a.queries + q * a.dim;
  const float* centroid = a.centroids + std::int64_t(list) * a.dim;
  for (int i = threadIdx.x; i < a.dim; i += blockDim.x) vec[i] = lut_input(a.metric, query[i], centroid[i]);
  __syncthreads();
  for (int e = threadIdx.x; e < a.m * a.ksub; e += blockDim.x)
    store_lut(
        lut, e,
        lut_entry(a.metric, vec + (e / a.ksub) * a.dsub, a.codebooks + std::int64_t(e) * a.dsub, a.dsub));
  __syncthreads();
  const std::int64_t begin = a.offsets[list], len = a.offsets[list + 1] - begin;
  float* out = a.cand + q * a.ld + a.starts[q * (a.probes + 1) + p];
  const float coarse = a.probe_keys[q * a.probes + p];
  for (std::int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    const std::uint8_t* code = a.codes + (begin + i) * a.code_size;
    float sum = 0.0f;
    for (int j = 0; j < a.m; ++j) sum += load_lut(lut, j * a.ksub + int(read_code(code, j, a.nbits)));
    out[i] = pq_distance(a.metric, coarse, sum);
  }
}

// Selected columns -> ids; a column past the row's candidates (or the
// selection's padding, ~0) is padding: id -1, distance NaN.
__global__ void map_results(const float* keys, const std::uint32_t* cols, std::int64_t rows, int k,
                            const std::int64_t* starts, int probes, const std::uint32_t* probe_lists,
                            const std::int64_t* offsets, const std::int64_t* ids, std::int64_t* out_ids,
                            float* out_dist) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * k;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t q = i / k, col = cols[i];
    const std::int64_t* st = starts + q * (probes + 1);
    if (col >= st[probes]) {
      out_ids[i] = -1;
      out_dist[i] = __int_as_float(0x7fc00000);  // the quiet NaN search_cpu writes
      continue;
    }
    const int p = probe_of(st, probes, col);
    out_ids[i] = ids[offsets[probe_lists[q * probes + p]] + col - st[p]];
    out_dist[i] = keys[i];
  }
}

// The k best columns of each row, (key, column) order, short rows padded
// with column ~0: select_rows_gpu up to its k limit, beyond it one
// select_topk_gpu per row (same order, so the same result).
void select_best(const float* keys, std::int64_t rows, std::int64_t len, int k, float* out_keys,
                 std::uint32_t* out_cols, cudaStream_t s) {
  if (k <= kMaxRowK)
    return select_rows_gpu<float, std::uint32_t>(keys, rows, len, len, k, SelectOrder::Smallest, out_keys,
                                                 out_cols, s);
  GKNN_CUDA(cudaMemsetAsync(out_cols, 0xff, sizeof(std::uint32_t) * rows * k, s));
  for (std::int64_t r = 0; r < rows; ++r)
    select_topk_gpu<float, std::uint32_t>(keys + r * len, nullptr, len, k, SelectOrder::Smallest,
                                          out_keys + r * k, out_cols + r * k, s);
}

template <typename T>
void upload(DeviceBuffer<T>& dst, const std::vector<T>& src) {
  if (!src.empty())
    GKNN_CUDA(cudaMemcpy(dst.get(), src.data(), sizeof(T) * src.size(), cudaMemcpyHostToDevice));
}

// Checks the image and makes `device` current; the first step of Impl's
// member initialisation, so every buffer is allocated on that device.
int activate(const Image& image, int device) {
  check_image(image);
  use_device(device);
  return device;
}

}  // namespace

struct DeviceImage::Impl {
  Impl(const Image& image, int dev);
  void search_batch(const float* queries, std::int64_t rows, int probes, int k, cudaStream_t s,
                    std::int64_t* ids, float* distances) const;
  std::int64_t batch_rows(int probes, int k) const;
  void launch_scan(const ScanArgs& a, std::int64_t rows, cudaStream_t s) const;

  int device;
  Params params;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> largest;  // largest[p]: entries in the p largest lists
  bool fp16 = false;
  DeviceBuffer<float> centroids, codebooks;
  DeviceBuffer<std::uint8_t> codes;
  DeviceBuffer<std::int64_t> ids, d_offsets;
};

DeviceImage::Impl::Impl(const Image& image, int dev)
    : device(activate(image, dev)),
      params(image.quantizer.params),
      offsets(image.offsets),
      centroids(image.quantizer.centroids.size()),
      codebooks(image.quantizer.codebooks.size()),
      codes(image.codes.size()),
      ids(image.ids.size()),
      d_offsets(image.offsets.size()) {
  upload(centroids, image.quantizer.centroids);
  upload(codebooks, image.quantizer.codebooks);
  upload(codes, image.codes);
  upload(ids, image.ids);
  upload(d_offsets, image.offsets);
  std::vector<std::int64_t> sizes(params.lists);
  for (int l = 0; l < params.lists; ++l) sizes[l] = offsets[l + 1] - offsets[l];
  std::sort(sizes.rbegin(), sizes.rend());
  largest.assign(params.lists + 1, 0);
  for (int l = 0; l < params.lists; ++l) largest[l + 1] = largest[l] + sizes[l];
  int optin = 0;
  GKNN_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  fp16 = scan_smem(params, sizeof(float)) > std::size_t(optin);
  if (scan_smem(params, sizeof(__half)) > std::size_t(optin))
    throw Error(ErrorCode::InvalidArgument,
                "ivfpq: the lookup table (m x 2^nbits) does not fit in GPU shared memory; search on the CPU");
}

// Queries per batch: the biggest buffer (queries, coarse keys, candidate rows
// bounded by the `probes` largest lists, or results) stays near kBatchElems.
std::int64_t DeviceImage::Impl::batch_rows(int probes, int k) const {
  const std::int64_t row = std::max<std::int64_t>({params.dim, params.lists, largest[probes], k});
  return std::clamp<std::int64_t>(kBatchElems / row, 1, kMaxGridY);
}

void DeviceImage::Impl::launch_scan(const ScanArgs& a, std::int64_t rows, cudaStream_t s) const {
  const dim3 grid(unsigned(a.probes), unsigned(rows));
  if (fp16) {
    const std::size_t bytes = scan_smem(params, sizeof(__half));
    GKNN_CUDA(
        cudaFuncSetAttribute(scan_lists<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    scan_lists<__half><<<grid, kThreads, bytes, s>>>(a);
  } else {
    const std::size_t bytes = scan_smem(params, sizeof(float));
    GKNN_CUDA(
        cudaFuncSetAttribute(scan_lists<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    scan_lists<float><<<grid, kThreads, bytes, s>>>(a);
  }
  GKNN_CUDA(cudaGetLastError());
}

void DeviceImage::Impl::search_batch(const float* queries, std::int64_t rows, int probes, int k,
                                     cudaStream_t s, std::int64_t* out_ids, float* out_dist) const {
  const int dim = params.dim, lists = params.lists;
  const std::vector<float> hq = prepared_rows(params, queries, rows);
  AsyncBuffer<float> d_q(hq.size(), s), ckeys(rows * lists, s), pkeys(rows * probes, s);
  AsyncBuffer<std::uint32_t> plists(rows * probes, s);
  GKNN_CUDA(cudaMemcpyAsync(d_q.get(), hq.data(), sizeof(float) * hq.size(), cudaMemcpyHostToDevice, s));
  coarse_keys<<<grid_for(rows * lists, kThreads), kThreads, 0, s>>>(d_q.get(), rows, centroids.get(), lists,
                                                                    dim, params.metric, ckeys.get());
  GKNN_CUDA(cudaGetLastError());
  select_best(ckeys.get(), rows, lists, probes, pkeys.get(), plists.get(), s);

  // Candidate rows, laid out on the host from the probed lists.
  std::vector<std::uint32_t> hl(rows * probes);
  GKNN_CUDA(
      cudaMemcpyAsync(hl.data(), plists.get(), sizeof(std::uint32_t) * hl.size(), cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaStreamSynchronize(s));
  std::vector<std::int64_t> starts(rows * (probes + 1));
  std::int64_t ld = 0;
  for (std::int64_t q = 0; q < rows; ++q) {
    probe_starts(offsets.data(), hl.data() + q * probes, probes, starts.data() + q * (probes + 1));
    ld = std::max(ld, starts[q * (probes + 1) + probes]);
  }
  if (ld >= std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: 2^32 - 1 or more candidates for one query");
  AsyncBuffer<std::int64_t> d_starts(starts.size(), s);
  GKNN_CUDA(cudaMemcpyAsync(d_starts.get(), starts.data(), sizeof(std::int64_t) * starts.size(),
                            cudaMemcpyHostToDevice, s));

  // NaN everywhere first: columns past a row's candidates rank after them.
  AsyncBuffer<float> cand(rows * ld, s);
  if (ld > 0) {
    GKNN_CUDA(cudaMemsetAsync(cand.get(), 0xff, sizeof(float) * rows * ld, s));
    const ScanArgs a{d_q.get(),
                     centroids.get(),
                     codebooks.get(),
                     codes.get(),
                     d_offsets.get(),
                     plists.get(),
                     pkeys.get(),
                     d_starts.get(),
                     probes,
                     dim,
                     params.m,
                     ksub(params),
                     dsub(params),
                     params.nbits,
                     code_size(params),
                     params.metric,
                     ld,
                     cand.get()};
    launch_scan(a, rows, s);
  }
  AsyncBuffer<float> okeys(rows * k, s), odist(rows * k, s);
  AsyncBuffer<std::uint32_t> ocols(rows * k, s);
  AsyncBuffer<std::int64_t> oids(rows * k, s);
  select_best(cand.get(), rows, ld, k, okeys.get(), ocols.get(), s);
  map_results<<<grid_for(rows * k, kThreads), kThreads, 0, s>>>(
      okeys.get(), ocols.get(), rows, k, d_starts.get(), probes, plists.get(), d_offsets.get(), ids.get(),
      oids.get(), odist.get());
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaMemcpyAsync(out_ids, oids.get(), sizeof(std::int64_t) * rows * k, cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaMemcpyAsync(out_dist, odist.get(), sizeof(float) * rows * k, cudaMemcpyDeviceToHost, s));
  GKNN_CUDA(cudaStreamSynchronize(s));
}

DeviceImage::DeviceImage(const Image& image, int device) : impl_(new Impl(image, device)) {}
DeviceImage::~DeviceImage() { delete impl_; }
DeviceImage::DeviceImage(DeviceImage&& other) noexcept : impl_(other.impl_) { other.impl_ = nullptr; }
DeviceImage& DeviceImage::operator=(DeviceImage&& other) noexcept {
  std::swap(impl_, other.impl_);
  return *this;
}

void DeviceImage::search(const float* queries, std::int64_t nq, const SearchParams& sp, std::int64_t* ids,
                         float* distances) const {
  check_search(queries, nq, sp, ids, distances);
  if (!impl_) throw Error(ErrorCode::InvalidArgument, "ivfpq: search on a moved-from DeviceImage");
  if (nq == 0 || sp.k == 0) return;
  GKNN_CUDA(cudaSetDevice(impl_->device));
  const int probes = std::min(sp.probes, impl_->params.lists);
  const std::int64_t batch = impl_->batch_rows(probes, sp.k);
  OwnedStream stream;
  for (std::int64_t q0 = 0; q0 < nq; q0 += batch) {
    const std::int64_t rows = std::min(batch, nq - q0);
    impl_->search_batch(queries + q0 * impl_->params.dim, rows, probes, sp.k, stream.s, ids + q0 * sp.k,
                        distances + q0 * sp.k);
  }
}

std::size_t DeviceImage::device_bytes() const {
  if (!impl_) return 0;
  return sizeof(float) * (impl_->centroids.size() + impl_->codebooks.size()) + impl_->codes.size() +
         sizeof(std::int64_t) * (impl_->ids.size() + impl_->d_offsets.size());
}

bool DeviceImage::fp16_lut() const { return impl_ && impl_->fp16; }

}  // namespace gknn::ivfpq
