#!/usr/bin/env python3
"""Phase profile of gpu_graph's search kernel (an experiment build, never committed).

Rewrites gpu/graph/search_cuda.cu and bench/kernels/bench_graph.cpp in the
working tree: clock64() marks in the leader CTA's thread 0 between the
search kernel's barriers, summed per phase into a __device__ array, and
gknn_bench_graph's "profile" mode printing the sums per query (widths 4 and
8, calls of 1 and 3 queries, ef 10-64, with recall) before its ncu section.
Build gknn_bench_graph from the rewritten tree, run
`gknn_bench_graph N DIM 32 [file.fvecs|-] profile` on the GPU host, then
`git checkout gpu/graph/search_cuda.cu bench/kernels/bench_graph.cpp`.
The marks add a few microseconds; the instrumented kernel takes 64 bytes of
staging room less. Made for 076ab94's kernel, brought to 8d6627f's (merge_batch's own drop
moved out to be timed apart), 58781a0's (the merge templated on Spare) and offer_batch's
scoring through score_by_team: a later change to
the marked lines makes a replacement fail (AssertionError) rather than mis-apply.
Results: bench/results/graph-kernel-phases-H200-2026-11-28.md.
"""
import os
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
os.chdir(root)
if subprocess.run(["git", "diff", "--quiet", "--", "gpu/graph/search_cuda.cu", "bench/kernels/bench_graph.cpp"]).returncode:
    sys.exit("graph-phase-profile: commit or stash the changes to the two files first")
import sys
p='gpu/graph/search_cuda.cu'
s=open(p).read()
def rep(old, new):
    global s
    assert old in s, old[:80]
    s = s.replace(old, new)
rep('''namespace gknn::graph {
namespace {
''','''namespace gknn::graph {
__device__ unsigned long long g_prof[32];
__shared__ long long prof_t;
#define PROF_MARK(slot) do { if (threadIdx.x == 0 && cluster_rank_p() == 0) { long long now = clock64(); atomicAdd(&g_prof[slot], (unsigned long long)(now - prof_t)); prof_t = now; } } while (0)
#define PROF_ADD(slot, v) do { if (threadIdx.x == 0 && cluster_rank_p() == 0) atomicAdd(&g_prof[slot], (unsigned long long)(v)); } while (0)
__device__ __forceinline__ int cluster_rank_p() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return int(r);
}
void graph_profile_take(unsigned long long* out) {
  cudaMemcpyFromSymbol(out, g_prof, sizeof(g_prof));
  unsigned long long z[32] = {};
  cudaMemcpyToSymbol(g_prof, z, sizeof(z));
}
namespace {
''')
rep('''__device__ void merge_batch(Shared& sh, int ef) {
  drop_hopeless<Spare>(sh, ef);
  const int nb = sh.batch;''','''__device__ void merge_batch(Shared& sh, int ef) {
  const int nb = sh.batch;''')
rep('''    if (given) sh.bd[at] = given[threadIdx.x];
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.hash_count += sh.batch;
  if (!given) score_by_team(sh, team, q, st, vectors, dim, metric, sh.bid, sh.bd, sh.batch, sh.batch);
  merge_batch<Spare>(sh, ef);
}''','''    if (given) sh.bd[at] = given[threadIdx.x];
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.hash_count += sh.batch;
  const int eo = count > 0 && ids != sh.rows ? 16 : 0;
  PROF_MARK(4 + eo);
  PROF_ADD(10 + eo, sh.batch);
  if (!given) score_by_team(sh, team, q, st, vectors, dim, metric, sh.bid, sh.bd, sh.batch, sh.batch);
  PROF_MARK(5 + eo);
  drop_hopeless<Spare>(sh, ef);
  PROF_ADD(11 + eo, sh.batch);
  PROF_MARK(12 + eo);
  merge_batch<Spare>(sh, ef);
  PROF_MARK(6 + eo);
}''')
rep('''  if (threadIdx.x == 0) sh.hash_count = 0, sh.size = 0, sh.cur = 0, sh.batch = 0, sh.reset = 0;
  __syncthreads();
  if (team.rank > 0) {''','''  if (threadIdx.x == 0) sh.hash_count = 0, sh.size = 0, sh.cur = 0, sh.batch = 0, sh.reset = 0;
  __syncthreads();
  PROF_MARK(0);
  PROF_ADD(9, 1);
  if (team.rank > 0) {''')
