// Parameter validation and the code size of gknn/ivfpq.h.
#include <string>

#include "gknn/error.h"
#include "gknn/ivfpq.h"

namespace gknn::ivfpq {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorCode::InvalidArgument, "ivfpq: " + what);
}

}  // namespace

void validate(const Params& p) {
  require(p.dim >= 1 && p.dim <= kMaxDim, "dim must be in 1.." + std::to_string(kMaxDim));
  require(p.lists >= 1, "lists must be >= 1");
  require(p.m >= 1, "m must be >= 1");
  require(p.dim % p.m == 0,
          "m (" + std::to_string(p.m) + ") must divide dim (" + std::to_string(p.dim) + ")");
  require(p.nbits >= kMinNbits && p.nbits <= kMaxNbits,
          "nbits must be in " + std::to_string(kMinNbits) + ".." + std::to_string(kMaxNbits));
  require(p.metric == Metric::L2 || p.metric == Metric::InnerProduct || p.metric == Metric::Cosine,
          "metric must be L2, inner product or cosine");
  require(p.kmeans_iters >= 1, "kmeans_iters must be >= 1");
}

int code_size(const Params& p) { return (p.m * p.nbits + 7) / 8; }

}  // namespace gknn::ivfpq
