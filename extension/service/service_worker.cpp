// The GPU service's background worker: opens the devices, starts its
// executor threads (service_executors.h), then loops: wake on its latch (a
// request was submitted) or on the executors' fd (a batch finished); count
// the finished batches; run image loads; and, while an executor is free,
// take every submitted search and hand it out grouped by (image, probes,
// dimension, mode) as one batched core call per group. The executor answers
// its batch's requests itself (a reply does not wait for this thread).
//
// Latency: each hop between processes or threads is a wake-up (tens of
// microseconds, more on a loaded host), as long as a small batch's GPU work.
// So the loop does not sleep while requests keep coming: for
// gknn.service_poll_us after the last one it polls the slots (backends then set its latch without a
// signal), and sleeps on one wait set made once.
//
// Dynamic batching without a timer: a lone request goes to a free executor
// as soon as the latch wakes the worker; while every executor is busy,
// searches stay submitted and the next free executor takes them all
// together. Several batches run at once (one per executor), each on its
// own CUDA streams.
//
// Errors: core calls run in try/catch and become replies (a SQLSTATE and a
// message), and no C++ exception leaves a round (std::terminate would be a
// crash of the cluster); executor threads call nothing of PostgreSQL (the
// main thread maps and counts; an executor writes its requests' replies and
// wakes their backends: the slot's spinlock and SetLatch, atomics and a
// kill(), as service_build.cpp's progress reports); nothing here raises a PostgreSQL
// ERROR while C++ objects are alive: dsm_attach, which may (the worker then exits and the
// postmaster restarts it), runs with none alive. A device fault (a CUDA error
// that may leave the context unusable) is answered and then ends the
// worker, which the postmaster restarts with a fresh context.
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core_call.h"
#include "gknn/runtime.h"
#include "service.h"
#include "service_build.h"
#include "service_executors.h"
#include "service_forget.h"
#include "service_graph_ring.h"
#include "service_images.h"
#include "service_reply.h"
#include "service_shmem.h"
#include "service_topk.h"
#include "service_topk_cache.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"
}

extern "C" PGDLLEXPORT void gknn_service_main(Datum arg);

