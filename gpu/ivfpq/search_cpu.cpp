// search_cpu: the reference IVF-PQ search, one query at a time, with the
// arithmetic of scoring.h and the k-selection of gknn/select.h, exactly as
// the GPU path runs them (so the GPU's results can be compared for equality).
// Its PQ stage (pq_candidates_cpu) also feeds search_refined_cpu.
#include <algorithm>
#include <limits>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "gknn/select.h"
#include "ivfpq/candidates.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"
#include "ivfpq/scoring.h"

namespace gknn::ivfpq {
namespace {

// Scratch for one query, reused across queries.
struct QueryWork {
  std::vector<float> coarse, probe_keys, vec, lut, cand, out_keys;
  std::vector<std::uint32_t> probe_lists, out_cols;
  std::vector<std::int64_t> starts;
};

// The LUT of one (query, list): lut[j * ksub + c] for sub-space j, codeword c.
void build_lut(const Params& p, const float* query, const float* centroid, const float* codebooks,
               QueryWork& w) {
  const int ds = dsub(p), ks = ksub(p);
  for (int i = 0; i < p.dim; ++i) w.vec[i] = lut_input(p.metric, query[i], centroid[i]);
  for (int e = 0; e < p.m * ks; ++e)
    w.lut[e] = lut_entry(p.metric, w.vec.data() + (e / ks) * ds, codebooks + std::size_t(e) * ds, ds);
}

// Scores list `list` into w.cand from column `start`.
void scan_list(const Image& image, int list, float coarse, std::int64_t start, QueryWork& w) {
  const Params& p = image.quantizer.params;
  const int cs = code_size(p), ks = ksub(p);
  const std::int64_t begin = image.offsets[list], len = image.offsets[list + 1] - begin;
  for (std::int64_t i = 0; i < len; ++i) {
    const std::uint8_t* code = image.codes.data() + (begin + i) * cs;
    float sum = 0.0f;
    for (int j = 0; j < p.m; ++j) sum += w.lut[j * ks + read_code(code, j, p.nbits)];
    w.cand[start + i] = pq_distance(p.metric, coarse, sum);
  }
}

// The k best entries of one (prepared) query, as image positions.
void search_one(const Image& image, const float* query, int probes, int k, QueryWork& w,
                std::int64_t* entries, float* keys) {
  const Quantizer& qz = image.quantizer;
  const Params& p = qz.params;
  for (int l = 0; l < p.lists; ++l)
    w.coarse[l] = coarse_key(p.metric, query, qz.centroids.data() + std::size_t(l) * p.dim, p.dim);
  select_topk_cpu<float, std::uint32_t>(w.coarse.data(), nullptr, p.lists, probes, SelectOrder::Smallest,
                                        w.probe_keys.data(), w.probe_lists.data());
  probe_starts(image.offsets.data(), w.probe_lists.data(), probes, w.starts.data());
  const std::int64_t count = w.starts[probes];
  if (count >= std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: 2^32 - 1 or more candidates for one query");
  w.cand.resize(count);
  for (int pr = 0; pr < probes; ++pr) {
    const int list = int(w.probe_lists[pr]);
    build_lut(p, query, qz.centroids.data() + std::size_t(list) * p.dim, qz.codebooks.data(), w);
    scan_list(image, list, w.probe_keys[pr], w.starts[pr], w);
  }
  const std::int64_t got = select_topk_cpu<float, std::uint32_t>(
      w.cand.data(), nullptr, count, k, SelectOrder::Smallest, w.out_keys.data(), w.out_cols.data());
  for (std::int64_t r = 0; r < k; ++r) {
    if (r >= got) {
      entries[r] = -1;
      keys[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const std::int64_t col = w.out_cols[r];
    const int pr = probe_of(w.starts.data(), probes, col);
    entries[r] = image.offsets[w.probe_lists[pr]] + col - w.starts[pr];
    keys[r] = w.out_keys[r];
  }
}

}  // namespace

void pq_candidates_cpu(const Image& image, const float* queries, std::int64_t nq, int k, int probes,
                       std::int64_t* entries, float* keys) {
  if (k == 0) return;
  const Params& p = image.quantizer.params;
  QueryWork w;
  w.coarse.resize(p.lists);
  w.probe_keys.resize(probes);
  w.probe_lists.resize(probes);
  w.starts.resize(probes + 1);
  w.vec.resize(p.dim);
  w.lut.resize(std::size_t(p.m) * ksub(p));
  w.out_keys.resize(k);
  w.out_cols.resize(k);
  for (std::int64_t q = 0; q < nq; ++q) {
    const std::vector<float> query = prepared_rows(p, queries + q * p.dim, 1);
    search_one(image, query.data(), probes, k, w, entries + q * k, keys + q * k);
  }
}

void search_cpu(const Image& image, const float* queries, std::int64_t nq, const SearchParams& sp,
                std::int64_t* ids, float* distances) {
  check_image(image);
  check_search(queries, nq, sp, ids, distances);
  if (sp.k == 0) return;
  const int probes = std::min(sp.probes, image.quantizer.params.lists);
  pq_candidates_cpu(image, queries, nq, sp.k, probes, ids, distances);
  for (std::int64_t i = 0; i < nq * sp.k; ++i)
    if (ids[i] >= 0) ids[i] = image.ids[ids[i]];
}

}  // namespace gknn::ivfpq
