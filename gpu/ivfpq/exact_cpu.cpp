// search_exact_cpu: every stored vector (float, binary16 or bits) ranked by
// its exact distance (the SQL operator's value, stored_rows.h), the k best
// kept by the k-selection of gknn/select.h with ids as payloads, so ties go
// to the lower id. The reference that DeviceImage::search_exact is compared
// with.
#include <vector>

#include "gknn/ivfpq.h"
#include "gknn/select.h"
#include "ivfpq/common.h"

namespace gknn::ivfpq {

void search_exact_cpu(const Image& image, const float* queries, std::int64_t nq, int k, std::int64_t* ids,
                      double* distances) {
  check_image(image);
  check_exact(queries, nq, k, ids, distances);
  require_vectors(image);
  if (k == 0 || nq == 0) return;
  const Params& p = image.quantizer.params;
  const std::int64_t n = std::int64_t(image.ids.size());
  std::vector<std::uint64_t> payloads(n);
  for (std::int64_t e = 0; e < n; ++e) payloads[e] = id_payload(image.ids[e]);
  std::vector<double> keys(n), out_keys(k);
  std::vector<std::uint64_t> out_payloads(k);
  for (std::int64_t q = 0; q < nq; ++q) {
    const float* query = queries + q * p.dim;
    with_stored_rows(image, [&](auto rows) {
      for (std::int64_t e = 0; e < n; ++e)
        keys[e] = canonical_score(row_distance(p.metric, rows, e, query, p.dim));
    });
    const std::int64_t got = select_topk_cpu<double, std::uint64_t>(
        keys.data(), payloads.data(), n, k, SelectOrder::Smallest, out_keys.data(), out_payloads.data());
    std::int64_t* row_ids = ids + q * k;
    double* row_dist = distances + q * k;
    for (std::int64_t r = 0; r < got; ++r) {
      row_ids[r] = payload_id(out_payloads[r]);
      row_dist[r] = out_keys[r];
    }
    pad_results(row_ids + got, row_dist + got, k - got);
  }
}

}  // namespace gknn::ivfpq
