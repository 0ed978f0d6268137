// The kNN graph of a build on a GPU (knn_graph.cpp chooses): exact for up
// to kExactKnnGpuMaxN nodes; above, the nodes in k-means lists,
// each list's nodes searched exactly among the nodes of the lists nearest to
// its own (its own first). Every distance is exact (gknn/knn.h's exact
// search over the candidate rows, ties put by id), so a row holds the true
// nearest nodes of its candidates, in (distance, id) order; a neighbour
// outside them is missed, which CAGRA's optimisation tolerates (the paper
// starts from NN-descent's approximate graph).
//
// Both replaced the GPU IVF-PQ search of every node (which the CPU build
// keeps): H200, 60,000 x 784: IVF-PQ 4.3 s, exact 0.35 s (recall@64 of the
// rows 0.954 -> 1.0); 200,000 x 128: 2.9 s against 0.75 s; the exact graph
// grows with n^2, hence the lists above (1M x 128: IVF-PQ 16.4 s;
// bench/results/graph-build-H200-2026-11-28.md).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "distance/knn_resident.h"
#include "graph/common.h"
#include "ivfpq/assign.h"
#include "ivfpq/kmeans.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

constexpr std::int64_t kExactChunk = 1 << 14;  // nodes between progress calls
constexpr int kKmeansIters = 10;
constexpr int kListThreads = 4;
constexpr std::int64_t kSamplePerList = 64;  // k-means sample: rows per list

// rows[i] = all[ids[i]] for n rows of dim floats.
__global__ void gather_rows(const float* all, const std::int64_t* ids, std::int64_t n, int dim, float* rows) {
  const std::int64_t total = n * dim;
  for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = t / dim;
    rows[t] = all[ids[r] * dim + (t - r * dim)];
  }
}

// Coarse centroids (lists x dim) from a strided sample, as ivfpq's coarse
// quantizer trains them; every node's list in list_of.
std::vector<float> cluster(const float* v, std::int64_t n, int dim, int lists, std::uint64_t seed, int device,
                           std::vector<std::int32_t>& list_of) {
  const std::int64_t sample_n = std::min<std::int64_t>(n, std::int64_t(lists) * kSamplePerList);
  std::vector<float> sample(std::size_t(sample_n) * dim);
  for (std::int64_t i = 0; i < sample_n; ++i)
    std::copy_n(v + (i * n / sample_n) * dim, dim, &sample[i * dim]);
  ivfpq::KmeansSpec spec;
  spec.points = sample.data();
  spec.n = sample_n;
  spec.ld = dim;
  spec.dim = dim;
  spec.k = lists;
  spec.iters = kKmeansIters;
  spec.seed = seed;
  std::vector<float> centroids;
  {
    ivfpq::Assigner on_sample(sample.data(), sample_n, dim, device);
    centroids = ivfpq::kmeans(spec, on_sample, [](int, int) {});
  }
  list_of.resize(n);
  ivfpq::Assigner on_all(v, n, dim, device);
  on_all.nearest(centroids.data(), lists, dim, 1, list_of.data());
  return centroids;
}

// The `probes` lists nearest to list l's centroid (squared L2 between
// centroids), l itself first.
std::vector<int> probes_of(const std::vector<float>& c, int lists, int dim, int l, int probes) {
  std::vector<std::pair<double, int>> d;
  d.reserve(lists);
  for (int o = 0; o < lists; ++o) {
    if (o == l) continue;
    double s = 0;
    for (int i = 0; i < dim; ++i) {
      const double t = double(c[std::size_t(l) * dim + i]) - c[std::size_t(o) * dim + i];
      s += t * t;
    }
    d.push_back({s, o});
  }
  const int keep = std::min<int>(probes - 1, int(d.size()));
  std::partial_sort(d.begin(), d.begin() + keep, d.end());
  std::vector<int> out{l};
  for (int i = 0; i < keep; ++i) out.push_back(d[i].second);
  return out;
}

// One thread's buffers for the lists search.
struct ListBuffers {
  ListBuffers(std::int64_t most_cand, std::int64_t most_members, int dim, int k)
      : rows(std::size_t(most_cand) * dim),
        d_ids(most_cand),
        ids(std::size_t(most_members) * k),
        queries(std::size_t(most_members) * dim),
        dist(ids.size()) {}
  DeviceBuffer<float> rows;
  DeviceBuffer<std::int64_t> d_ids;
  std::vector<std::int64_t> cand, ids;
  std::vector<float> queries;
  std::vector<double> dist;
  std::vector<Scored> sorted;
};

// The search of one list's nodes among its probes' nodes, rows written into
// knn (each node's row is written by its own list's search only).
struct ListSearch {
  const float* v;    // host
  const float* all;  // the same rows on the device
  int dim, k, kdeg;
  Metric metric;
  int device;
  const std::vector<std::int64_t>* start;
  const std::vector<std::int64_t>* member;
  const std::vector<std::vector<int>>* probe;
  std::vector<std::uint32_t>* knn;

