// DeviceImage: IVF-PQ search on the GPU (Faiss §5.2-5.3), with the results
// of search_cpu bit for bit. Per batch of queries:
//   1. coarse keys of every (query, list), eight threads each (scoring.h's
//      bits), and the `probes` best lists per query by the project's row
//      selection;
//   2. each query's candidate row is laid out from the probed lists' sizes
//      (probe p's list at [starts[p], starts[p+1]), scoring.h), on the
//      device: the stages queue one after another on the calling thread's
//      stream with one wait, for the results, at the end;
//   3. one block per (query, probe) builds the LUT in shared memory (fp32;
//      fp16 only where fp32 does not fit) and scores its list's codes;
//   4. the k best columns per row (ties by column = probe rank, position),
//      mapped back to ids.
// Steps 1-4 are the PQ stage (Impl::PqStage) that search_refined also runs.
// The Impl (device_image.h) also holds the image's vectors when it has them,
// in id order (refine_cuda.cu and exact_cuda.cu search them).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "distance/group_distance.cuh"
#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/runtime.h"
#include "gknn/select.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"
#include "ivfpq/device_image.h"
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

// Coarse keys, a group of eight threads per (query, list): coarse_key's
// bits (group_distance.cuh); the grid covers whole groups.
__global__ void coarse_keys(const float* queries, std::int64_t nq, const float* centroids, int lists, int dim,
                            Metric metric, float* keys) {
  const int lane = threadIdx.x % kGroupLanes;
  const std::int64_t groups = std::int64_t(gridDim.x) * blockDim.x / kGroupLanes;
  for (std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kGroupLanes; i < nq * lists;
       i += groups) {
    const float* q = queries + (i / lists) * dim;
    const float* c = centroids + (i % lists) * dim;
    const float key = metric == Metric::InnerProduct ? -group_inner_product(q, c, dim, lane)
                                                     : group_l2_squared(q, c, dim, lane);
    if (lane == 0) keys[i] = key;
  }
}

// Each query's candidate row from its probed lists' sizes (probe_starts on
// the device, so the host need not wait for the probes).
__global__ void row_starts(const std::uint32_t* probe_lists, std::int64_t rows, int probes,
                           const std::int64_t* offsets, std::int64_t* starts) {
  for (std::int64_t q = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < rows;
       q += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t* lists = probe_lists + q * probes;
    std::int64_t* st = starts + q * (probes + 1);
    std::int64_t at = 0;
    for (int p = 0; p < probes; ++p) {
      st[p] = at;
      at += offsets[lists[p] + 1] - offsets[lists[p]];
    }
    st[probes] = at;
  }
}

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

// Rows of vectors staged per copy when the image's vectors are uploaded in
// id order (bounds the host staging buffer to about 64 MiB).
std::int64_t staging_rows(int dim) { return std::max<std::int64_t>(1, (std::int64_t(1) << 24) / dim); }

// Bytes of one stored row (stored_rows.h's layouts).
std::size_t stored_row_bytes(const Image& image) {
  const int dim = image.quantizer.params.dim;
  switch (vector_element(image)) {
    case VectorElement::Float16:
      return sizeof(std::uint16_t) * dim;
    case VectorElement::Bit:
      return std::size_t(bit_row_bytes(dim));
    case VectorElement::Float32:
      break;
  }
  return sizeof(float) * dim;
}

}  // namespace

