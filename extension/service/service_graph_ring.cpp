// The GPU service's side of the resident graph search kernel
// (service_graph_ring.h, docs/resident-graph-search.md).
#include "service_graph_ring.h"

#include "service.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "gknn/graph.h"
#include "gknn/runtime.h"

extern "C" {
#include "storage/spin.h"
}

namespace gknn_service {

namespace {

struct GraphServing {
  std::shared_ptr<Resident> image;
  std::unique_ptr<gknn::graph::GraphServer> server;         // the image's on a GPU
  std::unique_ptr<gknn::graph::CpuGraphServer> cpu_server;  // else (gknn.service_cpu_ring)
  std::function<void()> keep_alive;                         // whichever serves (may throw)
  char how[32];  // how it serves, for the stop's log line: CTAs a query (the device's choice) or the CPU
  uint32 seen[kRingSlots];  // each slot's answered number when last counted
  uint64 served;            // requests answered through the ring since it started
  int64 started_us;
  int64 active_us;  // when a request was last seen answered (or it started)
};
GraphServing* serving = nullptr;
bool ring_registered = false;  // the ring is pinned and mapped for the devices
bool ring_fault = false;       // the kernel failed or its ring did not drain: the service restarts

// The requests answered since the last call: each bumps its slot's answered
// number by one, which wraps (a slot at 2^32 after days of load), so each
// slot's advance is taken modulo 2^32.
uint64 ring_answered_since_seen() {
  uint64 n = 0;
  for (int i = 0; i < kRingSlots; ++i) {
    const uint32 now = *ring_answered(i);
    n += static_cast<uint32>(now - serving->seen[i]);
    serving->seen[i] = now;
  }
  return n;
}

void keep_serving_alive() {
  try {
    serving->keep_alive();
  } catch (const std::exception&) {
    ereport(LOG, (errmsg("gknn GPU service: the resident graph search failed")));
    ring_fault = true;
  }
}

// The ring's searches since the last call, added to the service's (each
// request answered bumps its slot's answered number: refusals count too).
void count_ring_searches(ServiceShared* ctl) {
  const int64 n = static_cast<int64>(ring_answered_since_seen());
  if (n <= 0) return;
  serving->served += static_cast<uint64>(n);
  serving->active_us = now_us();
  SpinLockAcquire(&ctl->mutex);
  ctl->requests += n;
  ctl->searches += n;
  SpinLockRelease(&ctl->mutex);
}

}  // namespace

// A kernel left with nothing to search holds its SMs (and the GPU busy as
// nvidia-smi shows it): stopped after this long without a request (the next
// graph search starts it again through the request path).
constexpr int64 kServingIdleUs = 250000;

// Frees the slots their backends gave up once answered, and keeps the
// kernel's next launch queued (once a lifetime at least: the loop's wait
// is short while it serves); stops it when idle.
void pump_serving(ServiceShared* ctl, const std::atomic<bool>& device_fault) {
  if (!serving) return;
  bool waiting = false;
  for (int i = 0; i < kRingSlots; ++i) {
    // The owner before the numbers: a backend writes its request before it
    // abandons the slot, so an abandoned slot read here shows that request.
    uint32 owner = pg_atomic_read_u32(&ctl->ring_owner[i]);
    pg_read_barrier();
    if (ring_slot_waiting(i)) {
      waiting = true;
      continue;
    }
    if ((owner & kRingAbandoned) != 0) (void)pg_atomic_compare_exchange_u32(&ctl->ring_owner[i], &owner, 0);
  }
  count_ring_searches(ctl);
  if (!waiting && now_us() - serving->active_us > kServingIdleUs) {
    stop_serving(ctl, device_fault);
    return;
  }
  keep_serving_alive();
}

// Stops the kernel: the ring no longer serves; every slot held (a free one
// at once, a backend's once its request is answered and it lets go); then
// the kernel stopped and the slots freed.
void stop_serving(ServiceShared* ctl, const std::atomic<bool>& device_fault) {
  if (!serving) return;
  stop_ring(ctl);
  bool held[kRingSlots] = {};
  int nheld = 0;
  const int64 until = now_us() + 2000000;
  while (nheld < kRingSlots && !ring_fault && !device_fault) {
    bool waiting = false;
    for (int i = 0; i < kRingSlots; ++i) {
      if (held[i]) continue;
      uint32 owner = pg_atomic_read_u32(&ctl->ring_owner[i]);  // before the numbers, as in pump_serving
      pg_read_barrier();
      const bool w = ring_slot_waiting(i);
      waiting = waiting || w;
      if (!w && (owner == 0 || (owner & kRingAbandoned) != 0) &&
          pg_atomic_compare_exchange_u32(&ctl->ring_owner[i], &owner, kRingHeld)) {
        held[i] = true;
        ++nheld;
      }
    }
    if (waiting) keep_serving_alive();
    if (now_us() > until) {
      ereport(LOG, (errmsg("gknn GPU service: the resident graph search's ring did not drain within 2 s")));
      ring_fault = true;
    }
  }
  count_ring_searches(ctl);
  ereport(LOG, (errmsg("gknn GPU service: resident graph search stopped: %llu requests through the ring in "
                       "%.3f s (%d slots, %s)",
                       static_cast<unsigned long long>(serving->served),
                       (now_us() - serving->started_us) / 1e6, kRingSlots, serving->how)));
  delete serving;  // the GraphServer's destructor stops the kernel and waits for it
  serving = nullptr;
  for (int i = 0; i < kRingSlots; ++i)
    if (held[i]) pg_atomic_write_u32(&ctl->ring_owner[i], 0);
}

bool start_serving(ServiceShared* ctl, std::shared_ptr<Resident>& r,
                   const std::vector<const RequestSlot*>& group, bool nothing_else_runs,
                   const std::atomic<bool>& device_fault) {
  if (!r->graph || !ring_memory() || group.empty() || (!r->graph_gpu && !gknn_service_cpu_ring)) return false;
  const RequestSlot* first = group[0];
  // The kernel serves this image already: these found every slot taken (or
  // read the descriptor before it was published): the executors search
  // them beside it.
  if (serving && serving->image == r) return false;
  // What the ring takes; anything else goes the executors' way (and its error).
  for (const RequestSlot* s : group) {
    if (s->ring_tries >= 2 || s->dim != r->graph->dim || s->dim > kRingMaxDim || s->ef < 1 ||
        s->k > kRingMaxK ||
        !gknn::graph::ring_request_fits(static_cast<int>(std::max<int64>(s->ef, s->k)),
                                        static_cast<int>(s->k), kRingMaxK) ||
        !key_equal(s->key, first->key))
      return false;
  }
  stop_serving(ctl, device_fault);       // another image's kernel, if any
  if (!nothing_else_runs) return false;  // started only where nothing else runs or was taken beside it
  RingDescriptor d = read_ring(ctl);
  try {
    if (r->graph_gpu && !ring_registered) {
      gknn::register_host_memory(ring_memory(), ring_bytes());
      ring_registered = true;
    }
    gknn::graph::RingSpec spec;
    spec.host = ring_memory();
    spec.slots = kRingSlots;
    spec.layout = ring_layout();
    spec.epoch = d.epoch + 1;
    spec.row_ids = r->graph->ids.data();
    gknn::graph::SearchParams sp;
    sp.k = kRingMaxK;
    sp.seed = r->graph->seed;
    auto next = std::make_unique<GraphServing>();
    if (r->graph_gpu) {
      next->server = std::make_unique<gknn::graph::GraphServer>(*r->graph_gpu, spec, 0, sp);
      gknn::graph::GraphServer* server = next->server.get();
      next->keep_alive = [server] { server->keep_alive(); };
      snprintf(next->how, sizeof next->how, "%d CTAs a query", server->team());
    } else {  // the image's graph and vectors, on the CPU: it outlives the server (image below)
      const GraphImageData& g = *r->graph;
      next->cpu_server =
          std::make_unique<gknn::graph::CpuGraphServer>(g.graph, g.vectors.data(), g.dim, g.metric, spec, sp);
      gknn::graph::CpuGraphServer* server = next->cpu_server.get();
      next->keep_alive = [server] { server->keep_alive(); };
      snprintf(next->how, sizeof next->how, "on the CPU");
    }
    serving = next.release();
    serving->image = r;
    for (int i = 0; i < kRingSlots; ++i) serving->seen[i] = *ring_answered(i);
    serving->served = 0;
    serving->started_us = serving->active_us = now_us();
  } catch (const std::exception&) {
    return false;  // the executors search it
  }
  d.serving = true;
  d.epoch += 1;
  d.key = first->key;
  d.key.generation = r->key.generation;  // the image's: it serves searches of that generation or older
  d.entries = r->entries;
  write_ring(ctl, d);
  return true;
}

const Resident* serving_image() { return serving ? serving->image.get() : nullptr; }

bool serving_faulted() { return ring_fault; }

void stop_ring(ServiceShared* ctl) {
  RingDescriptor d = read_ring(ctl);
  d.serving = false;
  write_ring(ctl, d);
}

void reset_ring(ServiceShared* ctl) {
  if (pg_atomic_read_u32(&ctl->ring_seq) & 1) (void)pg_atomic_fetch_add_u32(&ctl->ring_seq, 1);
  stop_ring(ctl);
}

}  // namespace gknn_service
