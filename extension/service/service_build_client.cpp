// The backend's side of an index build through the GPU service: a session
// (kBuildBegin), the training sample shipped in pieces through one DSM
// segment, the training (its progress reported and a cancel served while
// waiting), the trained quantizer fetched back in pieces, then the encode
// batches through the same segment. The backend never opens CUDA for it.
// A gpu_graph build is one such session: the rows' vectors shipped as the
// sample, the graph built, its rows and entries fetched back.
//
// Nothing here holds a C++ object with a destructor across a PostgreSQL call
// (acquire_slot, call, ereport may leave by longjmp).
#include <cstring>

#include "core_call.h"
#include "device.h"
#include "service.h"
#include "service_client.h"
#include "service_shmem.h"

extern "C" {
#include "miscadmin.h"
#include "storage/dsm.h"
#include "utils/memutils.h"
}

// Allocated in the build's memory context, whose reset (the end of the
// statement, or an ERROR) closes the session.
struct ServiceBuild {
  MemoryContextCallback cb;
  bool open;
  uint64 id;
  gknn::ivfpq::Params params;
  int64 rows;        // training sample rows
  int64 batch_rows;  // largest encode batch
  int code_size;
  int64 row_bytes;   // room per encoded row: its vector in, its list and code out
  dsm_segment* seg;  // the payload of every request of the build
  char* buf;
  int64 buf_bytes;
};

namespace gknn_service {
namespace {

uint64 build_counter = 0;

// Marks the session closed for the service (it drops it when it next looks)
// and wakes it. Raises nothing: also runs as a memory context callback.
void close_session(ServiceBuild* b) {
  if (!b->open) return;
  b->open = false;
  RequestSlot* s = my_slot();
  SpinLockAcquire(&s->mutex);
  if (s->build_open == b->id) s->build_open = 0;
  SpinLockRelease(&s->mutex);
  wake_service();
}

void on_build_memory_reset(void* arg) { close_session(static_cast<ServiceBuild*>(arg)); }

void detach(ServiceBuild* b) {
  if (b->seg) dsm_detach(b->seg);
  b->seg = nullptr;
  b->buf = nullptr;
}

// The service stopped (or restarted, losing the session): gknn.device = gpu
// needs it; auto goes on on this backend's CPU, with the same results.
bool service_gone(ServiceBuild* b) {
  close_session(b);
  detach(b);
  if (gknn_device_mode == GKNN_DEVICE_GPU)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the gknn GPU service stopped while an index was built"),
                    errhint("It restarts by itself; build the index again.")));
  ereport(LOG,
          (errmsg("gknn: the GPU service stopped during an index build; it goes on on the backend's CPU")));
  return false;
}

// Sends the filled slot as a request of the build; false when the service
// went away (auto), ERROR on its error.
bool step(ServiceBuild* b, RequestSlot* s, WaitHook hook = nullptr, void* arg = nullptr) {
  s->build_id = b->id;
  ReplyCode reply = call(s, hook, arg);
  if (reply == kError) raise_reply_error(s);
  if (reply == kOk) return true;
  return service_gone(b);
}

// Fills the slot for a request whose payload is `bytes` of the segment.
RequestSlot* request(ServiceBuild* b, uint32 kind, int64 bytes) {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  s->kind = kind;
  s->payload_bytes = bytes;
  s->payload_dsm = bytes > 0 ? dsm_segment_handle(b->seg) : DSM_HANDLE_INVALID;
  return s;
}

// What the service reported of a training while the backend waits.
struct ProgressSeen {
  ServiceBuildProgress report;
  int32 phase;
  int64 done;
};

void report_progress(RequestSlot* s, void* arg) {
  auto* seen = static_cast<ProgressSeen*>(arg);
  SpinLockAcquire(&s->mutex);
  int32 phase = s->progress_phase;
  int64 done = s->progress_done, total = s->progress_total;
  SpinLockRelease(&s->mutex);
  if (phase < 0 || (phase == seen->phase && done == seen->done)) return;
  seen->phase = phase;
  seen->done = done;
  if (seen->report) seen->report(phase, done, total);
}

