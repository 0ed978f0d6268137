// The GPU service: its settings, its shared memory and the registration of
// its background worker. Runs in the postmaster (from _PG_init) and so never
// touches CUDA.
#include "service.h"
#include "service_forget.h"
#include "service_shmem.h"

#include <sys/time.h>

extern "C" {
#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
}

int gknn_service_mode = GKNN_SERVICE_GPU;
int gknn_service_memory_limit = 0;
int gknn_service_poll_us = 1000;
bool gknn_service_cpu_ring = false;

namespace gknn_service {
namespace {

ServiceShared* shared_block = nullptr;
shmem_request_hook_type prev_request_hook = nullptr;
shmem_startup_hook_type prev_startup_hook = nullptr;

const struct config_enum_entry service_options[] = {{"off", GKNN_SERVICE_OFF, false},
                                                    {"gpu", GKNN_SERVICE_GPU, false},
                                                    {"cpu", GKNN_SERVICE_CPU, false},
                                                    {nullptr, 0, false}};

// Every PGPROC may ask: backends, parallel workers, auxiliary processes,
// prepared transactions' dummies (never, but pgprocno counts them).
int slot_count() { return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts; }

Size shared_size() {
  return add_size(offsetof(ServiceShared, slots), mul_size(sizeof(RequestSlot), slot_count()));
}

// The resident graph kernel's ring, page-aligned in its own block (a page
// more than the ring, for the alignment: ring_memory()).
char* ring_block = nullptr;
Size ring_block_bytes() { return add_size(ring_bytes(), 4096); }

void request_shmem() {
  if (prev_request_hook) prev_request_hook();
  RequestAddinShmemSpace(shared_size());
  RequestAddinShmemSpace(ring_block_bytes());
}

void startup_shmem() {
  if (prev_startup_hook) prev_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found;
  shared_block = static_cast<ServiceShared*>(ShmemInitStruct("gknn GPU service", shared_size(), &found));
  if (!found) {
    memset(shared_block, 0, offsetof(ServiceShared, slots));
    SpinLockInit(&shared_block->mutex);
    shared_block->state = kStopped;
    shared_block->device = -1;
    pg_atomic_init_u32(&shared_block->open_requests, 0);
    shared_block->nslots = slot_count();
    for (int i = 0; i < kRingSlots; ++i) pg_atomic_init_u32(&shared_block->ring_owner[i], 0);
    pg_atomic_init_u32(&shared_block->ring_seq, 0);
    pg_atomic_init_u64(&shared_block->ring_searches, 0);
    pg_atomic_init_u64(&shared_block->ring_us, 0);
    for (int i = 0; i < shared_block->nslots; ++i) {
      RequestSlot* s = &shared_block->slots[i];
      SpinLockInit(&s->mutex);
      s->state = kFree;
      s->owner_latch = nullptr;
      s->payload_dsm = DSM_HANDLE_INVALID;
      s->build_open = 0;
      s->topk_open = 0;
    }
  }
  bool ring_found;
  ring_block = static_cast<char*>(ShmemInitStruct("gknn ring", ring_block_bytes(), &ring_found));
  if (!ring_found) memset(ring_block, 0, ring_block_bytes());
  LWLockRelease(AddinShmemInitLock);
}

void register_worker() {
  BackgroundWorker w;
  memset(&w, 0, sizeof(w));
  // Shared memory only: the service reads no relation (backends ship
  // images), so it serves every database.
  w.bgw_flags = BGWORKER_SHMEM_ACCESS;
  w.bgw_start_time = BgWorkerStart_PostmasterStart;
  w.bgw_restart_time = 1;  // seconds after it stops
  snprintf(w.bgw_library_name, BGW_MAXLEN, "gknn");
  snprintf(w.bgw_function_name, BGW_MAXLEN, "gknn_service_main");
  snprintf(w.bgw_name, BGW_MAXLEN, "gknn GPU service");
  snprintf(w.bgw_type, BGW_MAXLEN, "gknn GPU service");
  RegisterBackgroundWorker(&w);
}

}  // namespace

ServiceShared* shared() { return shared_block; }

gknn::graph::RingLayout ring_layout() {
  gknn::graph::RingLayout l;
  l.max_dim = kRingMaxDim;
  l.max_k = kRingMaxK;
  return l;
}

Size ring_bytes() { return ring_layout().ring_bytes(kRingSlots); }

char* ring_slot(int i) { return ring_memory() + static_cast<size_t>(i) * ring_layout().slot_bytes(); }

volatile uint32* ring_request(int i) {
  return reinterpret_cast<volatile uint32*>(ring_memory() + ring_layout().doorbell_at(kRingSlots)) + i;
}

const volatile uint32* ring_answered(int i) {
  return reinterpret_cast<const volatile uint32*>(ring_slot(i) + gknn::graph::RingLayout::kAnsweredAt);
}

bool ring_slot_waiting(int i) { return *ring_request(i) != *ring_answered(i); }

int ring_waiting_searches(ServiceShared* ctl) {
  if (!ring_memory()) return 0;
  int n = 0;
  for (int i = 0; i < kRingSlots; ++i) {
    const uint32 owner = pg_atomic_read_u32(&ctl->ring_owner[i]);
    if (owner == 0 || owner == kRingHeld || (owner & kRingAbandoned) != 0) continue;  // no backend waits
    if (ring_slot_waiting(i)) ++n;
  }
  return n;
}

RingDescriptor read_ring(ServiceShared* ctl) {
  RingDescriptor d;
  for (int tries = 0;; ++tries) {
    const uint32 before = pg_atomic_read_u32(&ctl->ring_seq);
    if (before & 1) {  // being written (or a service died writing it: not serving)
      if (tries > 100000) return RingDescriptor();
      pg_spin_delay();
      continue;
    }
    pg_read_barrier();
    const volatile ServiceShared* v = ctl;
    d.serving = v->ring_serving != 0;
    d.epoch = v->ring_epoch;
    memcpy(&d.key, const_cast<const ImageKey*>(&v->ring_key), sizeof(d.key));
    d.entries = v->ring_entries;
    pg_read_barrier();
    if (pg_atomic_read_u32(&ctl->ring_seq) == before) return d;
  }
}

void write_ring(ServiceShared* ctl, const RingDescriptor& d) {
  (void)pg_atomic_fetch_add_u32(&ctl->ring_seq, 1);  // odd: readers wait (a full barrier)
  volatile ServiceShared* v = ctl;
  v->ring_serving = d.serving ? 1 : 0;
  v->ring_epoch = d.epoch;
  memcpy(const_cast<ImageKey*>(&v->ring_key), &d.key, sizeof(d.key));
  v->ring_entries = d.entries;
  pg_write_barrier();
  (void)pg_atomic_fetch_add_u32(&ctl->ring_seq, 1);  // even again
}

char* ring_memory() {
  if (!ring_block) return nullptr;
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(ring_block) + 4095) & ~uintptr_t(4095));
}

