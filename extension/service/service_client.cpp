// The backend's side of the GPU service: its request slot, submitting,
// waiting on the latch, giving up on cancel or exit, and shipping an image.
//
// Nothing here holds a C++ object with a destructor across a PostgreSQL call
// (WaitLatch, CHECK_FOR_INTERRUPTS and ereport may leave by longjmp).
#include <sched.h>
#include <unistd.h>

#include <cstring>

#include "device.h"
#include "service.h"
#include "service_client.h"
#include "service_images.h"
#include "service_shmem.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/wait_event.h"
}

namespace gknn_service {
struct ServiceShared;
}
namespace {
// The resident graph kernel's ring slot this backend owns (slot + 1; 0: none), and its
// giving up (ring_search, below).
uint32 ring_slot_owned = 0;
void ring_abandon(gknn_service::ServiceShared* ctl, int slot);
}  // namespace

namespace gknn_service {
namespace {

constexpr long kCheckServiceMs = 1000;  // how often a waiting backend looks at the service
constexpr long kStartWaitMs = 30000;    // longest wait for a starting service

bool exit_callback_registered = false;

// Whether a slot in `state` holds its reply.
bool answered(uint32 state) { return state == kDone || state == kFailed; }

// A backend whose request went to a GPU service polls its slot for up to
// kClientSpinUs before it sleeps on its latch: the executor's SetLatch then
// finds no sleeper (no signal) and the backend goes on without a wake-up,
// the last one on a search's path (tens of microseconds against a small
// batch's ~0.1 ms). Only while the service has at most as many open
// requests as the host has CPUs (the pollers leave CPUs to the service),
// and only while this backend's recent replies came within the poll
// (recent_wait_us). Measured on the H200 as an experiment switch before it
// became this constant: ungated, gpu_graph +3 to +10 % at 16 clients and
// -1 to -9 % at 64 (the host's idle time ~50 % -> ~5 %;
// service-ab-GKNN_SERVICE_CLIENT_SPIN_US-300-H200-2026-11-28.md); with the
// first gate gpu_graph +7 / +15 % at 16 clients, gpu_ivfpq and exact -2 to
// -6 % (their longer batches outlast the poll: the second gate's reason;
// ...-300-gated-H200-2026-11-28.md); with both, one run each way of
// fashion-mnist-targets minutes apart on one host
// (fashion-mnist-targets-H200-2026-11-28-a069187{,-spin300}.md): at 16
// clients gpu_graph +15 to +25 %, gpu_ivfpq +42 to +53 %, exact +5 %; at 64
// +9 to +21 %, +54 to +67 %, +10 %; one client's p50 lower for every
// engine (gpu_ivfpq 0.56 -> 0.26 ms); pgvector's hnsw +2 to +4 % between
// the two runs.
constexpr int64 kClientSpinUs = 300;

// This backend's recent waits for a reply (submit to reply seen), a moving
// average: a poll is tried only where it would have been answered.
double recent_wait_us = 0;

void note_wait(const RequestSlot* s) {
  recent_wait_us += (static_cast<double>(now_us() - s->submit_us) - recent_wait_us) / 4;
}

// Whether a backend may poll: few enough requests open that the pollers
// leave CPUs to the service and everyone else.
bool few_open(ServiceShared* ctl) {
  static const uint32 cpus = [] {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return static_cast<uint32>(n > 0 ? n : 1);
  }();
  return pg_atomic_read_u32(&ctl->open_requests) <= cpus;
}

bool finished(RequestSlot* s) {
  SpinLockAcquire(&s->mutex);
  const uint32 state = s->state;
  SpinLockRelease(&s->mutex);
  return answered(state);
}

// Polls `s` until its reply is in (true), `us` pass or an interrupt is
// pending (false).
bool spin_for_reply(RequestSlot* s, int64 us) {
  const int64 until = now_us() + us;
  while (!finished(s)) {
    if (INTERRUPTS_PENDING_CONDITION() || now_us() >= until) return false;
    sched_yield();
  }
  return true;
}

}  // namespace

// Gives up the slot's open request (cancel, error, exit): a request not yet
// taken is withdrawn; one being run is left to finish into the void.
void abandon(RequestSlot* s) {
  SpinLockAcquire(&s->mutex);
  if (s->state == kSubmitted)
    s->state = kFree;
  else if (s->state == kRunning)
    s->state = kAbandoned;
  else if (answered(s->state))
    s->state = kFree;
  SpinLockRelease(&s->mutex);
}

namespace {

void on_backend_exit(int, Datum) {
  if (shared() && ring_slot_owned) ring_abandon(shared(), static_cast<int>(ring_slot_owned) - 1);
  if (shared() && MyProc) {
    RequestSlot* s = my_slot();
    abandon(s);
    SpinLockAcquire(&s->mutex);
    s->build_open = 0;  // a build session left open: the service drops it
    s->topk_open = 0;   // a GpuTopK session too
    SpinLockRelease(&s->mutex);
  }
}

// Once a backend: on_backend_exit gives up what it still holds (a request
// slot's request, a ring slot).
void register_exit_callback() {
  if (exit_callback_registered) return;
  before_shmem_exit(on_backend_exit, 0);
  exit_callback_registered = true;
}

struct ServiceView {
  uint32 state;
  uint64 incarnation;
  Latch* latch;
  int device;
};

ServiceView view() {
  ServiceShared* ctl = shared();
  ServiceView v;
  SpinLockAcquire(&ctl->mutex);
  v.state = ctl->state;
  v.incarnation = ctl->incarnation;
  v.latch = ctl->latch;
  v.device = ctl->device;
  SpinLockRelease(&ctl->mutex);
  return v;
}

// Sleeps on the latch for at most `ms`, then serves interrupts; a pending
// cancel or termination gives up `s`'s request first.
void wait_a_while(RequestSlot* s, long ms) {
  (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
  ResetLatch(MyLatch);
  if (!INTERRUPTS_PENDING_CONDITION()) return;
  PG_TRY();
  { CHECK_FOR_INTERRUPTS(); }
  PG_CATCH();
  {
    if (s) abandon(s);
    PG_RE_THROW();
  }
  PG_END_TRY();
}

}  // namespace

RequestSlot* my_slot() { return &shared()->slots[MyProc->pgprocno]; }

// Waits until the slot may be filled: a cancelled request of ours that the
// service is still running must finish first.
void acquire_slot(RequestSlot* s) {
  register_exit_callback();
  for (;;) {
    SpinLockAcquire(&s->mutex);
    if (answered(s->state)) s->state = kFree;
    bool free = s->state == kFree;
    SpinLockRelease(&s->mutex);
    if (free) return;
    wait_a_while(nullptr, 10);
  }
}

bool submit(RequestSlot* s) {
  ServiceView v = view();
  if (v.state != kReady) return false;
  s->owner_latch = MyLatch;
  s->owner_pid = MyProcPid;
  s->incarnation = v.incarnation;
  s->submit_us = now_us();
  s->reply = kServiceGone;
  s->progress_phase = -1;
  s->progress_done = s->progress_total = 0;
  SpinLockAcquire(&s->mutex);
  s->state = kSubmitted;
  SpinLockRelease(&s->mutex);
  if (v.latch) SetLatch(v.latch);
  return true;
}

ReplyCode await_reply(RequestSlot* s, WaitHook hook, void* arg) {
  const uint64 incarnation = s->incarnation;
  if (recent_wait_us <= kClientSpinUs && view().device >= 0 && few_open(shared()))
    (void)spin_for_reply(s, kClientSpinUs);
  for (;;) {
    SpinLockAcquire(&s->mutex);
    uint32 state = s->state;
    if (answered(state)) s->state = kFree;
    SpinLockRelease(&s->mutex);
    if (answered(state)) {
      note_wait(s);
      return static_cast<ReplyCode>(s->reply);
    }
    ServiceView now = view();
    if (now.incarnation != incarnation || now.state != kReady) {
      abandon(s);
      return kServiceGone;
    }
    if (hook) hook(s, arg);
    wait_a_while(s, kCheckServiceMs);
  }
}

ReplyCode call(RequestSlot* s, WaitHook hook, void* arg) {
  if (!submit(s)) return kServiceGone;
  return await_reply(s, hook, arg);
}

void raise_reply_error(const RequestSlot* s) {
  ereport(ERROR, (errcode(s->sqlstate), errmsg("gknn GPU service: %s", s->message)));
}

void wake_service() {
  ServiceView v = view();
  if (v.latch) SetLatch(v.latch);
}

namespace {

// The service's state once it has finished starting (waits for that).
ServiceView settled_view() {
  long waited = 0;
  for (;;) {
    ServiceView v = view();
    if (v.state != kStarting || waited >= kStartWaitMs) return v;
    wait_a_while(nullptr, 10);
    waited += 10;
  }
}

void raise_unavailable(const char* why, const char* hint) {
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                  errmsg("gknn.device is \"gpu\" but %s", why), hint ? errhint("%s", hint) : 0));
}

ImageKey make_key(Oid index, RelFileNode node, uint64 generation) {
  ImageKey k;
  memset(&k, 0, sizeof(k));
  k.database = MyDatabaseId;
  k.index = index;
  k.node = node;
  k.generation = generation;
  return k;
}

// The payload of a request of `bytes`: the slot's own area, or a new DSM
// segment (owned by the current resource owner: an ERROR detaches it).
char* payload_for(RequestSlot* s, int64 bytes, dsm_segment** seg) {
  *seg = nullptr;
  s->payload_dsm = DSM_HANDLE_INVALID;
  if (bytes <= kInlineBytes) return s->inline_payload;
  *seg = dsm_create(bytes, 0);
  s->payload_dsm = dsm_segment_handle(*seg);
  return static_cast<char*>(dsm_segment_address(*seg));
}

}  // namespace
}  // namespace gknn_service

