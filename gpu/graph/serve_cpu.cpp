// CpuGraphServer: GraphServer's ring protocol served by a host thread with
// search_cpu (graph.h), so that the ring's writers (the GPU service's
// backends) can be tested on machines without a GPU. Same requests, same
// refusals, same answers as the kernel's (serve_kernel in search_cuda.cu).
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gknn/distance.h"
#include "gknn/graph.h"

namespace gknn::graph {

struct CpuGraphServer::Impl {
  const Graph& g;
  const float* vectors;
  int dim;
  Metric metric;
  RingSpec ring;
  SearchParams sp;
  std::vector<std::uint32_t> seen;  // each slot's last request number taken
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::string failure;  // written by the thread before `failed`
  std::thread thread;

  Impl(const Graph& graph, const float* v, int d, Metric m, const RingSpec& r, const SearchParams& p)
      : g(graph), vectors(v), dim(d), metric(m), ring(r), sp(p) {
    if (!ring.host || ring.slots < 1 || ring.slots > RingLayout::kMaxRingSlots || ring.layout.max_dim < dim ||
        ring.layout.max_k < 1 || ring.layout.max_k > kMaxDeviceEf || sp.skip)
      throw Error(ErrorCode::InvalidArgument, "CpuGraphServer: bad ring, slots, k or skip flags");
    seen.resize(std::size_t(ring.slots));
    for (int s = 0; s < ring.slots; ++s) seen[std::size_t(s)] = load(slot(s) + RingLayout::kAnsweredAt);
    thread = std::thread([this] { run(); });
  }

  ~Impl() {
    stop.store(true);
    thread.join();
  }

  unsigned char* slot(int s) const {
    return static_cast<unsigned char*>(ring.host) + std::size_t(s) * ring.layout.slot_bytes();
  }
  static std::uint32_t load(const unsigned char* p) {
    return __atomic_load_n(reinterpret_cast<const std::uint32_t*>(p), __ATOMIC_ACQUIRE);
  }
  std::uint32_t doorbell(int s) const {
    return load(static_cast<const unsigned char*>(ring.host) + ring.layout.doorbell_at(ring.slots) +
                4 * std::size_t(s));
  }

  void run() {
    try {
      // Slots in turn; a short sleep when none had a request (a test aid:
      // latency is not what it is for).
      while (!stop.load()) {
        bool any = false;
        for (int s = 0; s < ring.slots; ++s) {
          const std::uint32_t r = doorbell(s);
          if (r == seen[std::size_t(s)]) continue;
          seen[std::size_t(s)] = r;
          answer(slot(s), r);
          any = true;
        }
        if (!any) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    } catch (const std::exception& e) {
      failure = e.what();
      failed.store(true);
    }
  }

  // The kernel's rules: another epoch's request, or a k or list it has no
  // room for, refused unsearched (status 1); else searched, the answers
  // (rows mapped through row_ids, -1 / NaN after the last) and status 0,
  // then the request's number.
  void answer(unsigned char* at, std::uint32_t number) const {
    std::int32_t ef, k;
    std::uint32_t epoch, status = 1;
    std::memcpy(&ef, at + RingLayout::kEfAt, sizeof ef);
    std::memcpy(&k, at + RingLayout::kKAt, sizeof k);
    std::memcpy(&epoch, at + RingLayout::kEpochAt, sizeof epoch);
    if (epoch == ring.epoch && ring_request_fits(ef, k, ring.layout.max_k)) {
      std::vector<float> q(static_cast<std::size_t>(dim));
      std::memcpy(q.data(), at + RingLayout::kQueryAt, sizeof(float) * std::size_t(dim));
      SearchParams c = sp;
      c.ef = ef;
      c.k = k;
      std::vector<std::int64_t> ids(static_cast<std::size_t>(k));
      std::vector<double> d(static_cast<std::size_t>(k));
      search_cpu(g, vectors, dim, metric, q.data(), 1, c, ids.data(), d.data());
      for (int i = 0; i < k; ++i) {
        const std::int64_t id = ids[std::size_t(i)] < 0 ? -1
                                : ring.row_ids          ? ring.row_ids[ids[std::size_t(i)]]
                                                        : ids[std::size_t(i)];
        const double dist = id < 0 ? canonical_score(NAN) : d[std::size_t(i)];
        std::memcpy(at + ring.layout.ids_at() + sizeof(std::int64_t) * std::size_t(i), &id, sizeof id);
        std::memcpy(at + ring.layout.distances_at() + sizeof(double) * std::size_t(i), &dist, sizeof dist);
      }
      status = 0;
    }
    std::memcpy(at + RingLayout::kStatusAt, &status, sizeof status);
    __atomic_store_n(reinterpret_cast<std::uint32_t*>(at + RingLayout::kAnsweredAt), number,
                     __ATOMIC_RELEASE);
  }
};

CpuGraphServer::CpuGraphServer(const Graph& g, const float* vectors, int dim, Metric metric,
                               const RingSpec& ring, const SearchParams& sp)
    : impl_(new Impl(g, vectors, dim, metric, ring, sp)) {}

CpuGraphServer::~CpuGraphServer() { delete impl_; }

void CpuGraphServer::keep_alive() {
  if (impl_->failed.load()) throw Error(ErrorCode::DeviceFault, "CpuGraphServer: " + impl_->failure);
}

}  // namespace gknn::graph