rep('''  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  Team team;''','''  extern __shared__ __align__(16) unsigned char smem[];
  if (threadIdx.x == 0) prof_t = clock64();
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  Team team;''')
rep('''  const int rows_per_batch = nt / degree;
  for (;;) {
    if (sh.reset) hash_reset(sh);''','''  PROF_MARK(1);
  const int rows_per_batch = nt / degree;
  for (;;) {
    if (sh.reset) hash_reset(sh);
    PROF_MARK(7);''')
rep('''    const int npick = sh.npick;
    if (npick == 0) break;''','''    const int npick = sh.npick;
    PROF_MARK(2);
    if (npick == 0) break;
    PROF_ADD(8, 1);''')
rep('''      __syncthreads();
      offer_batch<kSpare>(sh, team, q, st, vectors, dim, metric, edges, degree, skip, sh.rows, nullptr,''','''      __syncthreads();
      PROF_MARK(3);
      offer_batch<kSpare>(sh, team, q, st, vectors, dim, metric, edges, degree, skip, sh.rows, nullptr,''')
rep('''  if (team.size > 1) {
    if (threadIdx.x == 0) sh.published = kSearchEnded;''','''  PROF_MARK(13);
  if (team.size > 1) {
    if (threadIdx.x == 0) sh.published = kSearchEnded;''')
rep('stage_room = std::size_t(optin) > smem + 16 ? std::size_t(optin) - smem - 16 : 0;','stage_room = std::size_t(optin) > smem + 80 ? std::size_t(optin) - smem - 80 : 0;')
open(p,'w').write(s)

p='bench/kernels/bench_graph.cpp'
s=open(p).read()
rep('#include <cuda_profiler_api.h>','#include <cuda_profiler_api.h>\n#include <cuda_runtime_api.h>')
rep('''// Single queries only, the profiled ones between cudaProfilerStart/Stop.''','''namespace gknn::graph { void graph_profile_take(unsigned long long* out); }
// Single queries only, the profiled ones between cudaProfilerStart/Stop.''')
rep('''  cudaProfilerStart();
  for (int ef : {16, 64}) {''','''  const char* names[32] = {"init","entries-rest","pick","edges","hash","score","merge","reset","steps","queries","offered","kept","drop","end",0,0,
    0,0,0,0,"E.hash","E.score","E.merge",0,0,0,"E.offered","E.kept","E.drop",0,0,0};
  int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const int nt = 300;
  gknn::KnnRequest r;
  r.base = base; r.n = g.n; r.queries = queries; r.nq = nt; r.dim = dim; r.k = k;
  std::vector<std::int64_t> truth(nt * k), got(nt * k);
  std::vector<double> td(nt * k);
  gknn::exact_knn_gpu(r, 0, truth.data(), td.data());
  for (int width : {4, 8})
  for (int nqc : {1, 3})
  for (int ef : {10, 12, 16, 20, 64}) {
    unsigned long long pr[32];
    sp.ef = ef; sp.width = width;
    gknn::graph::graph_profile_take(pr);
    std::vector<double> ts;
    std::vector<std::int64_t> ids2(nqc * k); std::vector<double> d2(nqc * k);
    for (int i = 0; i < nt; ++i) { const auto t = Clock::now(); dg.search(queries + i * dim, nqc, sp, ids2.data(), d2.data()); ts.push_back(since(t)); std::copy(ids2.begin(), ids2.begin() + k, got.begin() + i * k); }
    gknn::graph::graph_profile_take(pr);
    std::sort(ts.begin(), ts.end());
    const double nqs = double(pr[9]);
    std::printf("prof width %d nq %d ef %d: recall %.4f call p50 %.1f us; per query:", width, nqc, ef, recall(truth, got, k, nt), ts[ts.size()/2]*1e6);
    for (int s = 0; s < 32; ++s) if (names[s]) {
      const bool count = s == 8 || s == 9 || s == 10 || s == 11 || s == 26 || s == 27;
      if (count) std::printf(" %s=%.1f", names[s], pr[s] / nqs);
      else std::printf(" %s=%.2fus", names[s], pr[s] / nqs / (clock_khz * 1e-3));
    }
    std::printf("\\n");
  }
  cudaProfilerStart();
  for (int ef : {16, 64}) {''')
open(p,'w').write(s)
