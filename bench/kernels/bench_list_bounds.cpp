// The pruned exact search's list bounds on the CPU: made whole
// (list_bounds) against carried across a delta (list_bounds_after), as a
// CPU image's first exact search after an insert pays them. CPU only.
//
//   gknn_bench_list_bounds [n=200000] [dim=128] [lists=1024] [new rows=100]
//
// The image: a Gaussian mixture of 1000 clusters (as gknn-synth makes
// synthetic-1m), trained and encoded on the CPU; the delta appends `new
// rows` to one list. Checks that both give the same bounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench_image.h"
#include "gknn/ivfpq.h"
#include "gknn/ivfpq_delta.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

gknn::ivfpq::Image mixture_image(std::int64_t n, int dim, int lists, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centres(1000 * std::size_t(dim)), x(std::size_t(n) * dim);
  for (float& c : centres) c = 4.0f * g(rng);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (rng() % 1000) * dim;
    for (int d = 0; d < dim; ++d) x[i * dim + d] = c[d] + g(rng);
  }
  gknn::ivfpq::Params p;
  p.dim = dim, p.lists = lists, p.m = dim % 32 == 0 ? 32 : 1, p.nbits = 8;
  return bench_image(x, p, 64 * std::int64_t(lists), gknn::ivfpq::kCpu);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 200000;
  const int dim = argc > 2 ? std::atoi(argv[2]) : 128;
  const int lists = argc > 3 ? std::atoi(argv[3]) : 1024;
  const int fresh = argc > 4 ? std::atoi(argv[4]) : 100;
  std::mt19937 rng(42);
  const gknn::ivfpq::Image im = mixture_image(n, dim, lists, rng);
  gknn::ivfpq::ImageDelta delta;
  gknn::ivfpq::Splice s;
  s.list = lists / 2, s.at = im.offsets[lists / 2 + 1] - im.offsets[lists / 2], s.count = fresh;
  delta.splices.push_back(s);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int i = 0; i < fresh; ++i) {
    delta.ids.push_back(n + i);
    delta.codes.resize(delta.codes.size() + gknn::ivfpq::code_size(im.quantizer.params), 0);
    for (int d = 0; d < dim; ++d) delta.vectors.push_back(g(rng));
  }
  const gknn::ivfpq::ListBounds before = gknn::ivfpq::list_bounds(im);
  const gknn::ivfpq::Image after = gknn::ivfpq::apply_delta(im, delta);
  double whole = 1e300, carried = 1e300;
  gknn::ivfpq::ListBounds made, moved;
  for (int round = 0; round < 3; ++round) {  // the fastest of three each
    auto t = Clock::now();
    made = gknn::ivfpq::list_bounds(after);
    whole = std::min(whole, ms_since(t));
    t = Clock::now();
    moved = gknn::ivfpq::list_bounds_after(before, delta, after);
    carried = std::min(carried, ms_since(t));
  }
  const bool equal = made.offsets == moved.offsets && made.centre_distance == moved.centre_distance &&
                     made.radius == moved.radius;
  std::printf(
      "%lld x %d, %d lists, a delta of %d new rows: list_bounds %.2f ms, list_bounds_after %.2f ms "
      "(%.1fx), equal: %s\n",
      (long long)n, dim, lists, fresh, whole, carried, whole / carried, equal ? "yes" : "NO");
  return equal ? 0 : 1;
}
