// encode(): nearest coarse centroid, then the nearest codeword of every
// residual sub-vector, packed into nbits codes. Batches bound the memory and
// are where progress is reported.
#include <algorithm>
#include <cstring>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"
#include "ivfpq/kmeans.h"

namespace gknn::ivfpq {
namespace {

constexpr std::int64_t kEncodeBatch = 65536;

void encode_batch(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
                  std::uint8_t* codes) {
  const Params& p = q.params;
  const int ds = dsub(p), ks = ksub(p), cs = code_size(p);
  const std::vector<float> rows = prepared_rows(p, x, n);
  nearest_centroids(rows.data(), n, q.centroids.data(), p.lists, p.dim, device, list_of);
  const std::vector<float> resid = residuals(rows.data(), n, p.dim, q.centroids.data(), list_of);
  std::memset(codes, 0, std::size_t(n) * cs);
  std::vector<std::int32_t> code(n);
  for (int j = 0; j < p.m; ++j) {
    const std::vector<float> sub = subspace(resid.data(), n, p.dim, j, ds);
    nearest_centroids(sub.data(), n, q.codebooks.data() + std::size_t(j) * ks * ds, ks, ds, device,
                      code.data());
    for (std::int64_t i = 0; i < n; ++i) write_code(codes + i * cs, j, p.nbits, unsigned(code[i]));
  }
}

}  // namespace

void encode(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
            std::uint8_t* codes, const Progress& progress) {
  check_quantizer(q);
  if (n < 0) throw Error(ErrorCode::InvalidArgument, "ivfpq: encode needs n >= 0");
  if (n > 0 && (!x || !list_of || !codes))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: missing encode buffer");
  const int cs = code_size(q.params);
  for (std::int64_t b0 = 0; b0 < n; b0 += kEncodeBatch) {
    const std::int64_t rows = std::min(kEncodeBatch, n - b0);
    encode_batch(q, x + b0 * q.params.dim, rows, device, list_of + b0, codes + b0 * cs);
    check_progress(progress, Phase::Encode, b0 + rows, n);
  }
}

}  // namespace gknn::ivfpq