using namespace gknn_service;

ServiceRoute gknn_service_route() {
  ServiceRoute route{false, -1, "gknn.device = cpu"};
  if (gknn_device_mode == GKNN_DEVICE_CPU) return route;
  const bool need_gpu = gknn_device_mode == GKNN_DEVICE_GPU;
  if (shared() == nullptr) {
    if (need_gpu)
      raise_unavailable(
          "the gknn GPU service is not running",
          "Add gknn to shared_preload_libraries (with gknn.service = gpu) and restart the server.");
    // gknn.service is defined only where gknn is preloaded.
    route.why = gknn_service_mode == GKNN_SERVICE_OFF ? "gknn.service = off"
                                                      : "gknn is not in shared_preload_libraries";
    return route;
  }
  ServiceView v = settled_view();
  if (v.state == kReady && (v.device >= 0 || !need_gpu)) {
    route.use_service = true;
    route.device = v.device;
    route.why = nullptr;
    return route;
  }
  route.why =
      v.state == kNoDevice ? "the gknn service has no usable device" : "the gknn service is not running";
  if (need_gpu) {
    if (v.state == kReady)
      raise_unavailable("the gknn service runs on the CPU (gknn.service = cpu)", nullptr);
    if (v.state == kNoDevice) {
      char reason[kMessageBytes];
      SpinLockAcquire(&shared()->mutex);
      strlcpy(reason, shared()->reason, sizeof(reason));
      SpinLockRelease(&shared()->mutex);
      raise_unavailable(reason, nullptr);
    }
    raise_unavailable("the gknn GPU service is not running",
                      "It restarts by itself after a failure; try again.");
  }
  return route;
}

