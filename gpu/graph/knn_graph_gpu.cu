// The kNN graph of a build on a GPU (knn_graph.cpp chooses): exact for up
// to kExactKnnGpuMaxN nodes; above, the nodes in k-means lists, each list's
// nodes searched exactly among the nodes of the lists nearest to its own
// (its own first). Every distance is exact (gknn/knn.h's exact search over
// the candidate rows, which go in id order, so ties fall by id), so a row
// holds the true nearest nodes of its candidates, in (distance, id) order; a
// neighbour outside them is missed, which CAGRA's optimisation tolerates
// (the paper starts from NN-descent's approximate graph).
//
// Both replaced the GPU IVF-PQ search of every node (which the CPU build
// keeps): H200, 60,000 x 784: IVF-PQ 4.3 s, exact 0.35 s (recall@64 of the
// rows 0.954 -> 1.0); 200,000 x 128: 2.9 s against 0.75 s; the exact graph
// grows with n^2, hence the lists above (1M x 128: IVF-PQ 16.4 s, lists
// 3.2 s; bench/results/graph-build-H200-2026-11-28.md).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "distance/knn_resident.h"
#include "graph/common.h"
#include "ivfpq/assign.h"
#include "ivfpq/common.h"
#include "ivfpq/kmeans.h"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::graph {
namespace {

constexpr std::int64_t kExactChunk = 1 << 14;  // nodes between progress calls
constexpr int kKmeansIters = 10;
constexpr int kListThreads = 4;
constexpr std::int64_t kSamplePerList = 64;  // k-means sample: rows per list
// A list's nodes searched at most this many at a time: the exact search's
// distance tiles are two of (queries x 32,768) floats, 128 MiB a thread.
constexpr std::int64_t kListQueryChunk = 512;

// rows[i] = all[ids[i]] for n rows of dim floats.
__global__ void gather_rows(const float* all, const std::int64_t* ids, std::int64_t n, int dim, float* rows) {
  const std::int64_t total = n * dim;
  for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = t / dim;
    rows[t] = all[ids[r] * dim + (t - r * dim)];
  }
}

// Coarse centroids (lists x dim) by k-means over a strided sample, every
// node's list in list_of: L2 over the rows, normalised under cosine (as
// ivfpq's coarse quantizer: else the lists would group rows by norm).
std::vector<float> cluster(const float* v, std::int64_t n, const BuildParams& p, int lists, int device,
                           std::vector<std::int32_t>& list_of) {
  const int dim = p.dim;
  ivfpq::Params ip;
  ip.dim = dim;
  ip.metric = p.metric;
  std::vector<float> normalised;
  if (p.metric == Metric::Cosine) {
    normalised = ivfpq::prepared_rows(ip, v, n);
    v = normalised.data();
  }
  const std::int64_t sample_n = std::min<std::int64_t>(n, std::int64_t(lists) * kSamplePerList);
  const std::vector<float> sample = strided_sample(v, n, dim, sample_n);
  ivfpq::KmeansSpec spec;
  spec.points = sample.data();
  spec.n = sample_n;
  spec.ld = dim;
  spec.dim = dim;
  spec.k = lists;
  spec.iters = kKmeansIters;
  spec.seed = mix64(p.seed);
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

// The `probes` (>= 1) lists nearest to list l's centroid (squared L2
// between centroids), l itself first.
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

// One thread's buffers for the lists search, grown to the largest list it
// has taken.
struct ListBuffers {
  std::unique_ptr<DeviceBuffer<float>> rows;
  std::unique_ptr<DeviceBuffer<std::int64_t>> d_ids;
  std::int64_t room = 0;  // candidate rows the device buffers hold
  std::vector<std::int64_t> cand, ids;
  std::vector<float> queries;
  std::vector<double> dist;
  void fit(std::int64_t nc, int dim) {
    if (nc <= room) return;
    room = std::max(nc, 2 * room);
    rows.reset();
    d_ids.reset();
    rows = std::make_unique<DeviceBuffer<float>>(std::size_t(room) * dim);
    d_ids = std::make_unique<DeviceBuffer<std::int64_t>>(room);
  }
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
    const std::int64_t first = (*start)[l], nodes = (*start)[l + 1] - first;
    if (nodes == 0) return 0;
    b.cand.clear();
    for (int o : (*probe)[l])
      b.cand.insert(b.cand.end(), member->begin() + (*start)[o], member->begin() + (*start)[o + 1]);
    std::sort(b.cand.begin(), b.cand.end());  // rows in id order: ties by row are ties by id
    const std::int64_t nc = std::int64_t(b.cand.size());
    b.fit(nc, dim);
    const cudaStream_t s = thread_stream(device);
    GKNN_CUDA(
        cudaMemcpyAsync(b.d_ids->get(), b.cand.data(), sizeof(std::int64_t) * nc, cudaMemcpyHostToDevice, s));
    gather_rows<<<unsigned(std::min<std::int64_t>((nc * dim + 255) / 256, 4096)), 256, 0, s>>>(
        all, b.d_ids->get(), nc, dim, b.rows->get());
    GKNN_CUDA(cudaGetLastError());
    for (std::int64_t q0 = 0; q0 < nodes; q0 += kListQueryChunk) {
      const std::int64_t nq = std::min(kListQueryChunk, nodes - q0);
      b.queries.resize(std::size_t(nq) * dim);
      b.ids.resize(std::size_t(nq) * k);
      b.dist.resize(b.ids.size());
      for (std::int64_t i = 0; i < nq; ++i)
        std::copy_n(v + (*member)[first + q0 + i] * dim, dim, &b.queries[i * dim]);
      const KnnRequest r{b.rows->get(), nc, b.queries.data(), nq, dim, k, metric};
      exact_knn_resident(r, device, b.ids.data(), b.dist.data(), {}, b.d_ids->get());
      for (std::int64_t i = 0; i < nq; ++i) {
        const std::int64_t x = (*member)[first + q0 + i];
        take_knn_row(x, &b.ids[i * k], k, kdeg, knn->data() + x * kdeg);
      }
    }
    return nodes;
  }
};

