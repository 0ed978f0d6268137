// The initial kNN graph of a build, on the CPU or a GPU. On the CPU: exact
// for small n (threads), IVF-PQ from gknn/ivfpq.h above (train, encode,
// search refined with exact distances, every node a query). On a GPU:
// knn_graph_gpu.cu's exact graph up to kExactKnnGpuMaxN, its lists search
// above. The approximate graphs' lists are what CAGRA's
// optimisation tolerates (the paper builds from NN-descent's).
#include <algorithm>

#include "gknn/ivfpq.h"
#include "graph/common.h"

namespace gknn::graph {
namespace {

// On the CPU a chunk is sized by its work, so that a cancel is seen within
// a fraction of a second: about 2^28 distance terms for the exact graph,
// kCpuSearchChunk IVF-PQ searches (a chunk of 16,384 exact queries over
// 20,000 rows of 784 dimensions ran for minutes on two cores).
constexpr std::int64_t kCpuExactTerms = std::int64_t(1) << 28;
constexpr std::int64_t kCpuSearchChunk = 512;
constexpr std::int64_t kCpuExactMaxChunk = 1 << 14;

std::int64_t cpu_exact_chunk(std::int64_t n, int dim) {
  return std::clamp<std::int64_t>(kCpuExactTerms / std::max<std::int64_t>(1, n * dim), 1, kCpuExactMaxChunk);
}

// Exact kNN graph on CPU threads: every node against every node.
void exact_cpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, const Progress& progress,
               std::vector<std::uint32_t>& knn) {
  const int k = kdeg + 1;
  check_progress(progress, kPhaseKnn, 0, n);
  const std::int64_t chunk = cpu_exact_chunk(n, p.dim);
  for (std::int64_t b = 0; b < n; b += chunk) {
    const std::int64_t e = std::min(n, b + chunk);
    parallel_rows(e - b, [&](std::int64_t lo, std::int64_t hi) {
      std::vector<Scored> s(n);
      std::vector<std::int64_t> ids(k);
      for (std::int64_t x = b + lo; x < b + hi; ++x) {
        for (std::int64_t y = 0; y < n; ++y)
          s[y] = {dist(p.metric, v + y * p.dim, v + x * p.dim, p.dim), std::uint32_t(y)};
        std::partial_sort(s.begin(), s.begin() + k, s.end());
        for (int j = 0; j < k; ++j) ids[j] = s[j].id;
        take_knn_row(x, ids.data(), k, kdeg, knn.data() + x * kdeg);
      }
    });
    check_progress(progress, kPhaseKnn, e, n);
  }
}

// PQ sub-quantizers: a divisor of dim with sub-vectors of 2..8 elements
// (the finer, the better the candidates), at most 128.
int pq_m(int dim) {
  for (int sub = 2; sub <= 8; ++sub)
    if (dim % sub == 0 && dim / sub <= 128) return dim / sub;
  for (int m = std::min(dim, 128); m >= 1; --m)
    if (dim % m == 0) return m;
  return 1;
}

// IVF-PQ kNN graph on CPU threads: train on a strided sample, encode
// everything, search every node with refine (exact distances of the best
// PQ candidates).
void ivfpq_knn_cpu(const float* v, std::int64_t n, int kdeg, const BuildParams& p, const Progress& progress,
                   std::vector<std::uint32_t>& knn) {
  ivfpq::Params ip;
  ip.dim = p.dim;
  ip.metric = p.metric;
  ip.lists = std::min(list_count(n), 1 << 16);
  ip.m = pq_m(p.dim);
  ip.nbits = 8;
  ip.kmeans_iters = 10;
  ip.seed = mix64(p.seed);
  const std::int64_t sample_n =
      std::min<std::int64_t>(n, std::max<std::int64_t>(std::int64_t(ip.lists) * 64, 1 << 16));
  std::vector<float> sample = strided_sample(v, n, p.dim, sample_n);
  check_progress(progress, kPhaseKnn, 0, n);
  ivfpq::Image im;
  im.quantizer = ivfpq::train(ip, sample.data(), sample_n, -1);
  sample = {};
  const int cs = ivfpq::code_size(im.quantizer.params);
  std::vector<std::int32_t> list_of(n);
  std::vector<std::uint8_t> codes(std::size_t(n) * cs);
  ivfpq::encode(im.quantizer, v, n, -1, list_of.data(), codes.data());
  const int lists = im.quantizer.params.lists;
  list_members(list_of, lists, im.offsets, im.ids);
  im.codes.resize(codes.size());
  im.vectors.resize(std::size_t(n) * p.dim);
  for (std::int64_t at = 0; at < n; ++at) {
    const std::int64_t i = im.ids[at];
    std::copy_n(codes.data() + i * cs, cs, im.codes.data() + at * cs);
    std::copy_n(v + i * p.dim, p.dim, im.vectors.data() + at * p.dim);
  }
  codes = {};
  list_of = {};
  ivfpq::SearchParams sp;
  sp.k = kdeg + 1;
  sp.probes = std::min(lists, kListProbes);
  sp.refine = 3;
  std::vector<std::int64_t> ids(std::size_t(kCpuSearchChunk) * sp.k);
  std::vector<double> d(ids.size());
  for (std::int64_t b = 0; b < n; b += kCpuSearchChunk) {
    const std::int64_t e = std::min(n, b + kCpuSearchChunk);
    parallel_rows(e - b, [&](std::int64_t lo, std::int64_t hi) {
      ivfpq::search_refined_cpu(im, v + (b + lo) * p.dim, hi - lo, sp, ids.data() + lo * sp.k,
                                d.data() + lo * sp.k);
    });
    for (std::int64_t x = b; x < e; ++x)
      take_knn_row(x, ids.data() + (x - b) * sp.k, sp.k, kdeg, knn.data() + x * kdeg);
    check_progress(progress, kPhaseKnn, e, n);
  }
}

// Rows that came back short (a probe's lists held too few nodes) are
// completed with pseudo-random nodes and put back in distance order, so
// every row is full when n - 1 >= kdeg.
void complete_rows(const float* v, std::int64_t n, int kdeg, const BuildParams& p,
                   std::vector<std::uint32_t>& knn) {
  if (n - 1 < kdeg) return;
  parallel_rows(n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t x = b; x < e; ++x) {
      std::uint32_t* row = knn.data() + x * kdeg;
      int used = 0;
      while (used < kdeg && row[used] != kNoNode) ++used;
      if (used == kdeg) continue;
      std::uint64_t state = mix64(p.seed ^ std::uint64_t(x));
      while (used < kdeg) {
        state = mix64(state);
        const auto y = std::uint32_t(state % std::uint64_t(n));
        if (y == x || std::find(row, row + used, y) != row + used) continue;
        row[used++] = y;
      }
      std::vector<Scored> s(kdeg);
      for (int j = 0; j < kdeg; ++j)
        s[j] = {dist(p.metric, v + std::int64_t(row[j]) * p.dim, v + x * p.dim, p.dim), row[j]};
      std::sort(s.begin(), s.end());
      for (int j = 0; j < kdeg; ++j) row[j] = s[j].id;
    }
  });
}

}  // namespace

std::vector<std::uint32_t> knn_graph(const float* vectors, std::int64_t n, int kdeg, const BuildParams& p,
                                     int device, const Progress& progress) {
  std::vector<std::uint32_t> knn(std::size_t(n) * kdeg, kNoNode);
  if (n == 0 || kdeg == 0) return knn;
  if (device >= 0 && n <= kExactKnnGpuMaxN)
    knn_exact_gpu(vectors, n, kdeg, p, device, progress, knn);
  else if (device >= 0)
    knn_lists_gpu(vectors, n, kdeg, p, device, progress, knn, list_count(n), kListProbes);
  else if (n <= kExactKnnMaxN)
    exact_cpu(vectors, n, kdeg, p, progress, knn);
  else
    ivfpq_knn_cpu(vectors, n, kdeg, p, progress, knn);
  complete_rows(vectors, n, kdeg, p, knn);
  return knn;
}

}  // namespace gknn::graph