namespace {

// A graph search written straight into the resident kernel's ring, where
// the service says that kernel serves this image. 1: answered (ids, as
// heap TIDs, distances, count, rows); 0: not served by the ring (the
// request path then); never an ERROR while the slot is this backend's.
constexpr int kRingNotServed = 0, kRingAnswered = 1;

// Whether the ring serves `key` now; its epoch and image entries (no lock:
// every ring search reads it).
bool ring_serves(ServiceShared* ctl, const ImageKey& key, uint32* epoch, int64* entries) {
  const RingDescriptor d = read_ring(ctl);
  *epoch = d.epoch;
  *entries = d.entries;
  // Its image serves searches of its generation or older, as the request
  // path's does (the newest image a search may take).
  return d.serving && d.key.database == key.database && d.key.index == key.index &&
         RelFileNodeEquals(d.key.node, key.node) && d.key.generation >= key.generation;
}

void ring_release(ServiceShared* ctl, int slot) {
  pg_memory_barrier();  // the answers read before another backend may claim the slot
  pg_atomic_write_u32(&ctl->ring_owner[slot], 0);
  ring_slot_owned = 0;
}

// Gives the slot up to the service (an interrupt or an exit while the
// kernel holds its request): freed once answered.
void ring_abandon(ServiceShared* ctl, int slot) {
  pg_atomic_fetch_or_u32(&ctl->ring_owner[slot], kRingAbandoned);
  ring_slot_owned = 0;
}

bool ring_try_claim(ServiceShared* ctl, int at, uint32 me) {
  uint32 expected = 0;
  return pg_atomic_read_u32(&ctl->ring_owner[at]) == 0 &&
         pg_atomic_compare_exchange_u32(&ctl->ring_owner[at], &expected, me);
}

// Whether none of cluster c's slots is taken (c, c + kRingClusters, ...).
bool ring_cluster_idle(ServiceShared* ctl, int c) {
  for (int at = c; at < kRingSlots; at += kRingClusters)
    if (pg_atomic_read_u32(&ctl->ring_owner[at]) != 0) return false;
  return true;
}

// A free slot taken (-1: all taken; the request path then, which the
// service's executors search beside the kernel).
int ring_claim(ServiceShared* ctl, uint32 me) {
  // A cluster with nothing to search first (its first slot), then the
  // first free slot a round at a time (a place behind fewer searches
  // first); each pass from this backend's own place, so that backends do
  // not all try the same slot.
  const int from = MyProc->pgprocno % kRingClusters;
  for (int i = 0; i < kRingClusters; ++i) {
    const int c = (from + i) % kRingClusters;
    if (ring_cluster_idle(ctl, c) && ring_try_claim(ctl, c, me)) return c;
  }
  for (int i = 0; i < kRingSlots; ++i) {
    const int at = i / kRingClusters * kRingClusters + (from + i) % kRingClusters;
    if (ring_try_claim(ctl, at, me)) return at;
  }
  return -1;
}

// Whether the service that took this request is gone (read without its
// lock: the ring's waits check it now and then).
bool service_gone(ServiceShared* ctl, uint64 incarnation) {
  const volatile ServiceShared* v = ctl;
  return v->state != kReady || v->incarnation != incarnation;
}

int ring_search(const ImageKey& key, const float* query, int dim, int ef, int64 k, int64* ids,
                double* distances, int64* count, int64* rows, ServiceTrip* trip) {
  ServiceShared* ctl = shared();
  const int64 list = Max(static_cast<int64>(ef), k);  // the candidate list the search keeps
  if (!ring_memory() || dim > kRingMaxDim || ef < 1 || k > kRingMaxK ||
      !gknn::graph::ring_request_fits(static_cast<int>(list), static_cast<int>(k), kRingMaxK))
    return kRingNotServed;  // the request path's rules (and errors) for the rest
  uint32 epoch;
  int64 entries;
  if (!ring_serves(ctl, key, &epoch, &entries)) return kRingNotServed;
  const uint64 incarnation = static_cast<const volatile ServiceShared*>(ctl)->incarnation;
  if (service_gone(ctl, incarnation)) return kRingNotServed;
  register_exit_callback();  // it gives up a slot owned at exit
  const int slot = ring_claim(ctl, static_cast<uint32>(MyProc->pgprocno) + 1);
  if (slot < 0) return kRingNotServed;
  ring_slot_owned = static_cast<uint32>(slot) + 1;
  // Read again now that the slot is ours: a service stopping holds every
  // free slot first, so from here its kernel answers this request.
  uint32 epoch_now;
  if (!ring_serves(ctl, key, &epoch_now, &entries) || epoch_now != epoch) {
    ring_release(ctl, slot);
    return kRingNotServed;
  }
  const gknn::graph::RingLayout l = ring_layout();
  char* s = ring_slot(slot);
  const int32 ef32 = static_cast<int32>(list), k32 = static_cast<int32>(k);
  memcpy(s + l.kQueryAt, query, sizeof(float) * dim);
  memcpy(s + l.kEfAt, &ef32, sizeof(ef32));
  memcpy(s + l.kKAt, &k32, sizeof(k32));
  memcpy(s + l.kEpochAt, &epoch, sizeof(epoch));
  volatile uint32* request = ring_request(slot);
  const volatile uint32* answered = ring_answered(slot);
  const uint32 number = *request + 1;
  pg_write_barrier();
  *request = number;
  // The kernel runs while the ring serves (the service keeps its next launch
  // queued): no wake-up. Yield while waiting: at most kRingSlots wait so,
  // beside backends that need the CPUs.
  const int64 start = now_us();
  for (uint32 spins = 1; *answered != number; ++spins) {
    if (INTERRUPTS_PENDING_CONDITION()) {
      ring_abandon(ctl, slot);
      CHECK_FOR_INTERRUPTS();
      return kRingNotServed;  // an interrupt that did not end the query: ask again the other way
    }
    if ((spins & 255) == 0 && now_us() - start > 1000) {
      if (service_gone(ctl, incarnation)) {  // its kernel died with it
        ring_abandon(ctl, slot);
        return kRingNotServed;
      }
      wake_service();  // late: a stopped launch, perhaps
    }
    sched_yield();  // pause instead, or pause for 100 us first: no difference
                    // (fashion-mnist-ring-H200-2026-11-29-ring.md)
  }
  pg_read_barrier();
  uint32 status;
  memcpy(&status, s + l.kStatusAt, sizeof(status));
  if (status != 0) {  // another epoch: refused, never searched
    ring_release(ctl, slot);
    return kRingNotServed;
  }
  int64 n = 0;
  const char* out_ids = s + l.ids_at();
  while (n < k) {
    int64 id;
    memcpy(&id, out_ids + sizeof(int64) * n, sizeof(id));
    if (id < 0) break;
    ids[n++] = id;
  }
  memcpy(distances, s + l.distances_at(), sizeof(double) * n);
  ring_release(ctl, slot);
  *count = n;
  *rows = entries;
  const int64 took = now_us() - start;
  pg_atomic_fetch_add_u64(&ctl->ring_searches, 1);
  pg_atomic_fetch_add_u64(&ctl->ring_us, static_cast<uint64>(Max(took, 0)));
  if (trip) {
    trip->batch_id = 0;
    trip->batch_size = 1;
    trip->queue_ms = 0;
    trip->run_ms = took / 1000.0;
  }
  return kRingAnswered;
}

// A search's payload and request header (the query copied in); the reply
// (ids then float8 distances) comes back in the same payload.
char* begin_search(RequestSlot* s, uint32 kind, Oid index, RelFileNode node, uint64 generation,
                   const float* query, int dim, int64 k, dsm_segment** seg) {
  acquire_slot(s);
  int64 bytes =
      Max(static_cast<int64>(sizeof(float)) * dim, k * static_cast<int64>(sizeof(int64) + sizeof(double)));
  char* payload = payload_for(s, bytes, seg);
  s->kind = kind;
  s->key = make_key(index, node, generation);
  s->dim = dim;
  s->k = k;
  s->payload_bytes = sizeof(float) * dim;
  memcpy(payload, query, sizeof(float) * dim);
  return payload;
}

// Reads a search's reply: true with the rows on kOk; false on kNeedImage,
// or with *gone on a service that went away (auto; gpu: ERROR). ERROR on
// the service's error.
bool end_search(RequestSlot* s, ReplyCode reply, const char* payload, int64* ids, double* distances,
                int64* count, int64* entries, bool* gone, ServiceTrip* trip) {
  if (reply == kServiceGone) {
    if (gknn_device_mode == GKNN_DEVICE_GPU)
      ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                      errmsg("the gknn GPU service stopped while a query waited for it"),
                      errhint("It restarts by itself; try again.")));
    *gone = true;
    return false;
  }
  if (reply == kError) raise_reply_error(s);
  if (reply != kOk) return false;
  *count = s->count;
  *entries = s->entries;
  memcpy(ids, payload, sizeof(int64) * s->count);
  memcpy(distances, payload + sizeof(int64) * s->count, sizeof(double) * s->count);
  if (trip) {
    trip->batch_id = s->batch_id;
    trip->batch_size = s->batch_size;
    trip->queue_ms = (s->start_us - s->submit_us) / 1000.0;
    trip->run_ms = (s->end_us - s->start_us) / 1000.0;
  }
  return true;
}

}  // namespace

