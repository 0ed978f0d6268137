// encode(): nearest coarse centroid, then the nearest codeword of every
// residual sub-vector, packed into nbits codes. Batches bound the memory and
// are where progress is reported. The GPU path (assign_cuda.cu) runs the
// same steps with the same arithmetic.
#include <algorithm>

#include "gknn/error.h"
#include "gknn/ivfpq.h"
#include "ivfpq/assign.h"
#include "ivfpq/codes.h"
#include "ivfpq/common.h"

namespace gknn::ivfpq {
namespace {

constexpr std::int64_t kEncodeBatch = 65536;

void encode_batch(const Quantizer& q, const float* x, std::int64_t n, std::int32_t* list_of,
                  std::uint8_t* codes) {
  const Params& p = q.params;
  const int cs = code_size(p);
  const std::vector<float> rows = prepared_rows(p, x, n);
  nearest_cpu({n, p.dim, p.dim, p.lists, 1}, rows.data(), q.centroids.data(), list_of);
  const std::vector<float> resid = residuals(rows.data(), n, p.dim, q.centroids.data(), list_of);
  std::vector<std::int32_t> sub(std::size_t(p.m) * n);
  nearest_cpu({n, p.dim, dsub(p), ksub(p), p.m}, resid.data(), q.codebooks.data(), sub.data());
  for (std::int64_t i = 0; i < n; ++i) pack_codes(sub.data() + i, n, p.m, p.nbits, cs, codes + i * cs);
}

}  // namespace

void encode(const Quantizer& q, const float* x, std::int64_t n, int device, std::int32_t* list_of,
            std::uint8_t* codes, const Progress& progress) {
  check_quantizer(q);
  if (n < 0) throw Error(ErrorCode::InvalidArgument, "ivfpq: encode needs n >= 0");
  if (n > 0 && (!x || !list_of || !codes))
    throw Error(ErrorCode::InvalidArgument, "ivfpq: missing encode buffer");
  if (device >= 0) return encode_gpu(q, x, n, device, list_of, codes, progress);
  const int cs = code_size(q.params);
  for (std::int64_t b0 = 0; b0 < n; b0 += kEncodeBatch) {
    const std::int64_t rows = std::min(kEncodeBatch, n - b0);
    encode_batch(q, x + b0 * q.params.dim, rows, list_of + b0, codes + b0 * cs);
    check_progress(progress, Phase::Encode, b0 + rows, n);
  }
}

}  // namespace gknn::ivfpq