namespace gknn_service {
namespace {

volatile sig_atomic_t stop_requested = false;

// Never destroyed: at exit the process's GPU memory goes with it, and a CUDA
// call from a static destructor after the runtime's own teardown could crash
// (which the postmaster would treat as a crash of the whole cluster).
ResidentImages* images = nullptr;
Executors* executors = nullptr;
std::atomic<bool> device_fault{false};

// Batches searched at once: one per executor thread. Measured on the H100
// (bench/kernels/bench_service_batch.cpp): 1, 2, 4 and 8 threads calling
// at once gave 12,200, 26,200, 39,900 and 46,300 queries/s in batches of 8.
// Through the service on the H200 (Fashion-MNIST, gpu_graph ef 16, 16 / 64
// clients), with calls of one pool allocation: 2 executors 58,239 / 108,038
// QPS, 3: 62,047 / 122,036, 4: 63,288 / 121,940, 8: 55,544 / 104,566, 12:
// 47,710 / 79,875 (more executors, smaller batches and longer calls); exact
// search the same from 2 to 8
// (bench/results/service-executors-H200-2026-11-28-80ca6b0.md).
constexpr int kExecutors = 4;

void handle_sigterm(SIGNAL_ARGS) {
  int save = errno;
  stop_requested = true;
  SetLatch(MyLatch);
  errno = save;
}

// Ends every request still open: called when the service stops and when a
// new one starts (leftovers of one that died).
void fail_open_requests(ServiceShared* ctl) {
  for (int i = 0; i < ctl->nslots; ++i) {
    RequestSlot* s = &ctl->slots[i];
    Latch* wake = nullptr;
    SpinLockAcquire(&s->mutex);
    if (s->state == kSubmitted || s->state == kRunning) {
      s->reply = kServiceGone;
      s->state = kFailed;
      wake = s->owner_latch;
    } else if (s->state == kAbandoned) {
      s->state = kFree;
      wake = s->owner_latch;
    }
    SpinLockRelease(&s->mutex);
    if (wake) SetLatch(wake);
  }
}

void on_service_exit(int, Datum) {
  ServiceShared* ctl = shared();
  SpinLockAcquire(&ctl->mutex);
  ctl->state = kStopped;
  ctl->pid = 0;
  ctl->latch = nullptr;
  SpinLockRelease(&ctl->mutex);
  stop_ring(ctl);  // no kernel serves the ring any more
  fail_open_requests(ctl);
}

int64 budget_bytes(int64 device_memory) {
  if (gknn_service_memory_limit > 0) return static_cast<int64>(gknn_service_memory_limit) << 10;  // kB
  if (device_memory > 0) return device_memory / 10 * 9;
  return PG_INT64_MAX / 4;  // the CPU: no limit of its own
}

// Opens the devices; false (with the reason in shared memory) when there is
// none this service may use.
int64 device_memory = 0;  // the first device's, for the default budget

bool open_devices(ServiceShared* ctl) {
  std::vector<int> ordinals;
  int64& memory = device_memory;
  char name[128] = "cpu";
  char reason[kMessageBytes] = "";
  if (gknn_service_mode == GKNN_SERVICE_GPU) {
    try {
      std::vector<gknn::DeviceInfo> devs = gknn::list_devices();
      for (const auto& d : devs) {
        gknn::open_device(d.ordinal);  // the context, and the driver's threads, made here (see the caller)
        ordinals.push_back(d.ordinal);
      }
      if (devs.empty()) {
        strlcpy(reason, "no usable GPU is visible to the gknn service", sizeof(reason));
      } else {
        memory = static_cast<int64>(devs[0].total_memory);
        std::string shown = devs[0].name;
        if (devs.size() > 1) shown += " (+" + std::to_string(devs.size() - 1) + " more)";
        strlcpy(name, shown.c_str(), sizeof(name));
      }
    } catch (const std::exception& e) {
      snprintf(reason, sizeof(reason), "the gknn service could not open the GPUs: %s", e.what());
    }
  }
  bool ok = reason[0] == '\0';
  if (ok) {
    try {
      images = new ResidentImages(ordinals, budget_bytes(memory));
      executors = new Executors(kExecutors);
      executors->set_poll(gknn_service_poll_us);
    } catch (const std::exception& e) {
      snprintf(reason, sizeof(reason), "the gknn service could not start: %s", e.what());
      ok = false;
    }
  }
  SpinLockAcquire(&ctl->mutex);
  ctl->state = ok ? kReady : kNoDevice;
  ctl->device = ordinals.empty() ? -1 : ordinals[0];
  strlcpy(ctl->device_name, name, sizeof(ctl->device_name));
  strlcpy(ctl->reason, reason, sizeof(ctl->reason));
  ctl->memory_budget = ok ? images->budget() : 0;
  SpinLockRelease(&ctl->mutex);
  return ok;
}

ResidentKey resident_key(const ImageKey& k) {
  ResidentKey r;
  r.database = k.database;
  r.index = k.index;
  r.spc = k.node.spcNode;
  r.db = k.node.dbNode;
  r.rel = k.node.relNode;
  r.generation = k.generation;
  return r;
}

// A request taken by the service: its slot and, when its payload is a DSM
// segment, the mapping (kept until the request is answered).
struct Taken {
  int slot;
  RequestSlot* s;
  dsm_segment* seg;
  char* payload;
  bool open;    // taken and not answered yet
  bool in_job;  // a build or GpuTopK task's (answered when the task ends)
};

// One entry per slot (a slot has one request open at a time), made once, so
// that taking requests allocates nothing and no C++ container is alive when
// dsm_attach, which may raise an ERROR, maps their payloads; `round_slots` lists
// the slots taken by one take_requests().
Taken* taken = nullptr;
int* round_slots = nullptr;

char* map_payload(RequestSlot* s, dsm_segment** seg) {
  *seg = nullptr;
  if (s->payload_dsm == DSM_HANDLE_INVALID) return s->inline_payload;
  *seg = dsm_attach(s->payload_dsm);
  return *seg ? static_cast<char*>(dsm_segment_address(*seg)) : nullptr;
}

// Runs `fn` (core code) and turns what it throws into the request's reply.
template <typename Fn>
bool guarded(RequestSlot* s, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const gknn::Error& e) {
    if (e.code() == gknn::ErrorCode::DeviceFault) device_fault = true;
    set_error(s, gknn_pg::sqlstate_for(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_error(s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
  } catch (const std::exception& e) {
    set_error(s, ERRCODE_INTERNAL_ERROR, e.what());
  }
  return false;
}

// Hands a written reply to its requester (any thread): Done or Failed by
// its reply code; an abandoned request is simply freed. Wakes the requester
// either way. The slot is the requester's again from here on. Returns the
// time it wrote as the answer's (end_us).
int64 deliver(RequestSlot* s) {
  const int64 end = now_us();
  s->end_us = end;
  SpinLockAcquire(&s->mutex);
  s->state = s->state == kAbandoned ? kFree : (s->reply == kOk || s->reply == kNeedImage ? kDone : kFailed);
  Latch* wake = s->owner_latch;
  SpinLockRelease(&s->mutex);
  if (wake) SetLatch(wake);
  return end;
}

void count_errors(ServiceShared* ctl, int64 n) {
  if (n == 0) return;
  SpinLockAcquire(&ctl->mutex);
  ctl->errors += n;
  SpinLockRelease(&ctl->mutex);
}

// Answers a request (main thread): its payload unmapped, counted, delivered.
void answer(ServiceShared* ctl, Taken& t) {
  RequestSlot* s = t.s;
  t.open = t.in_job = false;
  if (t.seg) dsm_detach(t.seg);
  t.seg = nullptr;
  count_errors(ctl, s->reply == kError ? 1 : 0);
  deliver(s);
}

// Adds to one of the shipping counters.
void count_shipped(int64 ServiceShared::*counter, int64 n) {
  SpinLockAcquire(&shared()->mutex);
  shared()->*counter += n;
  SpinLockRelease(&shared()->mutex);
}

// A delta request (service_delta.cpp). kDeltaBegin: kOk to ship the pieces,
// or with `resident` set when the target generation is already held;
// kNeedImage when the base is not (ship the whole image). kDeltaEnd: kOk
// once applied, kNeedImage when it could not be.
void run_delta(Taken& t) {
  RequestSlot* s = t.s;
  switch (s->kind) {
    case kDeltaBegin: {
      auto start = images->begin_delta(t.slot, resident_key(s->key), s->delta.base, s->delta.changes,
                                       s->delta.entries, s->delta.vectors, s->delta.kept);
      s->resident = start == ResidentImages::DeltaStart::Resident;
      if (start == ResidentImages::DeltaStart::NeedImage) s->reply = kNeedImage;
      break;
    }
    case kDeltaChunk:
      images->delta_piece(t.slot, s->section, s->section_offset, t.payload, s->payload_bytes);
      count_shipped(&ServiceShared::delta_bytes, s->payload_bytes);
      break;
    case kDeltaEnd:
      if (images->finish_delta(t.slot, now_us()))
        count_shipped(&ServiceShared::deltas, 1);
      else
        s->reply = kNeedImage;
      break;
  }
}

void run_load(Taken& t) {
  RequestSlot* s = t.s;
  s->reply = kOk;
  if (!t.payload && (s->kind == kLoadChunk || s->kind == kDeltaChunk)) {
    set_error(s, ERRCODE_INTERNAL_ERROR, "the gknn service could not map a shipped image piece");
    images->abandon(t.slot);
    return;
  }
  bool ok = guarded(s, [&] {
    switch (s->kind) {
      case kLoadBegin: {
        if (s->shape.kind == kImageGraph) {
          images->begin_graph(t.slot, resident_key(s->key), s->shape.entries, s->shape.degree,
                              s->shape.graph_entries, s->shape.dim,
                              static_cast<gknn::Metric>(s->shape.metric), s->shape.seed);
          break;
        }
        gknn::ivfpq::Params p;
        p.dim = s->shape.dim;
        p.lists = s->shape.lists;
        p.m = s->shape.m;
        p.nbits = s->shape.nbits;
        p.metric = static_cast<gknn::Metric>(s->shape.metric);
        p.kmeans_iters = s->shape.kmeans_iters;
        p.seed = s->shape.seed;
        images->begin(t.slot, resident_key(s->key), p, s->shape.entries, s->shape.vectors, s->shape.pages);
        break;
      }
      case kLoadChunk:
        if (images->graph_staged(t.slot))
          images->piece_graph(t.slot, s->section, s->section_offset, t.payload, s->payload_bytes);
        else
          images->piece(t.slot, s->section, s->section_offset, t.payload, s->payload_bytes);
        count_shipped(&ServiceShared::load_bytes, s->payload_bytes);
        break;
      case kLoadEnd:
        if (images->graph_staged(t.slot))
          images->finish_graph(t.slot, now_us());
        else
          images->finish(t.slot, now_us());
        count_shipped(&ServiceShared::loads, 1);
        break;
      default:
        run_delta(t);
    }
  });
  if (!ok) images->abandon(t.slot);
}

// One batched search: the requests of one image with the same probes,
// dimension and mode (and k, when refined), or, for a graph, the same
// dimension and candidate list; run by an executor thread.
// A request of a batch: what the main thread took (the slot may carry the
// requester's next request once this one is delivered: the batch keeps its
// own copy, and the payload's mapping until the main thread counts it).
struct JobRequest {
  RequestSlot* s;
  char* payload;
  dsm_segment* seg;
};
struct SearchJob {
  std::shared_ptr<Resident> image;
  std::vector<JobRequest> requests;
  uint64 batch_id = 0;
  int64 busy_us = 0;
  // Summed over its requests: submitted to the batch's start on an
  // executor (the queue, the main thread's round, a free executor), and
  // submitted to answered.
  int64 wait_us = 0, held_us = 0;
  int64 errors = 0;
  int* exact_count = nullptr;  // its count in exact_in_flight (an exact batch)
};
std::map<uint64, std::unique_ptr<SearchJob>> jobs;  // in flight, by batch id

// Exact searches (gknn.ivfpq_exact) read every stored vector of the image,
// once for up to 16 queries of a batch (the scan): a batch's time grows far
// less than its size. So while kExactBatches exact batches of an image run,
// its exact requests stay submitted and go together in the next one.
// synthetic-1m on an H200 (service-exact-batches-H200-2026-11-28.md), QPS
// at 16 / 64 clients: no limit 13,152 / 24,176 (batches of 2.4 / 6.2 side
// by side on the four executors); one at a time 19,199 / 21,449 (batches of
// 8 / 34: the 34 took the GEMM path, 1.3 ms); two 17,968 / 29,898.
constexpr int kExactBatches = 2;
using ExactKey = std::tuple<uint32, uint32, uint32, uint32, uint32, uint64>;
std::map<ExactKey, int> exact_in_flight;

ExactKey exact_key(const RequestSlot* s) {
  const ImageKey& k = s->key;
  return {k.database, k.index, k.node.spcNode, k.node.dbNode, k.node.relNode, k.generation};
}

bool is_exact_search(const RequestSlot* s) { return s->kind == kSearchIvfpq && s->mode == kModeExact; }

// Whether an exact request must wait for its image's batches in flight.
bool exact_waits(const RequestSlot* s) {
  if (!is_exact_search(s)) return false;
  auto it = exact_in_flight.find(exact_key(s));
  return it != exact_in_flight.end() && it->second >= kExactBatches;
}

// The executor's part (no PostgreSQL): k is the largest asked; each
// requester gets its prefix (the core's order is total, so a prefix of a
// longer answer is the shorter one). Writes each request's reply into its
// slot and payload (mapped by the main thread until it counts the batch)
// and delivers it.
void run_search(SearchJob& job) {
  const int64 started_us = now_us();
  const Resident& r = *job.image;
  RequestSlot* first = job.requests[0].s;
  const int dim = first->dim;
  int64 k = 0;
  for (const JobRequest& q : job.requests) k = std::max(k, q.s->k);
  k = std::min<int64>(k, std::max<int64>(r.entries, 1));
  const int64 nq = static_cast<int64>(job.requests.size());
  // Sized by the requests (k up to the image's entries): allocated inside
  // guarded(), so that running out of memory fails this group, not the
  // service.
  std::vector<float> queries;
  std::vector<int64_t> ids;
  std::vector<double> dist;
  gknn::ivfpq::SearchParams sp;
  sp.k = static_cast<int>(k);
  sp.probes = first->probes;
  sp.refine = first->mode == kModeRefined ? 1 : 0;  // every candidate asked for is re-ranked
  // A graph search's path depends on its candidate list alone (the group's
  // ef, at least every k in it); k only cuts the list's best: so the
  // largest k serves every request of the group, each taking its prefix.
  gknn::graph::SearchParams gp;
  gp.k = static_cast<int>(k);
  gp.ef = first->ef;
  const auto start = std::chrono::steady_clock::now();  // monotonic, for a duration
  bool ok = guarded(first, [&] {
    // The core reads each query as the image's dimension (the backend
    // checked it against the metapage; a mismatch would read past a query).
    const int image_dim = r.kind == kImageGraph ? r.graph->dim : r.params.dim;
    if (dim != image_dim)
      throw gknn::Error(
          gknn::ErrorCode::InvalidArgument,
          "a query of " + std::to_string(dim) + " dimensions for an index of " + std::to_string(image_dim));
    queries.resize(static_cast<size_t>(nq) * dim);
    for (int64 q = 0; q < nq; ++q)
      std::memcpy(&queries[q * dim], job.requests[q].payload, sizeof(float) * dim);
    ids.resize(static_cast<size_t>(nq * k));
    dist.resize(static_cast<size_t>(nq * k));
    if (r.kind == kImageGraph)
      ResidentImages::search_graph(r, queries.data(), nq, gp, ids.data(), dist.data());
    else
      ResidentImages::search(r, first->mode, queries.data(), nq, sp, ids.data(), dist.data());
  });
  job.busy_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  // Each request's waits, its submission read before deliver() (then the
  // slot is its requester's, who may submit again). The wall clock may
  // step back: clamped, so that held >= wait holds for each request.
  auto deliver_timed = [&](RequestSlot* s, int64 submitted) {
    const int64 wait = std::max<int64>(0, started_us - submitted);
    job.wait_us += wait;
    job.held_us += std::max(wait, deliver(s) - submitted);
  };
  // The first request carries the group's error: delivered last.
  for (int64 q = nq - 1; q >= 0; --q) {
    RequestSlot* s = job.requests[q].s;
    const int64 submitted = s->submit_us;
    if (!ok) {
      if (s != first) set_error(s, first->sqlstate, first->message);
      ++job.errors;
      deliver_timed(s, submitted);
      continue;
    }
    // Rows with fewer candidates than k are padded with id -1 by the core.
    int64 n = std::min(s->k, k), count = 0;
    while (count < n && ids[q * k + count] >= 0) ++count;
    int64* out_ids = reinterpret_cast<int64*>(job.requests[q].payload);
    double* out_dist = reinterpret_cast<double*>(out_ids + count);
    std::memcpy(out_ids, &ids[q * k], sizeof(int64) * count);
    std::memcpy(out_dist, &dist[q * k], sizeof(double) * count);
    s->reply = kOk;
    s->count = count;
    s->entries = r.entries;
    s->batch_id = job.batch_id;
    s->batch_size = static_cast<int32>(nq);
    deliver_timed(s, submitted);
  }
}

// Hands a group to the executors (main thread), or answers it at once when
// its image is not resident.
uint64 next_batch_id = 0;

bool to_serving(ServiceShared* ctl, std::shared_ptr<Resident>& r, std::vector<int>& group);  // below

void dispatch_group(ServiceShared* ctl, std::vector<int>& group) {
  RequestSlot* first = taken[group[0]].s;
  std::shared_ptr<Resident> r = images->find_for_search(resident_key(first->key), now_us());
  const int kind = first->kind == kSearchGraph ? kImageGraph : kImageIvfpq;
  if (r && r->kind != kind) {  // never: an index has one access method
    for (int slot : group) {
      set_error(taken[slot].s, ERRCODE_INTERNAL_ERROR,
                "the gknn service holds another kind of image for this index");
      answer(ctl, taken[slot]);
    }
    return;
  }
  if (!r) {
    uint64 held = 0;
    const bool resident = images->resident_generation(resident_key(first->key), &held);
    for (int slot : group) {
      taken[slot].s->reply = kNeedImage;
      taken[slot].s->resident = resident;  // the backend may ship what changed since
      taken[slot].s->resident_generation = held;
      answer(ctl, taken[slot]);
    }
    return;
  }
  r->hits += static_cast<int64>(group.size()) - 1;  // find() counted the first
  if (kind == kImageGraph && to_serving(ctl, r, group)) return;
  auto job = std::make_unique<SearchJob>();
  job->image = std::move(r);
  job->requests.reserve(group.size());
  for (int slot : group) job->requests.push_back({taken[slot].s, taken[slot].payload, taken[slot].seg});
  job->batch_id = ++next_batch_id;
  SearchJob* j = job.get();
  // An exact batch counts under its requests' key (the image found may be a
  // newer generation): the entry made before the batch is queued, so that
  // nothing can throw between its submission and taken[] forgetting it.
  int* exact_count = is_exact_search(first) ? &exact_in_flight[exact_key(first)] : nullptr;
  jobs[j->batch_id] = std::move(job);
  try {
    executors->submit(j->batch_id, [j] { run_search(*j); });
  } catch (...) {  // not queued: run_requests answers them
    jobs.erase(j->batch_id);
    throw;
  }
  if (exact_count) {
    j->exact_count = exact_count;  // std::map: the entry stays where it is while others come and go
    ++*exact_count;
  }
  // From here the batch answers these requests (taken[] forgets them; the
  // executor cannot deliver one before this thread takes requests again).
  for (int slot : group) {
    taken[slot].open = false;
    taken[slot].seg = nullptr;
  }
}

// Whether a group of graph searches is answered "use the ring": the
// resident kernel (service_graph_ring.h) started for its image where this
// round took graph searches of that index only and nothing else runs.
bool round_may_serve = false;  // this round took graph searches of one index only (run_requests)

bool to_serving(ServiceShared* ctl, std::shared_ptr<Resident>& r, std::vector<int>& group) {
  const bool nothing_else = round_may_serve && jobs.empty() && !build_tasks_running() &&
                            !topk_tasks_running() && !build_sessions_open() && !topk_sessions_open();
  std::vector<const RequestSlot*> searches;
  searches.reserve(group.size());
  for (int slot : group) searches.push_back(taken[slot].s);
  if (!start_serving(ctl, r, searches, nothing_else, device_fault)) return false;
  for (int slot : group) {
    taken[slot].s->reply = kUseRing;
    answer(ctl, taken[slot]);
  }
  return true;
}

// Before a round takes anything but graph searches of the serving image
// (or anything that may free GPU memory happens): stop the kernel.
void stop_serving_for(ServiceShared* ctl, int n) {
  round_may_serve = n > 0;
  const RequestSlot* first = n > 0 ? taken[round_slots[0]].s : nullptr;
  for (int i = 0; i < n && round_may_serve; ++i) {
    const RequestSlot* s = taken[round_slots[i]].s;
    round_may_serve = s->kind == kSearchGraph && resident_key(s->key).same_index(resident_key(first->key));
  }
  const Resident* served = serving_image();
  if (!served) return;
  if (!round_may_serve || !resident_key(first->key).same_index(served->key)) stop_serving(ctl, device_fault);
}

// Answers the request of a slot (for service_build.cpp's tasks).
void answer_slot(int slot) { answer(shared(), taken[slot]); }

// A finished batch (main thread), its requests already answered: unmap
// their payloads, count it.
void complete_job(ServiceShared* ctl, SearchJob& job) {
  if (job.exact_count) --*job.exact_count;  // the entry stays (one per image key: small)
  for (JobRequest& q : job.requests)
    if (q.seg) dsm_detach(q.seg);
  count_errors(ctl, job.errors);
  Resident& r = *job.image;
  if (r.gpu) r.bytes = static_cast<int64>(r.gpu->device_bytes());  // an exact search may add its GEMM rows
  SpinLockAcquire(&ctl->mutex);
  ctl->batches++;
  ctl->batched_queries += static_cast<int64>(job.requests.size());
  ctl->busy_us += job.busy_us;
  ctl->wait_us += job.wait_us;
  ctl->held_us += job.held_us;
  SpinLockRelease(&ctl->mutex);
}

// Takes the submitted requests (marking them Running) into `round_slots`:
// searches only when `searches` (an executor is free), everything else
// always. Returns how many.
// Also publishes how many requests are open (submitted or running).
int take_requests(ServiceShared* ctl, bool searches) {
  int n = 0;
  uint32 open = 0;
  int64 now = now_us();
  for (int i = 0; i < ctl->nslots; ++i) {
    RequestSlot* s = &ctl->slots[i];
    const uint32 state = s->state;  // unlocked peeks
    open += state == kSubmitted || state == kRunning;
    if (state != kSubmitted || (!searches && is_search_request(s->kind))) continue;
    SpinLockAcquire(&s->mutex);
    bool mine = s->state == kSubmitted && !exact_waits(s);
    if (mine) s->state = kRunning;
    SpinLockRelease(&s->mutex);
    if (!mine) continue;
    s->start_us = now;
    taken[i] = Taken{i, s, nullptr, nullptr, true, false};
    round_slots[n++] = i;
  }
  pg_atomic_write_u32(&ctl->open_requests, open);
  return n;
}

void publish_images(ServiceShared* ctl) {
  const auto& all = images->all();
  SpinLockAcquire(&ctl->mutex);
  int n = 0;
  for (const auto& r : all) {
    if (n == kMaxShownImages) break;
    ShownImage& sh = ctl->images[n++];
    sh.key.database = r->key.database;
    sh.key.index = r->key.index;
    sh.key.node.spcNode = r->key.spc;
    sh.key.node.dbNode = r->key.db;
    sh.key.node.relNode = r->key.rel;
    sh.key.generation = r->key.generation;
    sh.kind = r->kind;
    sh.device = r->device;
    sh.bytes = r->bytes;
    sh.entries = r->entries;
    sh.hits = r->hits;
    sh.loaded_us = r->loaded_us;
    sh.last_used_us = r->last_used_us;
  }
  ctl->nimages = n;
  ctl->memory_used = images->used();
  ctl->memory_budget = images->budget();
  ctl->evictions = images->evictions();
  SpinLockRelease(&ctl->mutex);
  topk_cache().publish(ctl);  // the GpuTopK table cache's entries too
}

// The round's loads (first, in slot order: each requester's pieces arrive
// one at a time; answered at once), then its searches grouped by (image,
// probes, dimension, mode) and handed to the executors; returns the number
// of searches. C++ only, and nothing escapes: an error outside a core call
// (the groups' map) fails the searches it left unanswered, where an
// escaping exception would end the worker through std::terminate, which the
// postmaster takes for a crash of the cluster.
int64 run_requests(ServiceShared* ctl, int n) {
  int64 searches = 0;
  stop_serving_for(ctl, n);
  const char* failure = nullptr;
  int sqlstate = ERRCODE_INTERNAL_ERROR;
  try {
    // Refined searches group by k too: their candidates are exactly the k
    // asked for, so a longer answer's prefix is not a shorter one's. Graph
    // searches group by their candidate list (ef, raised to k by the
    // backend), in place of probes: any k up to it shares one search.
    std::map<std::tuple<uint32, uint32, uint32, uint32, uint32, uint64, uint32, int32, int32, int32, int64>,
             std::vector<int>>
        groups;
    for (int i = 0; i < n; ++i) {
      Taken& t = taken[round_slots[i]];
      RequestSlot* s = t.s;
      if (is_search_request(s->kind) && t.payload) {
        const ImageKey& k = s->key;
        const bool graph = s->kind == kSearchGraph;
        groups[{k.database, k.index, k.node.spcNode, k.node.dbNode, k.node.relNode, k.generation, s->kind,
                graph ? s->ef : s->probes, s->dim, graph ? -1 : s->mode,
                !graph && s->mode == kModeRefined ? s->k : -1}]
            .push_back(t.slot);
        ++searches;
        continue;
      }
      if (is_topk_request(s->kind)) {  // service_topk.cpp: answered now, or when its task ends
        t.in_job = run_topk_request(*images, *executors, t.slot, s, t.payload, answer_slot);
        if (t.in_job) continue;
      } else if (is_build_request(s->kind)) {  // service_build.cpp: answered now, or when its task ends
        t.in_job = run_build_request(*images, *executors, t.slot, s, t.payload, answer_slot);
        if (t.in_job) continue;
      } else if (is_search_request(s->kind)) {
        set_error(s, ERRCODE_INTERNAL_ERROR, "the gknn service could not map a query");
      } else {
        run_load(t);
      }
      answer(ctl, t);
    }
    for (auto& [key, group] : groups) dispatch_group(ctl, group);
  } catch (const std::bad_alloc&) {
    failure = "out of memory in the gknn service";
    sqlstate = ERRCODE_OUT_OF_MEMORY;
  } catch (...) {
    failure = "unexpected error in the gknn service";
  }
  if (failure)
    for (int i = 0; i < n; ++i) {
      Taken& t = taken[round_slots[i]];
      if (!t.open || t.in_job) continue;
      set_error(t.s, sqlstate, failure);
      answer(ctl, t);
    }
  return searches;
}

// One pass: count the finished batches, then take what was submitted
// (searches only while an executor is free). False when there was nothing.
bool serve_round(ServiceShared* ctl) {
  bool worked = false;
  for (uint64 id : executors->finished()) {
    if (is_build_task(id)) {  // an index build's training or encoding (service_build.cpp)
      bool fault = false;
      finish_build_task(*images, *executors, id, answer_slot, &fault);
      if (fault) device_fault = true;
      worked = true;
      continue;
    }
    if (is_topk_task(id)) {  // a GpuTopK session's open, batch or finish (service_topk.cpp)
      bool fault = false;
      finish_topk_task(*images, *executors, id, answer_slot, &fault);
      if (fault) device_fault = true;
      worked = true;
      continue;
    }
    auto it = jobs.find(id);
    if (it == jobs.end()) continue;
    complete_job(ctl, *it->second);
    jobs.erase(it);
    worked = true;
  }
  const int n =
      take_requests(ctl, static_cast<int>(jobs.size()) + build_tasks_running() + topk_tasks_running() <
                             executors->threads());
  if (n > 0) {
    for (int i = 0; i < n; ++i)
      taken[round_slots[i]].payload = map_payload(taken[round_slots[i]].s, &taken[round_slots[i]].seg);
    const int64 searches = run_requests(ctl, n);
    SpinLockAcquire(&ctl->mutex);
    ctl->requests += n;
    ctl->searches += searches;
    SpinLockRelease(&ctl->mutex);
    worked = true;
  }
  pump_serving(ctl, device_fault);
  if (worked) publish_images(ctl);
  return worked;
}

// Stops the executors before the process exits (first of the exit
// callbacks: before fail_open_requests fails what they left).
void stop_executors(int, Datum) {
  if (executors) executors->stop();
}

// The loop's sleep: on the latch, the executors' fd and the postmaster,
// one wait set for the worker's life (WaitLatchOrSocket makes one a call).
WaitEventSet* make_wait_set() {
  WaitEventSet* set = CreateWaitEventSet(TopMemoryContext, 3);
  AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, nullptr);
  AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, nullptr, nullptr);
  if (executors) AddWaitEventToSet(set, WL_SOCKET_READABLE, executors->fd(), nullptr, nullptr);
  return set;
}

void announce_start(ServiceShared* ctl) {
  SpinLockAcquire(&ctl->mutex);
  ctl->incarnation++;
  ctl->state = kStarting;
  ctl->pid = MyProcPid;
  ctl->latch = MyLatch;
  ctl->started_us = now_us();
  ctl->requests = ctl->searches = ctl->batches = ctl->batched_queries = 0;
  ctl->loads = ctl->evictions = ctl->errors = ctl->busy_us = ctl->wait_us = ctl->held_us = 0;
  pg_atomic_write_u64(&ctl->ring_searches, 0);
  pg_atomic_write_u64(&ctl->ring_us, 0);
  ctl->load_bytes = ctl->deltas = ctl->delta_bytes = 0;
  ctl->topk_sessions = ctl->topk_batches = ctl->topk_rows = 0;
  ctl->topk_shared_rankings = ctl->topk_shared_hits = 0;
  ctl->nimages = 0;
  ctl->ncache = 0;  // the cache died with the last service
  ctl->cache_bytes = ctl->cache_evictions = 0;
  ctl->memory_used = 0;
  SpinLockRelease(&ctl->mutex);
  reset_ring(ctl);
  fail_open_requests(ctl);
}

}  // namespace
}  // namespace gknn_service

