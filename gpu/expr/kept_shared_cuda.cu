// Programs ranked together over the same kept batches on the GPU
// (rank_kept_shared, gknn/expr.h): the GPU service's concurrent cache hits
// over one table. A GpuTopK per program reads every row's vector for its
// own distance: at 16 sessions over Fashion-MNIST (60,000 x 784) that is
// 188 MB per query, and the service's GPU was the limit
// (bench/results/fashion-mnist-topk-H200-2026-11-27.md). Here, per group of
// kept batches (as GpuTopK groups them):
//   - one vector_distances_many launch per distance column reads each row's
//     vector once for every program's constant (each sum in the lanes and
//     order of the single kernel: the same bits);
//   - one row_words_each launch runs every program's interpreter (program y
//     = blockIdx.y), reading its distances through ProgramView::dist_shift
//     from batch views they share;
//   - one segmented bitonic pipeline selects each program's k words (or,
//     for few tiles, each tile's k best: select::bitonic_topk_tiles);
//   - one copy back, one wait; the host merges each program's words into its
//     rows (and reruns a row that raised on the CPU for its error).
// Programs share launches when their key width, bitonic run length and
// distance jobs (column, VecDist, metric, dimension) agree; the constants
// and everything else of a program may differ.
#include <algorithm>
#include <cstring>
#include <vector>

#include "expr/kept_shared.h"
#include "expr/row_words.cuh"
#include "expr/vector_distances.cuh"
#include "runtime/cuda_check.h"
#include "runtime/stream_tools.h"

namespace gknn::expr {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxPerLaunch = 32;  // programs per launch (grid y, memory)
// Words per program up to which every tile's k best come back and the host
// merges them (select::bitonic_topk_tiles): 60,000 rows for LIMIT 10 is 15
// tiles, 150 words.
constexpr std::int64_t kMaxTileWords = 1024;

std::int64_t run_length(std::int64_t k) {
  std::int64_t r = 1;
  while (r < std::max<std::int64_t>(k, 1)) r <<= 1;
  return r;
}

bool same_jobs(const std::vector<DistanceJob>& a, const std::vector<DistanceJob>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].column != b[i].column || a[i].key != b[i].key || a[i].metric != b[i].metric ||
        a[i].qdim != b[i].qdim)
      return false;
  return true;
}

// Programs that share launches.
struct Share {
  int limbs = 0;
  std::int64_t run = 0;
  std::vector<DistanceJob> jobs;  // the first program's (constants differ)
  std::vector<KeptQuery*> queries;
};

std::vector<Share> shares_of(const std::vector<KeptQuery*>& queries) {
  std::vector<Share> shares;
  for (KeptQuery* q : queries) {
    const int limbs = q->program->key_limbs();
    const std::int64_t run = run_length(q->k);
    std::vector<DistanceJob> jobs = distance_jobs(*q->program);
    auto it = std::find_if(shares.begin(), shares.end(), [&](const Share& s) {
      return s.limbs == limbs && s.run == run && same_jobs(s.jobs, jobs) && s.queries.size() < kMaxPerLaunch;
    });
    if (it == shares.end()) {
      shares.push_back(Share{limbs, run, std::move(jobs), {}});
      it = shares.end() - 1;
    }
    it->queries.push_back(q);
  }
  return shares;
}