bool gknn_service_ivfpq_search(Oid index, RelFileNode node, uint64 generation, const float* query, int dim,
                               int probes, int mode, int64 k, int64* ids, double* distances, int64* count,
                               int64* entries, bool* gone, ServiceTrip* trip, ServiceHeld* held) {
  *gone = false;
  *count = 0;
  held->resident = false;
  RequestSlot* s = my_slot();
  dsm_segment* seg;
  char* payload = begin_search(s, kSearchIvfpq, index, node, generation, query, dim, k, &seg);
  s->probes = probes;
  s->mode = mode;
  ReplyCode reply = call(s);
  bool found = end_search(s, reply, payload, ids, distances, count, entries, gone, trip);
  if (reply == kNeedImage) {
    held->resident = s->resident != 0;
    held->generation = s->resident_generation;
  }
  if (seg) dsm_detach(seg);
  return found;
}

bool gknn_service_graph_search(Oid index, RelFileNode node, uint64 generation, const float* query, int dim,
                               int ef, int64 k, int64* ids, double* distances, int64* count, int64* rows,
                               bool* gone, ServiceTrip* trip) {
  *gone = false;
  *count = 0;
  const ImageKey key = make_key(index, node, generation);
  // The resident kernel's ring where it serves this image;
  // the request path starts it and says kUseRing, at most twice.
  for (int tries = 0;; ++tries) {
    if (ring_search(key, query, dim, ef, k, ids, distances, count, rows, trip) == kRingAnswered) return true;
    RequestSlot* s = my_slot();
    dsm_segment* seg;
    char* payload = begin_search(s, kSearchGraph, index, node, generation, query, dim, k, &seg);
    // The list is at least k, as the core raises it: then requests of one
    // list and different k share one search (service_worker.cpp).
    s->ef = static_cast<int32>(Max(static_cast<int64>(ef), k));
    s->ring_tries = tries;
    ReplyCode reply = call(s);
    if (reply == kUseRing) {
      if (seg) dsm_detach(seg);
      continue;
    }
    bool found = end_search(s, reply, payload, ids, distances, count, rows, gone, trip);
    if (seg) dsm_detach(seg);
    return found;
  }
}

