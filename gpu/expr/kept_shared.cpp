// Programs ranked together over the same kept batches (gknn/expr.h): the
// checks, and on the CPU a TopK per program, as a session of its own would
// rank them. The GPU's shared launches are in kept_shared_cuda.cu.
#include <memory>

#include "expr/kept_shared.h"
#include "expr/resident_store.h"
#include "gknn/error.h"

namespace gknn::expr {

namespace {

void rank_on_cpu(const std::vector<const ResidentBatches*>& stores, const std::vector<ColumnSpec>& columns,
                 KeptQuery& q) {
  std::unique_ptr<TopK> t(make_topk_cpu(*q.program, columns, 1, q.k));
  bool ok = true;
  for (const ResidentBatches* r : stores)
    if (ok) ok = t->push_resident(*r, q.error);
  if (ok) ok = t->finish(q.error);
  q.stats = t->stats();
  if (ok) q.rows = t->result();
}

}  // namespace

void rank_kept_shared(const std::vector<const ResidentBatches*>& stores,
                      const std::vector<ColumnSpec>& columns, std::vector<KeptQuery>& queries, int device) {
  for (KeptQuery& q : queries) {
    if (!q.program || q.k < 0) throw Error(ErrorCode::InvalidArgument, "shared top-k: no program, or k < 0");
    validate(*q.program, columns);
    if (device >= 0 && !gpu_supports(*q.program, q.k))
      throw Error(ErrorCode::InvalidArgument,
                  "shared top-k: k or ORDER BY keys too wide for the GPU kernels");
    q.rows.clear();
    q.error = EvalError();
    q.stats = TopKStats();
  }
  std::vector<BatchView> batches;
  for (const ResidentBatches* r : stores) {
    if (!r) throw Error(ErrorCode::InvalidArgument, "shared top-k: no store");
    const ResidentStore& s = checked_store(*r, device, columns);
    batches.insert(batches.end(), s.views().begin(), s.views().end());
  }
  if (device < 0) {
    for (KeptQuery& q : queries) rank_on_cpu(stores, columns, q);
    return;
  }
  std::vector<KeptQuery*> all;
  for (KeptQuery& q : queries) all.push_back(&q);
  rank_kept_shared_gpu(batches, columns, all, device);
}

}  // namespace gknn::expr
