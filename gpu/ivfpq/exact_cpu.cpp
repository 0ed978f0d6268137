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
  std::vector<double> keys(n);
  for (std::int64_t q = 0; q < nq; ++q) {
    const float* query = queries + q * p.dim;
    with_stored_rows(image, [&](auto rows) {
      for (std::int64_t e = 0; e < n; ++e)
        keys[e] = canonical_score(row_distance(p.metric, rows, e, query, p.dim));
    });
    write_best(keys.data(), payloads.data(), n, k, ids + q * k, distances + q * k);
  }
}

void write_best(const double* keys, const std::uint64_t* payloads, std::int64_t n, int k, std::int64_t* ids,
                double* distances) {
  std::vector<double> out_keys(k);
  std::vector<std::uint64_t> out_payloads(k);
  const std::int64_t got = select_topk_cpu<double, std::uint64_t>(keys, payloads, n, k, SelectOrder::Smallest,
                                                                  out_keys.data(), out_payloads.data());
  for (std::int64_t r = 0; r < got; ++r) {
    ids[r] = payload_id(out_payloads[r]);
    distances[r] = out_keys[r];
  }
  pad_results(ids + got, distances + got, k - got);
}

}  // namespace gknn::ivfpq