namespace {

// One load request; ERROR on the service's error. False when the service went away.
bool load_step(RequestSlot* s) {
  ReplyCode reply = call(s);
  if (reply == kError) raise_reply_error(s);
  if (reply == kServiceGone && gknn_device_mode == GKNN_DEVICE_GPU)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the gknn GPU service stopped while an index image was shipped to it")));
  return reply == kOk;
}

}  // namespace

namespace {

// An array shipped in pieces.
struct Section {
  const void* data;
  int64 bytes;
};

// Ships `sections` in kChunkBytes pieces through one DSM segment, as
// requests of `kind` (section number, offset); false when the service went
// away meanwhile.
bool ship_sections(RequestSlot* s, uint32 kind, const Section* sections, int n) {
  int64 largest = 0;
  for (int i = 0; i < n; ++i) largest = Max(largest, sections[i].bytes);
  dsm_segment* seg = dsm_create(Max(Min(largest, kChunkBytes), int64{1}), 0);
  char* buf = static_cast<char*>(dsm_segment_address(seg));
  for (int i = 0; i < n; ++i) {
    for (int64 off = 0; off < sections[i].bytes; off += kChunkBytes) {
      int64 len = Min(kChunkBytes, sections[i].bytes - off);
      acquire_slot(s);
      memcpy(buf, static_cast<const char*>(sections[i].data) + off, len);
      s->kind = kind;
      s->section = i;
      s->section_offset = off;
      s->payload_bytes = len;
      s->payload_dsm = dsm_segment_handle(seg);
      if (!load_step(s)) {
        dsm_detach(seg);
        return false;
      }
    }
  }
  dsm_detach(seg);
  return true;
}

// A request without payload of `kind`; its reply code (ERROR on the
// service's error, and on a service gone with gknn.device = gpu).
ReplyCode bare_step(RequestSlot* s, uint32 kind) {
  acquire_slot(s);
  s->kind = kind;
  s->payload_dsm = DSM_HANDLE_INVALID;
  s->payload_bytes = 0;
  ReplyCode reply = call(s);
  if (reply == kError) raise_reply_error(s);
  if (reply == kServiceGone && gknn_device_mode == GKNN_DEVICE_GPU)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the gknn GPU service stopped while an index image was shipped to it")));
  return reply;
}

template <typename T>
Section section_of(const std::vector<T>& v) {
  return Section{v.data(), static_cast<int64>(v.size() * sizeof(T))};
}

}  // namespace