// The calling thread's timing events on `device`, kept for its life (as
// thread_stream's streams: no creation per call, never destroyed).
void thread_events(int device, cudaEvent_t* start, cudaEvent_t* stop) {
  struct Pair {
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  thread_local std::vector<Pair> pairs;
  if (pairs.size() <= static_cast<std::size_t>(device)) pairs.resize(device + 1);
  Pair& p = pairs[device];
  if (!p.start) GKNN_CUDA(cudaEventCreate(&p.start));
  if (!p.stop) GKNN_CUDA(cudaEventCreate(&p.stop));
  *start = p.start;
  *stop = p.stop;
}

// A block laid out on the host (pinned where it fits the thread's scratch)
// and copied to the device in one piece.
class Staging {
 public:
  std::size_t add(std::size_t bytes) {
    const std::size_t at = (size_ + 15) / 16 * 16;
    size_ = at + bytes;
    return at;
  }
  std::size_t size() const { return size_; }
  // Host memory for the laid-out block (valid until the copy is done).
  unsigned char* host() {
    unsigned char* p = static_cast<unsigned char*>(pinned_scratch_bytes(0, std::max<std::size_t>(size_, 1)));
    if (p) return p;
    fallback_.resize(size_);
    return fallback_.data();
  }

 private:
  std::size_t size_ = 0;
  std::vector<unsigned char> fallback_;
};

template <typename T>
void put(unsigned char* host, std::size_t at, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(host + at, v.data(), v.size() * sizeof(T));
}

// One launch: the share's live programs over one group of batches.
template <typename Word>
class GroupLaunch {
 public:
  GroupLaunch(const std::vector<KeptQuery*>& queries, const std::vector<DistanceJob>& jobs,
              const std::vector<BatchView>& batches, const std::vector<ColumnSpec>& columns, int device)
      : q_(queries), jobs_(jobs), batches_(batches), columns_(columns), device_(device) {
    for (const BatchView& b : batches) {
      rows_ += b.n;
      stride_ = std::max(stride_, b.n);
    }
    positions_ = stride_ * static_cast<std::int64_t>(batches.size());
    for (const KeptQuery* q : queries) kmax_ = std::max(kmax_, std::max<std::int64_t>(q->k, 1));
  }

  void run() {
    if (rows_ > 0) {
      launch();
      for (std::size_t y = 0; y < q_.size(); ++y) absorb(y);
    }
    for (KeptQuery* q : q_) {
      q->stats.rows_scanned += rows_;
      q->stats.batches += static_cast<std::int64_t>(batches_.size());
      q->stats.device_ms += ms_;
    }
  }

 private:
  void launch() {
    st_ = thread_stream(device_, 0);
    const std::int64_t Q = static_cast<std::int64_t>(q_.size()), nj = static_cast<std::int64_t>(jobs_.size());
    const int per_batch = static_cast<int>((stride_ + kThreads - 1) / kThreads);
    // Everything the kernels read, in one block.
    Staging lay;
    const std::size_t views_at = lay.add(batches_.size() * sizeof(BatchView));
    const std::size_t launches_at = lay.add(q_.size() * sizeof(RowsLaunch));
    std::vector<std::size_t> code_at, consts_at, nulls_at, vectors_at, queries_at;
    for (const KeptQuery* q : q_) {
      const Program& p = *q->program;
      code_at.push_back(lay.add(p.code.size() * sizeof(Instr)));
      consts_at.push_back(lay.add(p.consts.size() * sizeof(Value)));
      nulls_at.push_back(lay.add(p.const_nulls.size()));
      vectors_at.push_back(lay.add(p.vectors.size() * sizeof(float)));
    }
    for (const DistanceJob& j : jobs_) queries_at.push_back(lay.add(q_.size() * j.qdim * sizeof(float)));
    const std::size_t counters_at = lay.add(q_.size() * 2 * sizeof(unsigned long long));
    // The kernels' own buffers follow in the same allocation (one
    // cudaMallocAsync per launch), never copied.
    Staging room = lay;
    take_ = std::min(kmax_, positions_);
    // Few tiles: each tile's words come back and the host merges them.
    const std::int64_t tiles = select::bitonic_tiles(positions_, kmax_);
    by_tiles_ = tiles > 1 && tiles * take_ <= kMaxTileWords;
    per_program_ = by_tiles_ ? tiles * take_ : take_;
    const std::int64_t scratch_words =
        by_tiles_ ? 0 : select::bitonic_segments_scratch_words(positions_, Q, kmax_);
    const std::size_t dists_at = room.add(static_cast<std::size_t>(Q * nj * positions_) * sizeof(double));
    const std::size_t words_at = room.add(static_cast<std::size_t>(Q * positions_) * sizeof(Word));
    const std::size_t scratch_at = room.add(static_cast<std::size_t>(scratch_words) * sizeof(Word));
    const std::size_t tops_at = room.add(static_cast<std::size_t>(Q * per_program_) * sizeof(Word));
    AsyncBuffer<unsigned char> block(room.size(), st_);
    unsigned char* dev = block.get();
    double* dists = reinterpret_cast<double*>(dev + dists_at);
    Word* words = reinterpret_cast<Word*>(dev + words_at);
    Word* scratch = reinterpret_cast<Word*>(dev + scratch_at);
    Word* tops = reinterpret_cast<Word*>(dev + tops_at);
    unsigned char* host = lay.host();

    auto* views = reinterpret_cast<BatchView*>(host + views_at);
    for (std::size_t b = 0; b < batches_.size(); ++b) {
      views[b] = batches_[b];
      for (std::int64_t i = 0; i < nj; ++i) {  // program 0's distances; program y's dist_shift further
        ColumnView& c = views[b].column[jobs_[i].column];
        c.dist = dists + i * positions_ + static_cast<std::int64_t>(b) * stride_;
        c.dist_key = jobs_[i].key;
      }
    }
    auto* launches = reinterpret_cast<RowsLaunch*>(host + launches_at);
    auto* counters = reinterpret_cast<unsigned long long*>(dev + counters_at);
    for (std::size_t y = 0; y < q_.size(); ++y) {
      const Program& p = *q_[y]->program;
      put(host, code_at[y], p.code);
      put(host, consts_at[y], p.consts);
      put(host, nulls_at[y], p.const_nulls);
      put(host, vectors_at[y], p.vectors);
      const ProgramView pv{reinterpret_cast<const Instr*>(dev + code_at[y]),
                           reinterpret_cast<const Value*>(dev + consts_at[y]), dev + nulls_at[y],
                           reinterpret_cast<const float*>(dev + vectors_at[y]),
                           static_cast<std::int64_t>(y) * nj * positions_};
      launches[y] = RowsLaunch{pv,      row_plan(p), reinterpret_cast<const BatchView*>(dev + views_at),
                               stride_, per_batch,   counters + 2 * y};
      const std::vector<DistanceJob> own = distance_jobs(p);  // this program's constants
      for (std::int64_t i = 0; i < nj; ++i)
        std::memcpy(host + queries_at[i] + y * jobs_[i].qdim * sizeof(float),
                    p.vectors.data() + own[i].query_at, jobs_[i].qdim * sizeof(float));
      auto* c = reinterpret_cast<unsigned long long*>(host + counters_at) + 2 * y;
      c[0] = ~0ull;  // the first position that raised
      c[1] = 0;      // rows passed
    }

    cudaEvent_t start, stop;
    thread_events(device_, &start, &stop);
    GKNN_CUDA(cudaEventRecord(start, st_));
    GKNN_CUDA(cudaMemcpyAsync(dev, host, lay.size(), cudaMemcpyHostToDevice, st_));
    const auto* dviews = reinterpret_cast<const BatchView*>(dev + views_at);
    for (std::int64_t i = 0; i < nj; ++i)
      launch_vector_distances_many(jobs_[i], reinterpret_cast<const float*>(dev + queries_at[i]),
                                   static_cast<int>(Q), dviews, static_cast<std::int64_t>(batches_.size()),
                                   stride_, dists + i * positions_, nj * positions_, st_);
    const dim3 grid(static_cast<unsigned>(per_batch * batches_.size()), static_cast<unsigned>(Q));
    row_words_each<Word><<<grid, kThreads, 0, st_>>>(reinterpret_cast<const RowsLaunch*>(dev + launches_at),
                                                     words, positions_);
    GKNN_CUDA(cudaGetLastError());
    if (by_tiles_)
      select::bitonic_topk_tiles<Word>(words, positions_, Q, kmax_, tops, st_);
    else
      select::bitonic_topk_segments<Word>(words, positions_, Q, kmax_, tops, scratch, st_);
    // Back: every program's words, then the counters.
    const std::size_t top_bytes = static_cast<std::size_t>(Q * per_program_) * sizeof(Word);
    const std::size_t back_bytes = top_bytes + q_.size() * 2 * sizeof(unsigned long long);
    unsigned char* back = static_cast<unsigned char*>(pinned_scratch_bytes(1, back_bytes));
    if (!back) {
      back_fallback_.resize(back_bytes);
      back = back_fallback_.data();
    }
    GKNN_CUDA(cudaMemcpyAsync(back, tops, top_bytes, cudaMemcpyDeviceToHost, st_));
    GKNN_CUDA(
        cudaMemcpyAsync(back + top_bytes, counters, back_bytes - top_bytes, cudaMemcpyDeviceToHost, st_));
    GKNN_CUDA(cudaEventRecord(stop, st_));
    GKNN_CUDA(cudaStreamSynchronize(st_));
    float ms = 0;
    GKNN_CUDA(cudaEventElapsedTime(&ms, start, stop));
    ms_ = ms;
    tops_.assign(reinterpret_cast<const Word*>(back), reinterpret_cast<const Word*>(back) + Q * per_program_);
    const auto* c = reinterpret_cast<const unsigned long long*>(back + top_bytes);
    counters_.assign(c, c + 2 * Q);
  }

  // Program y's words into its rows, or the error of the row that raised.
  void absorb(std::size_t y) {
    KeptQuery& q = *q_[y];
    if (counters_[2 * y] != ~0ull) return explain(q, static_cast<std::int64_t>(counters_[2 * y]));
    q.stats.rows_passed += static_cast<std::int64_t>(counters_[2 * y + 1]);
    const std::int64_t take = std::min(q.k, rows_);
    // The program's words: its k smallest ascending, or each tile's (merged here).
    const Word* first = tops_.data() + y * per_program_;
    const Word* last = first + per_program_;
    if (by_tiles_) {
      merged_.assign(first, last);
      const auto mid = merged_.begin() + std::min<std::int64_t>(take, per_program_);
      std::partial_sort(merged_.begin(), mid, merged_.end());
      first = merged_.data();
      last = first + (mid - merged_.begin());
    }
    merge_words(first, std::min<std::int64_t>(take, last - first), q.k, q.rows);
  }

  // The row at `position` raised on the GPU: the CPU interpreter names the error.
  void explain(KeptQuery& q, std::int64_t position) {
    cpu_error_of_device_row(*q.program, columns_, batches_[static_cast<std::size_t>(position / stride_)],
                            position % stride_, q.error);
  }

  const std::vector<KeptQuery*>& q_;
  const std::vector<DistanceJob>& jobs_;
  const std::vector<BatchView>& batches_;
  const std::vector<ColumnSpec>& columns_;
  int device_;
  cudaStream_t st_ = nullptr;
  std::int64_t rows_ = 0, stride_ = 0, positions_ = 0, kmax_ = 1, take_ = 0;
  float ms_ = 0;
  bool by_tiles_ = false;         // each tile's words back (bitonic_topk_tiles), merged in absorb
  std::int64_t per_program_ = 0;  // words back per program
  std::vector<Word> tops_, merged_;
  std::vector<unsigned long long> counters_;
  std::vector<unsigned char> back_fallback_;
};

// The share's programs that have not raised, over one group.
void launch_share(const Share& sh, const std::vector<BatchView>& group,
                  const std::vector<ColumnSpec>& columns, int device) {
  std::vector<KeptQuery*> live;
  for (KeptQuery* q : sh.queries)
    if (q->error.kind == ErrorKind::None) live.push_back(q);
  if (live.empty()) return;
  if (sh.limbs == 1)
    GroupLaunch<U128>(live, sh.jobs, group, columns, device).run();
  else
    GroupLaunch<Limbs3>(live, sh.jobs, group, columns, device).run();
}

}  // namespace

void rank_kept_shared_gpu(const std::vector<BatchView>& batches, const std::vector<ColumnSpec>& columns,
                          std::vector<KeptQuery*>& queries, int device) {
  GKNN_CUDA(cudaSetDevice(device));
  keep_pool_memory(device);
  const std::vector<Share> shares = shares_of(queries);
  // Groups of batches as GpuTopK's push_resident makes them (any grouping
  // gives the same rows: the first error in scan order, the k best words).
  std::int64_t largest = 0;
  for (const BatchView& b : batches) largest = std::max(largest, b.n);
  const std::int64_t cap = std::max(kKeptGroupPositions, largest);
  std::vector<BatchView> group;
  std::int64_t stride = 0;
  auto flush = [&] {
    for (const Share& sh : shares) launch_share(sh, group, columns, device);
    group.clear();
    stride = 0;
  };
  for (const BatchView& b : batches) {
    if (!group.empty() && static_cast<std::int64_t>(group.size() + 1) * std::max(stride, b.n) > cap) flush();
    group.push_back(b);
    stride = std::max(stride, b.n);
  }
  if (!group.empty()) flush();
}

}  // namespace gknn::expr