// Opens a session whose requests carry up to `buf_bytes` of payload; the
// caller then sends its kBuildBegin.
ServiceBuild* open_session(int64 buf_bytes) {
  auto* b = static_cast<ServiceBuild*>(palloc0(sizeof(ServiceBuild)));
  b->buf_bytes = buf_bytes;
  b->seg = dsm_create(b->buf_bytes, 0);
  b->buf = static_cast<char*>(dsm_segment_address(b->seg));
  b->id = (static_cast<uint64>(MyProcPid) << 32) | ++build_counter;
  RequestSlot* s = my_slot();
  acquire_slot(s);
  SpinLockAcquire(&s->mutex);
  s->build_open = b->id;
  SpinLockRelease(&s->mutex);
  b->open = true;
  b->cb.func = on_build_memory_reset;
  b->cb.arg = b;
  MemoryContextRegisterResetCallback(CurrentMemoryContext, &b->cb);
  return b;
}

// Ships `bytes` of rows as the session's sample, in pieces.
bool ship_sample(ServiceBuild* b, const char* data, int64 bytes) {
  for (int64 off = 0; off < bytes; off += b->buf_bytes) {
    int64 n = Min(b->buf_bytes, bytes - off);
    RequestSlot* s = request(b, kBuildSample, n);
    memcpy(b->buf, data + off, n);
    s->section_offset = off;
    if (!step(b, s)) return false;
  }
  return true;
}

// Copies `bytes` of a section of the trained quantizer (or the built
// graph) into `dst`.
bool fetch(ServiceBuild* b, uint32 section, char* dst, int64 bytes) {
  for (int64 off = 0; off < bytes; off += b->buf_bytes) {
    int64 n = Min(b->buf_bytes, bytes - off);
    RequestSlot* s = request(b, kBuildFetch, n);
    s->section = static_cast<int32>(section);
    s->section_offset = off;
    if (!step(b, s)) return false;
    memcpy(dst + off, b->buf, n);
  }
  return true;
}

}  // namespace
}  // namespace gknn_service

using namespace gknn_service;

ServiceBuild* gknn_service_build_begin(const gknn::ivfpq::Params& params, int64 rows, int64 batch_rows) {
  int code_size = 0;
  gknn_pg::core_call([&] { code_size = gknn::ivfpq::code_size(params); });
  const int64 dim = params.dim;
  // One segment serves every request: a piece of the sample (up to
  // kChunkBytes), an encode batch (its vectors in, their lists and codes
  // out, over them), a piece of the quantizer (any size).
  const int64 bounded = Max(batch_rows, int64{1});
  const int64 row_bytes =
      Max(static_cast<int64>(sizeof(float)) * dim, static_cast<int64>(sizeof(int32)) + code_size);
  ServiceBuild* b = open_session(
      Max(Min(rows * dim * static_cast<int64>(sizeof(float)), kChunkBytes), bounded * row_bytes));
  b->params = params;
  b->rows = rows;
  b->batch_rows = bounded;
  b->code_size = code_size;
  b->row_bytes = row_bytes;

  RequestSlot* s = request(b, kBuildBegin, 0);
  memset(&s->shape, 0, sizeof(s->shape));
  s->shape.dim = params.dim;
  s->shape.lists = params.lists;
  s->shape.m = params.m;
  s->shape.nbits = params.nbits;
  s->shape.metric = static_cast<int32>(params.metric);
  s->shape.kmeans_iters = params.kmeans_iters;
  s->shape.seed = params.seed;
  s->shape.entries = rows;
  return step(b, s) ? b : nullptr;
}