void gknn_service_ivfpq_load(Oid index, RelFileNode node, uint64 generation, const gknn::ivfpq::Image& image,
                             const IvfpqPageMap& pages) {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  const gknn::ivfpq::Params& p = image.quantizer.params;
  s->key = make_key(index, node, generation);
  s->shape.kind = kImageIvfpq;
  s->shape.dim = p.dim;
  s->shape.lists = p.lists;
  s->shape.m = p.m;
  s->shape.nbits = p.nbits;
  s->shape.metric = static_cast<int32>(p.metric);
  s->shape.kmeans_iters = p.kmeans_iters;
  s->shape.seed = p.seed;
  s->shape.entries = static_cast<int64>(image.ids.size());
  s->shape.vectors = gknn_service::stored_vectors(image);
  s->shape.pages = static_cast<int64>(pages.blocks.size());
  if (bare_step(s, kLoadBegin) != kOk) return;
  const Section sections[kSections] = {
      section_of(image.quantizer.centroids),
      section_of(image.quantizer.codebooks),
      section_of(image.offsets),
      section_of(image.codes),
      section_of(image.ids),
      gknn_service::stored_vectors(image) == gknn_service::kHalfVectors  ? section_of(image.half_vectors)
      : gknn_service::stored_vectors(image) == gknn_service::kBitVectors ? section_of(image.bit_vectors)
                                                                         : section_of(image.vectors),
      section_of(pages.list_pages),
      section_of(pages.blocks),
      section_of(pages.items),
  };
  if (!ship_sections(s, kLoadChunk, sections, kSections)) return;
  bare_step(s, kLoadEnd);
}