// Threads kept for the process's life for the lists search: each takes
// thread-local GPU state (streams, cuBLAS handles, pinned scratch) that is
// never freed, so every build reuses the same few instead of leaving a set
// behind per build. Never destroyed (idle threads at exit). A build that
// finds them busy (another build's lists search) runs on its own thread.
class ListWorkers {
 public:
  static ListWorkers& get() {
    static ListWorkers* w = new ListWorkers;
    return *w;
  }
  // job(t) on the helpers, t = 1..threads(), while the caller runs job(0);
  // returns when every one has returned. job must not throw.
  void run(const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> use(use_, std::try_to_lock);
    if (use.owns_lock()) start_helpers();
    const int helpers = use.owns_lock() ? int(threads_.size()) : 0;
    if (helpers > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      pending_ = helpers;
      ++generation_;
      wake_.notify_all();
    }
    job(0);
    if (helpers > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return pending_ == 0; });
      job_ = nullptr;
    }
  }

 private:
  // Started once (none if the system refuses threads: the caller does all).
  void start_helpers() {
    if (started_) return;
    started_ = true;
    try {
      for (int t = 1; t < kListThreads; ++t) threads_.emplace_back([this, t] { loop(t); });
    } catch (const std::system_error&) {
    }
    for (auto& th : threads_) th.detach();
  }
  void loop(int t) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        job = job_;
      }
      (*job)(t);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
  std::mutex use_;  // one lists search at a time uses the helpers
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool started_ = false;
  std::vector<std::thread> threads_;
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
    const KnnRequest r{all.get(), n, v + b * p.dim, e - b, p.dim, k, p.metric};
    exact_knn_resident(r, device, ids.data(), d.data(), source);
    for (std::int64_t x = b; x < e; ++x)
      take_knn_row(x, ids.data() + (x - b) * k, k, kdeg, knn.data() + x * kdeg);
    check_progress(progress, kPhaseKnn, e, n);
  }
}

std::int64_t build_gpu_bytes(const BuildParams& p, std::int64_t n) {
  const std::int64_t dim = p.dim, kdeg = effective_intermediate_degree(p, n);
  const std::int64_t vectors = 4 * n * dim;                             // the rows on the device
  const std::int64_t graphs = 4 * n * (kdeg + std::int64_t(p.degree));  // the prune's input and output
  // The exact search's GEMM path: its augmented rows (dim + 1, padded) and
  // two distance tiles of (queries x 32,768) floats, queries <= 8,192.
  auto exact = [&](std::int64_t rows, std::int64_t queries) {
    return 4 * rows * (dim + 8) + 8 * rows + 2 * 4 * std::min<std::int64_t>(queries, 8192) * 32768;
  };
  if (n <= kExactKnnGpuMaxN) return vectors + exact(n, kExactChunk) + graphs;
  // The lists search: the assignment's copy of the rows, and per thread a
  // list's candidates (gathered, then augmented) at twice the mean size.
  const std::int64_t candidates = 2 * kListProbes * (n / list_count(n) + 1);
  return 2 * vectors +
         kListThreads * (4 * candidates * dim + 8 * candidates + exact(candidates, kListQueryChunk)) + graphs;
}

void knn_lists_gpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, int device,
                   const Progress& progress, std::vector<std::uint32_t>& knn, int lists, int probes) {
  if (lists < 1 || probes < 1)
    throw Error(ErrorCode::InvalidArgument, "graph knn_lists_gpu: lists and probes must be >= 1");
  check_progress(progress, kPhaseKnn, 0, n);
  if (n == 0) return;
  use_device(device);
  const int dim = p.dim;
  lists = int(std::min<std::int64_t>(lists, n));
  std::vector<std::int32_t> list_of;
  const std::vector<float> centroids = cluster(v, n, p, lists, device, list_of);
  std::vector<std::int64_t> start, member;
  list_members(list_of, lists, start, member);
  std::vector<std::vector<int>> probe(lists);
  parallel_rows(lists, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t l = b; l < e; ++l) probe[l] = probes_of(centroids, lists, dim, int(l), probes);
  });
  DeviceBuffer<float> all(std::size_t(n) * dim);
  GKNN_CUDA(cudaMemcpy(all.get(), v, sizeof(float) * n * dim, cudaMemcpyHostToDevice));
  const ListSearch search{v, all.get(), dim, kdeg + 1, kdeg, p.metric, device, &start, &member, &probe, &knn};
  // Lists taken in turn by the caller and ListWorkers' threads, each with its
  // own streams and buffers (a list's search waits for its results: one
  // thread left the GPU idle between them). Progress is reported, and a
  // cancel seen, by the calling thread only, between its own lists.
  std::atomic<int> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failed;
  std::mutex failed_mu;
  ListWorkers::get().run([&](int t) {
    try {
      use_device(device);  // a helper may last have worked on another device
      ListBuffers buf;
      for (int l; !stop.load() && (l = next.fetch_add(1)) < lists;) {
        done += search.run(l, buf);
        if (t == 0) check_progress(progress, kPhaseKnn, done.load(), n);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failed_mu);
      if (!failed) failed = std::current_exception();
      stop = true;
    }
  });
  if (failed) std::rethrow_exception(failed);
  check_progress(progress, kPhaseKnn, n, n);
}

}  // namespace gknn::graph