bool gknn_service_build_train(ServiceBuild* b, const float* sample, ServiceBuildProgress progress,
                              gknn::ivfpq::Quantizer* out) {
  const gknn::ivfpq::Params& p = b->params;
  const int64 bytes = b->rows * p.dim * static_cast<int64>(sizeof(float));
  if (!ship_sample(b, reinterpret_cast<const char*>(sample), bytes)) return false;

  RequestSlot* s = request(b, kBuildTrain, 0);
  ProgressSeen seen{progress, -1, -1};
  if (!step(b, s, report_progress, &seen)) return false;
  report_progress(s, &seen);  // the last report, if the answer came first
  // The lists trained (fewer when the sample has fewer rows than lists).
  const int64 lists = s->count;
  if (lists < 1 || lists > p.lists)
    ereport(ERROR,
            (errcode(ERRCODE_INTERNAL_ERROR), errmsg("gknn GPU service: trained %lld lists, %d asked for",
                                                     static_cast<long long>(lists), p.lists)));

  gknn_pg::core_call([&] {
    out->params = p;
    out->params.lists = static_cast<int>(lists);
    out->centroids.assign(static_cast<size_t>(lists) * p.dim, 0.0f);
    out->codebooks.assign(static_cast<size_t>(p.dim) << p.nbits, 0.0f);
  });
  return fetch(b, kCentroids, reinterpret_cast<char*>(out->centroids.data()),
               static_cast<int64>(out->centroids.size() * sizeof(float))) &&
         fetch(b, kCodebooks, reinterpret_cast<char*>(out->codebooks.data()),
               static_cast<int64>(out->codebooks.size() * sizeof(float)));
}

bool gknn_service_build_encode(ServiceBuild* b, const float* x, int64 n, int32* list_of, uint8* codes) {
  if (n <= 0) return true;
  if (n > b->batch_rows)
    elog(ERROR, "gknn: an encode batch of %lld rows, more than the session's %lld", static_cast<long long>(n),
         static_cast<long long>(b->batch_rows));
  RequestSlot* s = request(b, kBuildEncode, n * b->row_bytes);
  memcpy(b->buf, x, sizeof(float) * n * b->params.dim);
  s->count = n;
  if (!step(b, s)) return false;
  memcpy(list_of, b->buf, sizeof(int32) * n);
  memcpy(codes, b->buf + sizeof(int32) * n, static_cast<size_t>(b->code_size) * n);
  return true;
}

void gknn_service_build_end(ServiceBuild* b) {
  close_session(b);
  detach(b);
}

bool gknn_service_build_graph(const gknn::graph::BuildParams& params, const float* vectors, int64 n,
                              ServiceBuildProgress progress, gknn::graph::Graph* out) {
  const int64 bytes = n * params.dim * static_cast<int64>(sizeof(float));
  ServiceBuild* b = open_session(Max(Min(bytes, kChunkBytes), int64{1}));
  b->rows = n;
  RequestSlot* s = request(b, kBuildBegin, 0);
  memset(&s->shape, 0, sizeof(s->shape));
  s->shape.kind = kImageGraph;
  s->shape.dim = params.dim;
  s->shape.metric = static_cast<int32>(params.metric);
  s->shape.degree = params.degree;
  s->shape.intermediate_degree = params.intermediate_degree;
  s->shape.seed = params.seed;
  s->shape.entries = n;
  if (!step(b, s) || !ship_sample(b, reinterpret_cast<const char*>(vectors), bytes)) return false;

  s = request(b, kBuildTrain, 0);
  ProgressSeen seen{progress, -1, -1};
  if (!step(b, s, report_progress, &seen)) return false;
  report_progress(s, &seen);  // the last report, if the answer came first
  const int64 entries = s->count;
  if (entries < 0 || entries > n)
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                    errmsg("gknn GPU service: a graph of %lld rows with %lld entries",
                           static_cast<long long>(n), static_cast<long long>(entries))));
  gknn_pg::core_call([&] {
    out->n = n;
    out->degree = params.degree;
    out->edges.assign(static_cast<size_t>(n) * params.degree, 0);
    out->entries.assign(static_cast<size_t>(entries), 0);
  });
  if (!fetch(b, kGraphEdges, reinterpret_cast<char*>(out->edges.data()),
             static_cast<int64>(out->edges.size() * sizeof(uint32))) ||
      !fetch(b, kGraphEntries, reinterpret_cast<char*>(out->entries.data()),
             static_cast<int64>(out->entries.size() * sizeof(uint32))))
    return false;
  gknn_service_build_end(b);
  return true;
}
