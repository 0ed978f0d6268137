// nearest_cpu: the reference assignment, rows split over threads. Each row's
// result depends on that row only, so the split does not change it.
#include <algorithm>
#include <thread>
#include <vector>

#include "ivfpq/arith.h"
#include "ivfpq/assign.h"
#include "runtime/cpu_cores.h"

namespace gknn::ivfpq {
namespace {

// Below this many distance terms per thread a thread costs more than it saves.
constexpr double kWorkPerThread = 1 << 22;

// fn(begin, end) over [0, n) in contiguous blocks, on up to one thread per
// core; the calling thread takes the first block.
template <typename Fn>
void parallel_rows(std::int64_t n, double work_per_row, const Fn& fn) {
  if (n <= 0) return;
  const std::int64_t cores = cpu_cores();
  const std::int64_t by_work = std::int64_t(double(n) * work_per_row / kWorkPerThread);
  const std::int64_t threads = std::clamp<std::int64_t>(by_work, 1, std::min(cores, n));
  const std::int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  struct Join {
    std::vector<std::thread>& pool;
    ~Join() {
      for (auto& t : pool) t.join();
    }
  } join{pool};
  for (std::int64_t b = per; b < n; b += per) pool.emplace_back(fn, b, std::min(n, b + per));
  fn(std::int64_t(0), std::min(n, per));
}

}  // namespace

void nearest_cpu(const Groups& s, const float* x, const float* centroids, std::int32_t* out) {
  parallel_rows(s.n, double(s.k) * s.dim * s.groups, [&](std::int64_t begin, std::int64_t end) {
    for (int g = 0; g < s.groups; ++g) {
      const float* cg = centroids + std::int64_t(g) * s.k * s.dim;
      for (std::int64_t i = begin; i < end; ++i) {
        const float* row = x + i * s.ld + std::int64_t(g) * s.dim;
        float best = 0;
        int at = -1;
        for (int c = 0; c < s.k; ++c) {
          const float d = l2_squared_distance(cg + std::int64_t(c) * s.dim, row, s.dim);
          if (nearer(d, c, best, at)) best = d, at = c;
        }
        out[std::int64_t(g) * s.n + i] = at;
      }
    }
  });
}

}  // namespace gknn::ivfpq