  // The list's node count.
  std::int64_t run(int l, ListBuffers& b) const {
    const std::int64_t first = (*start)[l], nq = (*start)[l + 1] - first;
    if (nq == 0) return 0;
    b.cand.clear();
    for (int o : (*probe)[l])
      b.cand.insert(b.cand.end(), member->begin() + (*start)[o], member->begin() + (*start)[o + 1]);
    const std::int64_t nc = std::int64_t(b.cand.size());
    const cudaStream_t s = thread_stream(device);
    GKNN_CUDA(
        cudaMemcpyAsync(b.d_ids.get(), b.cand.data(), sizeof(std::int64_t) * nc, cudaMemcpyHostToDevice, s));
    gather_rows<<<unsigned(std::min<std::int64_t>((nc * dim + 255) / 256, 4096)), 256, 0, s>>>(
        all, b.d_ids.get(), nc, dim, b.rows.get());
    GKNN_CUDA(cudaGetLastError());
    for (std::int64_t i = 0; i < nq; ++i)
      std::copy_n(v + (*member)[first + i] * dim, dim, &b.queries[i * dim]);
    KnnRequest r;
    r.base = b.rows.get();
    r.n = nc;
    r.queries = b.queries.data();
    r.nq = nq;
    r.dim = dim;
    r.k = k;
    r.metric = metric;
    exact_knn_resident(r, device, b.ids.data(), b.dist.data(), {}, b.d_ids.get());
    for (std::int64_t i = 0; i < nq; ++i) {
      // Ties came back by candidate position: put them by id, the graph's order.
      std::int64_t* row = &b.ids[i * k];
      b.sorted.clear();
      for (int j = 0; j < k && row[j] >= 0; ++j)
        b.sorted.push_back({b.dist[i * k + j], std::uint32_t(row[j])});
      std::sort(b.sorted.begin(), b.sorted.end());
      for (std::size_t j = 0; j < b.sorted.size(); ++j) row[j] = b.sorted[j].id;
      const std::int64_t x = (*member)[first + i];
      take_knn_row(x, row, k, kdeg, knn->data() + x * kdeg);
    }
    return nq;
  }
};

}  // namespace

// Chunks of nodes as query batches over the base uploaded once (the GEMM
// path's half of it made once as well).
void knn_exact_gpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, int device,
                   const Progress& progress, std::vector<std::uint32_t>& knn) {
  check_progress(progress, kPhaseKnn, 0, n);
  use_device(device);
  const int k = kdeg + 1;  // each node finds itself
  DeviceBuffer<float> all(std::size_t(n) * p.dim);
  GKNN_CUDA(cudaMemcpy(all.get(), v, sizeof(float) * n * p.dim, cudaMemcpyHostToDevice));
  std::unique_ptr<GemmBase> prepared;
  const GemmBaseSource source = [&]() -> const GemmBase* {
    if (!prepared) prepared = std::make_unique<GemmBase>(all.get(), n, p.dim, p.metric, device);
    return prepared.get();
  };
  std::vector<std::int64_t> ids(std::size_t(kExactChunk) * k);
  std::vector<double> d(ids.size());
  for (std::int64_t b = 0; b < n; b += kExactChunk) {
    const std::int64_t e = std::min(n, b + kExactChunk);
    KnnRequest r;
    r.base = all.get();
    r.n = n;
    r.queries = v + b * p.dim;
    r.nq = e - b;
    r.dim = p.dim;
    r.k = k;
    r.metric = p.metric;
    exact_knn_resident(r, device, ids.data(), d.data(), source);
    for (std::int64_t x = b; x < e; ++x)
      take_knn_row(x, ids.data() + (x - b) * k, k, kdeg, knn.data() + x * kdeg);
    check_progress(progress, kPhaseKnn, e, n);
  }
}

void knn_lists_gpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, int device,
                   const Progress& progress, std::vector<std::uint32_t>& knn, int lists, int probes) {
  check_progress(progress, kPhaseKnn, 0, n);
  use_device(device);
  const int dim = p.dim;
  lists = int(std::clamp<std::int64_t>(lists, 1, n));
  std::vector<std::int32_t> list_of;
  const std::vector<float> centroids = cluster(v, n, dim, lists, mix64(p.seed), device, list_of);
  // Members of each list, ascending ids.
  std::vector<std::int64_t> start(lists + 1, 0), member(n);
  for (std::int32_t l : list_of) ++start[l + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) member[fill[list_of[i]]++] = i;
  }
  std::vector<std::vector<int>> probe(lists);
  parallel_rows(lists, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t l = b; l < e; ++l) probe[l] = probes_of(centroids, lists, dim, int(l), probes);
  });
  std::int64_t most_cand = 0, most_members = 0;
  for (int l = 0; l < lists; ++l) {
    std::int64_t c = 0;
    for (int o : probe[l]) c += start[o + 1] - start[o];
    most_cand = std::max(most_cand, c);
    most_members = std::max(most_members, start[l + 1] - start[l]);
  }
  DeviceBuffer<float> all(std::size_t(n) * dim);
  GKNN_CUDA(cudaMemcpy(all.get(), v, sizeof(float) * n * dim, cudaMemcpyHostToDevice));
  const ListSearch search{v, all.get(), dim, kdeg + 1, kdeg, p.metric, device, &start, &member, &probe, &knn};
  // Lists taken in turn by kListThreads threads, each with its own streams
  // and buffers (a list's search waits for its results: one thread left the
  // GPU idle between them); progress is reported, and a cancel seen, by
  // the calling thread between its own lists.
  std::atomic<int> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failed;
  std::mutex failed_mu;
  auto work = [&](bool report) {
    try {
      use_device(device);  // a new thread starts on device 0
      ListBuffers buf(most_cand, most_members, dim, kdeg + 1);
      for (int l; !stop.load() && (l = next.fetch_add(1)) < lists;) {
        done += search.run(l, buf);
        if (report) check_progress(progress, kPhaseKnn, done.load(), n);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failed_mu);
      if (!failed) failed = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < kListThreads; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
  check_progress(progress, kPhaseKnn, n, n);
}

}  // namespace gknn::graph