DeviceImage::Impl::Impl(const Image& image, int dev)
    : device(activate(image, dev)),
      params(image.quantizer.params),
      entries(std::int64_t(image.ids.size())),
      offsets(image.offsets),
      centroids(image.quantizer.centroids.size()),
      codebooks(image.quantizer.codebooks.size()),
      codes(image.codes.size()),
      ids(image.ids.size()),
      d_offsets(image.offsets.size()),
      with_vectors(ivfpq::has_vectors(image)),
      element(vector_element(image)),
      vectors(with_vectors && element == VectorElement::Float32 ? image.vectors.size() : 0),
      packed(with_vectors && element != VectorElement::Float32 ? stored_row_bytes(image) * image.ids.size()
                                                               : 0),
      rank(with_vectors ? image.ids.size() : 0),
      ranked_ids(with_vectors ? image.ids.size() : 0) {
  keep_pool_memory(device);
  upload(centroids, image.quantizer.centroids);
  upload(codebooks, image.quantizer.codebooks);
  upload(codes, image.codes);
  upload(ids, image.ids);
  upload(d_offsets, image.offsets);
  if (with_vectors) upload_vectors(image);
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

// The vectors go up in id order (a stable sort: equal ids keep entry
// order), through a bounded staging buffer; rank and ranked_ids with them.
// Rows are copied as bytes: floats, binary16 values or bit strings.
void DeviceImage::Impl::upload_vectors(const Image& image) {
  const std::size_t row = stored_row_bytes(image);
  const auto* src = element == VectorElement::Float16
                        ? reinterpret_cast<const char*>(image.half_vectors.data())
                    : element == VectorElement::Bit ? reinterpret_cast<const char*>(image.bit_vectors.data())
                                                    : reinterpret_cast<const char*>(image.vectors.data());
  char* dst = element == VectorElement::Float32 ? reinterpret_cast<char*>(vectors.get())
                                                : reinterpret_cast<char*>(packed.get());
  std::vector<std::int64_t> order(entries);
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return image.ids[a] < image.ids[b]; });
  std::vector<std::int64_t> host(entries);
  for (std::int64_t r = 0; r < entries; ++r) host[order[r]] = r;
  upload(rank, host);
  for (std::int64_t r = 0; r < entries; ++r) host[r] = image.ids[order[r]];
  upload(ranked_ids, host);
  const std::int64_t chunk = staging_rows(int((row + 3) / 4));
  std::vector<char> staged(std::min(chunk, entries) * row);
  for (std::int64_t r0 = 0; r0 < entries; r0 += chunk) {
    const std::int64_t n = std::min(chunk, entries - r0);
    for (std::int64_t r = 0; r < n; ++r) std::copy_n(src + order[r0 + r] * row, row, staged.data() + r * row);
    GKNN_CUDA(cudaMemcpy(dst + r0 * row, staged.data(), row * n, cudaMemcpyHostToDevice));
  }
}