// GetCurrentTimestamp()'s value, computed here so that the service's
// executor threads may take it too (they call nothing of PostgreSQL).
int64 now_us() {
  struct timeval tp;
  gettimeofday(&tp, nullptr);
  return (static_cast<int64>(tp.tv_sec) - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
             USECS_PER_SEC +
         tp.tv_usec;
}

}  // namespace gknn_service

bool gknn_service_preloaded() { return gknn_service::shared() != nullptr; }

void gknn_service_register() {
  // A server-start setting can only be defined while the postmaster loads
  // the library; without the preload there is no service to configure.
  if (process_shared_preload_libraries_in_progress)
    DefineCustomEnumVariable(
        "gknn.service", "Whether gknn runs its GPU service process (needs shared_preload_libraries).",
        "gpu: the service owns the GPUs and serves every session's index searches, batched; cpu: the "
        "service serves them on the CPU (for hosts without a GPU and for tests); off: no service, each "
        "backend searches on its CPU.",
        &gknn_service_mode, GKNN_SERVICE_GPU, gknn_service::service_options, PGC_POSTMASTER, 0, nullptr,
        nullptr, nullptr);
  DefineCustomIntVariable("gknn.gpu_memory_limit",
                          "Memory the GPU service may use for resident index images, per device (0: 90% of "
                          "the device's memory).",
                          "Least recently used images are evicted to make room.", &gknn_service_memory_limit,
                          0, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_KB, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "gknn.service_poll_us",
      "How long the GPU service polls for the next request before it sleeps, after its last one.",
      "Under load a request is then taken without waking the service (a wake-up costs about as much as a "
      "small batch's GPU work); the service's main thread and one free executor thread keep a core busy "
      "meanwhile. 0: sleep at once.",
      &gknn_service_poll_us, 1000, 0, 1000000, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "gknn.service_cpu_ring",
      "Whether the service serves gpu_graph searches of images it searches on the CPU through the ring, as "
      "a GPU service's resident kernel serves them.",
      "A testing aid for hosts without a GPU: a thread of the service answers the ring's requests with "
      "the CPU search (same answers), so that the ring's path is exercised; it polls every 20 us while "
      "the ring serves.",
      &gknn_service_cpu_ring, false, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  if (!process_shared_preload_libraries_in_progress || gknn_service_mode == GKNN_SERVICE_OFF) return;
  gknn_service::prev_request_hook = shmem_request_hook;
  shmem_request_hook = gknn_service::request_shmem;
  gknn_service::prev_startup_hook = shmem_startup_hook;
  shmem_startup_hook = gknn_service::startup_shmem;
  gknn_service::register_worker();
  gknn_service::register_forget_hook();
}