void gknn_service_main(Datum) {
  using namespace gknn_service;
  pqsignal(SIGTERM, handle_sigterm);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  BackgroundWorkerUnblockSignals();
  ServiceShared* ctl = shared();
  if (ctl == nullptr) proc_exit(0);
  taken = static_cast<Taken*>(MemoryContextAllocZero(TopMemoryContext, sizeof(Taken) * Max(ctl->nslots, 1)));
  round_slots = static_cast<int*>(MemoryContextAlloc(TopMemoryContext, sizeof(int) * Max(ctl->nslots, 1)));
  announce_start(ctl);
  before_shmem_exit(on_service_exit, 0);
  before_shmem_exit(stop_executors, 0);  // runs first: callbacks run last registered first
  // The CUDA driver starts helper threads when a device's context is made
  // (open_device), and they inherit this thread's signal mask: made with
  // every signal blocked, so that SIGTERM is handled here, where the loop
  // tests the flag before it takes requests. (Taken by a helper thread, it
  // let this thread run one more round: a query answered after the stop;
  // gpu-check 2026-11-28.)
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  bool ready = open_devices(ctl);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ready)
    ereport(LOG,
            (errmsg("gknn GPU service ready on %s (%d executors)", ctl->device_name, executors->threads())));
  else
    ereport(LOG, (errmsg("gknn GPU service idle: %s", ctl->reason)));

  WaitEventSet* wait_set = make_wait_set();
  int64 last_request_us = 0;
  while (!stop_requested) {
    if (serving_image() && (ConfigReloadPending || ctl->nforgets != 0 || ctl->forget_all_before_us != 0))
      stop_serving(ctl, device_fault);              // a reload or forget may free GPU memory
    sweep_build_sessions(ctl);                      // builds that ended (service_build.cpp)
    if (images) sweep_topk_sessions(ctl, *images);  // GpuTopK scans that ended (service_topk.cpp)
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
      if (images) {
        try {
          images->set_budget(budget_bytes(device_memory));
        } catch (const std::exception&) {
          // Out of memory while evicting: the old budget stays until the next reload.
        }
        publish_images(ctl);
      }
      if (executors) executors->set_poll(gknn_service_poll_us);
    }
    // Requests to a service with no device: answered with the reason.
    bool worked = false;
    if (ready) {
      // Before taking requests: a request for a rebuilt index's new image
      // is submitted after its commit queued the old image's drop.
      if (forget_dropped_images(ctl, images)) {
        // An image dropped after the loop's first check: the kernel may
        // serve it (a rebuilt index can keep its relfilenode and restart at
        // generation 1), so it stops; the next graph search starts it again.
        stop_serving(ctl, device_fault);
        publish_images(ctl);
      }
      worked = serve_round(ctl);
      if (device_fault || serving_faulted()) {
        ereport(LOG, (errmsg("gknn GPU service: a device fault; restarting with a fresh GPU context")));
        proc_exit(1);
      }
    } else {
      const int n = take_requests(ctl, true);
      for (int i = 0; i < n; ++i) {
        set_error(taken[round_slots[i]].s, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, ctl->reason);
        answer(ctl, taken[round_slots[i]]);
      }
      worked = n > 0;
    }
    if (worked) {  // more may have arrived while this round ran
      last_request_us = now_us();
      continue;
    }
    if (ready && now_us() - last_request_us < gknn_service_poll_us) {
      sched_yield();
      continue;
    }
    WaitEvent event;
    // A serving kernel's next launch is queued once a lifetime (4 ms) at least.
    (void)WaitEventSetWait(wait_set, serving_image() ? 1L : -1L, &event, 1, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
  }
  // Exit code 1: the postmaster restarts the service (unless it is shutting down).
  proc_exit(1);
}