std::int64_t DeviceImage::Impl::batch_rows(int probes, std::int64_t row_elems) const {
  const std::int64_t row = std::max<std::int64_t>({params.dim, params.lists, largest[probes], row_elems});
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

std::int64_t DeviceImage::Impl::PqStage::candidate_row(const Impl& im, int probes) {
  const std::int64_t ld = im.largest[probes];
  if (ld >= std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: 2^32 - 1 or more candidates for one query");
  return ld;
}

DeviceImage::Impl::PqStage::Layout DeviceImage::Impl::PqStage::lay_out(const Impl& im, std::int64_t rows,
                                                                       int probes, int k) {
  BlockLayout l;
  Layout at{};
  at.queries = l.add<float>(rows * im.params.dim);
  at.probe_keys = l.add<float>(rows * probes);
  at.probe_lists = l.add<std::uint32_t>(rows * probes);
  at.starts = l.add<std::int64_t>(rows * (probes + 1));
  at.keys = l.add<float>(rows * k);
  at.cols = l.add<std::uint32_t>(rows * k);
  at.ckeys = l.add<float>(rows * im.params.lists);
  at.cand = l.add<float>(rows * candidate_row(im, probes));
  at.bytes = l.bytes;
  return at;
}

DeviceImage::Impl::PqStage::PqStage(const Impl& im, const float* host_queries, std::int64_t rows_,
                                    int probes_, int k_, cudaStream_t s)
    : PqStage(im, host_queries, rows_, probes_, k_, s, lay_out(im, rows_, probes_, k_)) {}

DeviceImage::Impl::PqStage::PqStage(const Impl& im, const float* host_queries, std::int64_t rows_,
                                    int probes_, int k_, cudaStream_t s, const Layout& at)
    : rows(rows_),
      probes(probes_),
      k(k_),
      block(at.bytes, s),
      queries(in_block<float>(block, at.queries)),
      probe_keys(in_block<float>(block, at.probe_keys)),
      probe_lists(in_block<std::uint32_t>(block, at.probe_lists)),
      starts(in_block<std::int64_t>(block, at.starts)),
      keys(in_block<float>(block, at.keys)),
      cols(in_block<std::uint32_t>(block, at.cols)) {
  const Params& params = im.params;
  const int dim = params.dim, lists = params.lists;
  const std::vector<float> hq = prepared_rows(params, host_queries, rows);
  float* const ckeys = in_block<float>(block, at.ckeys);
  upload_async(queries, hq.data(), sizeof(float) * hq.size(), 0, s);
  coarse_keys<<<grid_for(rows * lists * kGroupLanes, kThreads), kThreads, 0, s>>>(
      queries, rows, im.centroids.get(), lists, dim, params.metric, ckeys);
  GKNN_CUDA(cudaGetLastError());
  select_best(ckeys, rows, lists, probes, probe_keys, probe_lists, s);

  // Candidate rows (probe p's list at [starts[p], starts[p+1])), laid out
  // on the device; every row is as long as the `probes` largest lists
  // together, so the host sizes the buffer without waiting for the probes.
  row_starts<<<grid_for(rows, kThreads), kThreads, 0, s>>>(probe_lists, rows, probes, im.d_offsets.get(),
                                                           starts);
  GKNN_CUDA(cudaGetLastError());
  const std::int64_t ld = im.largest[probes];

  // NaN everywhere first: columns past a row's candidates rank after them.
  float* const cand = in_block<float>(block, at.cand);  // rows x ld (laid out in lay_out)
  if (ld > 0) {
    GKNN_CUDA(cudaMemsetAsync(cand, 0xff, sizeof(float) * rows * ld, s));
    const ScanArgs a{queries,
                     im.centroids.get(),
                     im.codebooks.get(),
                     im.codes.get(),
                     im.d_offsets.get(),
                     probe_lists,
                     probe_keys,
                     starts,
                     probes,
                     dim,
                     params.m,
                     ksub(params),
                     dsub(params),
                     params.nbits,
                     code_size(params),
                     params.metric,
                     ld,
                     cand};
    im.launch_scan(a, rows, s);
  }
  select_best(cand, rows, ld, k, keys, cols, s);
}

void DeviceImage::Impl::search_batch(const float* queries, std::int64_t rows, int probes, int k,
                                     cudaStream_t s, std::int64_t* out_ids, float* out_dist) const {
  const PqStage st(*this, queries, rows, probes, k, s);
  // The answers, ids then distances, brought back by one copy.
  const std::size_t id_bytes = sizeof(std::int64_t) * rows * k, dist_bytes = sizeof(float) * rows * k;
  BlockLayout layout;
  const std::size_t at = layout.add_span(id_bytes, dist_bytes);
  AsyncBuffer<unsigned char> out(layout.bytes, s);
  auto* oids = in_block<std::int64_t>(out, at);
  auto* odist = in_block<float>(out, at + span_offset(id_bytes));
  map_results<<<grid_for(rows * k, kThreads), kThreads, 0, s>>>(
      st.keys, st.cols, rows, k, st.starts, probes, st.probe_lists, d_offsets.get(), ids.get(), oids, odist);
  GKNN_CUDA(cudaGetLastError());
  download_span_and_wait(out_ids, id_bytes, out_dist, dist_bytes, out.get() + at, 1, s);
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
  const cudaStream_t stream = thread_stream(impl_->device);
  for (std::int64_t q0 = 0; q0 < nq; q0 += batch) {
    const std::int64_t rows = std::min(batch, nq - q0);
    impl_->search_batch(queries + q0 * impl_->params.dim, rows, probes, sp.k, stream, ids + q0 * sp.k,
                        distances + q0 * sp.k);
  }
}

std::size_t DeviceImage::device_bytes() const {
  if (!impl_) return 0;
  const Impl& im = *impl_;
  std::size_t lazy = 0;  // what the first exact searches made
  {
    std::lock_guard<std::mutex> lock(im.gemm_mu);
    if (im.gemm) lazy = im.gemm->bytes();
  }
  {
    std::lock_guard<std::mutex> lock(im.prune_mu);
    if (im.prune) lazy += im.prune->bytes();
  }
  return sizeof(float) * (im.centroids.size() + im.codebooks.size() + im.vectors.size()) + im.packed.size() +
         im.codes.size() +
         sizeof(std::int64_t) *
             (im.ids.size() + im.d_offsets.size() + im.rank.size() + im.ranked_ids.size()) +
         lazy;
}

bool DeviceImage::fp16_lut() const { return impl_ && impl_->fp16; }

bool DeviceImage::has_vectors() const { return impl_ && impl_->with_vectors; }

}  // namespace gknn::ivfpq