bool gknn_service_ivfpq_delta(Oid index, RelFileNode node, const IvfpqDelta& delta, int code_size, int dim,
                              IvfpqElement element) {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  s->key = make_key(index, node, delta.generation);
  s->delta.base = delta.base;
  s->delta.changes = delta.nchanges;
  s->delta.entries = delta.entries;
  s->delta.vectors = !delta.vectors             ? gknn_service::kNoVectors
                     : element == kIvfpqFloat16 ? gknn_service::kHalfVectors
                     : element == kIvfpqBit     ? gknn_service::kBitVectors
                                                : gknn_service::kFloatVectors;
  s->delta.kept = delta.nkept;
  if (bare_step(s, kDeltaBegin) != kOk) return false;
  if (s->resident) return true;  // another backend brought it there meanwhile
  const Section sections[kDeltaSections] = {
      {delta.changes, delta.nchanges * static_cast<int64>(sizeof(IvfpqPageChange))},
      {delta.ids, delta.entries * static_cast<int64>(sizeof(int64))},
      {delta.codes, delta.entries * code_size},
      {delta.vectors,
       delta.vectors ? delta.entries * static_cast<int64>(ivfpq_element_bytes(element, dim)) : 0},
      {delta.kept, delta.nkept * static_cast<int64>(sizeof(int64))},
  };
  if (!ship_sections(s, kDeltaChunk, sections, kDeltaSections)) return false;
  return bare_step(s, kDeltaEnd) == kOk;
}

void gknn_service_graph_load(Oid index, RelFileNode node, uint64 generation, const ServiceGraphImage& image) {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  memset(&s->shape, 0, sizeof(s->shape));
  s->key = make_key(index, node, generation);
  s->shape.kind = kImageGraph;
  s->shape.dim = image.dim;
  s->shape.metric = image.metric;
  s->shape.seed = image.seed;
  s->shape.entries = image.rows;
  s->shape.degree = image.degree;
  s->shape.graph_entries = image.nentries;
  if (bare_step(s, kLoadBegin) != kOk) return;
  const Section sections[kGraphSections] = {
      {image.edges, image.rows * image.degree * static_cast<int64>(sizeof(uint32))},
      {image.entries, image.nentries * static_cast<int64>(sizeof(uint32))},
      {image.vectors, image.rows * image.dim * static_cast<int64>(sizeof(float))},
      {image.ids, image.rows * static_cast<int64>(sizeof(int64))},
  };
  if (!ship_sections(s, kLoadChunk, sections, kGraphSections)) return;
  bare_step(s, kLoadEnd);
}
