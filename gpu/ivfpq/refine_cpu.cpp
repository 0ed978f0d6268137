// search_refined_cpu: the PQ search's refine x k best candidates of each
// query, re-ranked by the exact distance of their stored vectors (float,
// binary16 or bits; the SQL operator's value, stored_rows.h) and cut to k by the k-selection of
// gknn/select.h with ids as payloads, so ties go to the lower id.
#include <algorithm>
#include <vector>

#include "gknn/ivfpq.h"
#include "gknn/select.h"
#include "ivfpq/candidates.h"
#include "ivfpq/common.h"

namespace gknn::ivfpq {
namespace {

// The k best of one query's candidates (image positions, -1 for padding);
// `rows`: the image's stored vectors (stored_rows.h).
template <typename Rows>
void rerank_one(const Image& image, Rows rows, const float* query, const std::int64_t* entries, int count,
                int k, std::int64_t* ids, double* distances) {
  const Params& p = image.quantizer.params;
  std::vector<double> keys;
  std::vector<std::uint64_t> payloads;
  for (int j = 0; j < count; ++j) {
    const std::int64_t e = entries[j];
    if (e < 0) continue;
    keys.push_back(canonical_score(row_distance(p.metric, rows, e, query, p.dim)));
    payloads.push_back(id_payload(image.ids[e]));
  }
  std::vector<double> out_keys(k);
  std::vector<std::uint64_t> out_payloads(k);
  const std::int64_t got =
      select_topk_cpu<double, std::uint64_t>(keys.data(), payloads.data(), std::int64_t(keys.size()), k,
                                             SelectOrder::Smallest, out_keys.data(), out_payloads.data());
  for (std::int64_t r = 0; r < got; ++r) {
    ids[r] = payload_id(out_payloads[r]);
    distances[r] = out_keys[r];
  }
  pad_results(ids + got, distances + got, k - got);
}

}  // namespace

void search_refined_cpu(const Image& image, const float* queries, std::int64_t nq, const SearchParams& sp,
                        std::int64_t* ids, double* distances) {
  check_image(image);
  check_refined(queries, nq, sp, ids, distances);
  require_vectors(image);
  if (sp.k == 0 || nq == 0) return;
  const Params& p = image.quantizer.params;
  const int count = refine_candidates(sp, std::int64_t(image.ids.size()));
  if (count == 0) return pad_results(ids, distances, nq * sp.k);
  const int probes = std::min(sp.probes, p.lists);
  std::vector<std::int64_t> entries(count);
  std::vector<float> pq_keys(count);
  for (std::int64_t q = 0; q < nq; ++q) {
    const float* query = queries + q * p.dim;
    pq_candidates_cpu(image, query, 1, count, probes, entries.data(), pq_keys.data());
    with_stored_rows(image, [&](auto rows) {
      rerank_one(image, rows, query, entries.data(), count, sp.k, ids + q * sp.k, distances + q * sp.k);
    });
  }
}

}  // namespace gknn::ivfpq
