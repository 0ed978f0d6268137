// The backend's side of GpuTopK through the GPU service (service.h): a
// session (kTopKBegin with the compiled program), the heap scan's batches
// filled straight into shared memory and shipped one by one (kTopKBatch),
// the k best rows asked for (kTopKFinish) and fetched back (kTopKFetch).
// The backend (or parallel worker) never opens CUDA for it.
//
// Two DSM segments take turns: while the service ranks the batch in one,
// the backend fills the other; it reads the service's answer to a batch
// before it ships the next (a row that raised, the service gone), so at
// most one request is in flight and the slot is never touched while it is.
//
// The session lives in the caller's memory context: its reset (the end of
// the scan's round, or an ERROR) closes it, giving up a request in flight,
// and the service drops it when it next looks. Nothing here holds a C++
// object with a destructor across a PostgreSQL call (acquire_slot,
// await_reply and ereport may leave by longjmp).
#include <cstring>

#include "device.h"
#include "service.h"
#include "service_client.h"
#include "service_shmem.h"
#include "service_topk_wire.h"

extern "C" {
#include "miscadmin.h"
#include "storage/dsm.h"
#include "utils/memutils.h"
}

struct ServiceTopK {
  MemoryContextCallback cb;
  bool open;
  bool inflight;  // a batch is submitted and its answer not read yet
  uint64 id;
  dsm_segment* seg[2];
  char* buf[2];
  int64 buf_bytes;    // each segment's
  int64 batch_bytes;  // one batch's layout
  bool kept_pair;     // seg[] are the backend's kept pair (below)
  bool carved;        // view is laid out on buf[cur]
  int cur;            // the segment being filled
  int64 capacity;
  int ncolumns;
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  gknn::expr::BatchView view;  // the batch being filled, carved into buf[cur]
  ServiceTopKTrips trips;
  // The table cache: batches shipped as a fill's kept rows (`keep`), and
  // whether the service gave the fill up (a kept batch it did not keep).
  bool keep;
  bool fill_lost;
  int64 map_blocks;  // the entry's blocks (the map the probe returned)
  // A session the service finished with its probe (ServiceTopKCacheProbe::
  // final): `final_total` row ids, the first `final_got` of them here, or the
  // row that raised; the counts of its ranking.
  bool final;
  uint64* final_rows;
  int64 final_total, final_got;
  gknn::expr::EvalError final_err;
  gknn::expr::TopKStats final_stats;
};

namespace gknn_service {
namespace {

uint64 session_counter = 0;

// Two segments a backend keeps from one GpuTopK session to the next: making
// one costs a posix_fallocate of its whole size and removing it an unlink
// (strace of a backend, 2026-11-27: 1.3 ms and 0.7 ms for 3.4 MB), about as
// much as ranking a 10M-row table cache hit on the GPU. Only segments up to
// kMaxKeptSegment are kept (a session's program, cache probe and answers; a
// heap scan's batches take per-session ones): batch-sized ones would hold
// 16 MB of shared memory per connection for its life. A session takes the
// pair after acquire_slot, when the service is done with every request of
// the previous session (an abandoned one included).
constexpr int64 kMaxKeptSegment = int64{2} << 20;
constexpr int64 kLeastKeptSegment = int64{256} << 10;
struct KeptPair {
  dsm_segment* seg[2];
  int64 bytes;
  bool taken;
};
KeptPair kept_pair = {{nullptr, nullptr}, 0, false};

// The kept pair for a session needing `bytes` per segment, made (again) if
// smaller; false when it is taken or too small to keep.
bool take_kept_pair(ServiceTopK* t, int64 bytes) {
  if (kept_pair.taken || bytes > kMaxKeptSegment) return false;
  if (kept_pair.bytes < bytes) {
    for (dsm_segment*& seg : kept_pair.seg) {
      if (seg) dsm_detach(seg);
      seg = nullptr;
    }
    kept_pair.bytes = 0;
    const int64 size = Max(bytes, kLeastKeptSegment);
    for (dsm_segment*& seg : kept_pair.seg) {
      seg = dsm_create(size, 0);
      dsm_pin_mapping(seg);  // past this query's resource owner
    }
    kept_pair.bytes = size;
  }
  kept_pair.taken = true;
  t->kept_pair = true;
  t->buf_bytes = kept_pair.bytes;
  for (int i = 0; i < 2; ++i) {
    t->seg[i] = kept_pair.seg[i];
    t->buf[i] = static_cast<char*>(dsm_segment_address(t->seg[i]));
  }
  return true;
}

// Marks the session closed for the service (it drops it when it next looks),
// giving up a batch in flight, and wakes it. Raises nothing: also runs as a
// memory context callback.
void close_session(ServiceTopK* t) {
  if (!t->open) return;
  t->open = false;
  RequestSlot* s = my_slot();
  if (t->inflight) abandon(s);
  t->inflight = false;
  SpinLockAcquire(&s->mutex);
  if (s->topk_open == t->id) s->topk_open = 0;
  SpinLockRelease(&s->mutex);
  wake_service();
}

// The kept pair back to the backend, if the session had it (the next
// session takes it after acquire_slot).
void give_back_kept_pair(ServiceTopK* t) {
  if (t->kept_pair) kept_pair.taken = false;
  t->kept_pair = false;
}

// The session's segments given up: the kept pair back, its own detached.
void detach(ServiceTopK* t) {
  for (int i = 0; i < 2; ++i) {
    if (t->seg[i] && !t->kept_pair) dsm_detach(t->seg[i]);
    t->seg[i] = nullptr;
    t->buf[i] = nullptr;
  }
  give_back_kept_pair(t);
}

// On an ERROR (the query's memory goes): the service is told, the kept pair
// given back (the session's own segments go with the resource owner).
void on_memory_reset(void* arg) {
  auto* t = static_cast<ServiceTopK*>(arg);
  close_session(t);
  give_back_kept_pair(t);
}

// The service stopped (or restarted, losing the session): gknn.device = gpu
// needs it (55000); auto goes on on the backend's CPU.
int service_gone(ServiceTopK* t) {
  close_session(t);
  detach(t);
  if (gknn_device_mode == GKNN_DEVICE_GPU)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the gknn GPU service stopped while a GpuTopK scan waited for it"),
                    errhint("It restarts by itself; try again.")));
  return kServiceTopKGone;
}

void count_trip(ServiceTopK* t, const RequestSlot* s) {
  t->trips.requests++;
  t->trips.queue_ms += (s->start_us - s->submit_us) / 1000.0;
  t->trips.service_ms += (s->end_us - s->start_us) / 1000.0;
}

// The slot filled for a request of the session whose payload is segment
// `which` (bytes of it; 0: none).
RequestSlot* request(ServiceTopK* t, uint32 kind, int which, int64 bytes) {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  s->kind = kind;
  s->build_id = t->id;
  s->payload_bytes = bytes;
  s->payload_dsm = bytes > 0 ? dsm_segment_handle(t->seg[which]) : DSM_HANDLE_INVALID;
  return s;
}

// A row that raised in the service's program, if the answer says so.
bool raised(const RequestSlot* s, gknn::expr::EvalError* err) {
  if (s->topk.eval_kind == 0) return false;
  err->kind = static_cast<gknn::expr::ErrorKind>(s->topk.eval_kind);
  err->row_id = s->topk.eval_row;
  err->detail[0] = s->topk.eval_detail[0];
  err->detail[1] = s->topk.eval_detail[1];
  return true;
}

// Reads an answer: ERROR on the service's error, the outcome otherwise.
int reply_step(ServiceTopK* t, RequestSlot* s, ReplyCode reply, gknn::expr::EvalError* err) {
  if (reply == kServiceGone) return service_gone(t);
  count_trip(t, s);
  if (reply == kError) raise_reply_error(s);
  if (reply != kOk) return service_gone(t);
  return err && raised(s, err) ? kServiceTopKRaised : kServiceTopKOk;
}

int send(ServiceTopK* t, RequestSlot* s, gknn::expr::EvalError* err) {
  return reply_step(t, s, call(s), err);
}

// The answer to the batch (or cache rank) in flight.
int collect(ServiceTopK* t, gknn::expr::EvalError* err) {
  if (!t->inflight) return kServiceTopKOk;
  RequestSlot* s = my_slot();
  ReplyCode reply = await_reply(s);
  t->inflight = false;
  const int done = reply_step(t, s, reply, err);
  if (done == kServiceTopKOk && s->kind == kTopKBatch && s->section == 1 && !s->topk.cache_kept)
    t->fill_lost = true;
  return done;
}

void make_segments(ServiceTopK* t, int64 bytes);

// Lays the batch to fill out on buf[cur], first moving to segments of a
// batch's size if the session's are smaller (a cache probe's session starts
// with small ones, and only a miss or changed blocks fill batches). No batch
// is in flight then: only the first batch of a session carves a new layout
// in small segments.
void carve(ServiceTopK* t) {
  if (t->buf_bytes < t->batch_bytes) {
    detach(t);
    make_segments(t, t->batch_bytes);
  }
  topk_wire_layout(t->columns, t->ncolumns, t->capacity, t->buf[t->cur], &t->view);
  t->carved = true;
}

// Segments of their own for the session (per-session, freed at its end).
void make_segments(ServiceTopK* t, int64 bytes) {
  t->buf_bytes = bytes;
  for (int i = 0; i < 2; ++i) {
    t->seg[i] = dsm_create(bytes, 0);
    t->buf[i] = static_cast<char*>(dsm_segment_address(t->seg[i]));
  }
}

ServiceTopK* open_session(int64 buf_bytes) {
  auto* t = static_cast<ServiceTopK*>(palloc0(sizeof(ServiceTopK)));
  t->id = (static_cast<uint64>(MyProcPid) << 32) | ++session_counter;
  RequestSlot* s = my_slot();
  acquire_slot(s);  // the previous session's requests are done: its segments are free
  if (!take_kept_pair(t, buf_bytes)) make_segments(t, buf_bytes);
  SpinLockAcquire(&s->mutex);
  s->topk_open = t->id;
  SpinLockRelease(&s->mutex);
  t->open = true;
  t->cb.func = on_memory_reset;
  t->cb.arg = t;
  MemoryContextRegisterResetCallback(CurrentMemoryContext, &t->cb);
  return t;
}

template <typename T>
void put(char* base, int64 at, const T* src, int64 n) {
  if (n > 0) memcpy(base + at, src, sizeof(T) * n);
}

void read_stats(const RequestSlot* s, gknn::expr::TopKStats* stats) {
  stats->rows_scanned = s->topk.rows_scanned;
  stats->rows_passed = s->topk.rows_passed;
  stats->batches = s->topk.batches;
  stats->bytes_to_device = s->topk.bytes_to_device;
  stats->device_ms = s->topk.device_ms;
}

// Room for a result of `total` row ids, the first `got` of them copied from
// `from` (the rest come by kTopKFetch).
uint64* result_rows(const uint64* from, int64 total, int64 got) {
  if (total < 0)
    elog(ERROR, "gknn GPU service: a GpuTopK result of %lld rows", static_cast<long long>(total));
  uint64* ids = static_cast<uint64*>(
      palloc_extended(sizeof(uint64) * Max(total, int64{1}), MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
  if (!ids) ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
  if (got > 0) memcpy(ids, from, sizeof(uint64) * got);
  return ids;
}

// How many of an answer's `total` row ids it holds in buf[0].
int64 rows_in_answer(const ServiceTopK* t, int64 total) {
  return Min(total, t->buf_bytes / static_cast<int64>(sizeof(uint64)));
}

}  // namespace
}  // namespace gknn_service

using namespace gknn_service;

ServiceTopK* gknn_service_topk_begin(const ServiceTopKProgram& p, int64 k, int64 capacity, int* device,
                                     ServiceTopKCacheProbe* probe) {
  TopKWireProgram head{};
  head.k = k;
  head.capacity = capacity;
  head.ncode = p.ncode;
  head.nconst = p.nconst;
  head.nvectors = p.nvectors;
  head.nkeys = p.nkeys;
  head.ncolumns = p.ncolumns;
  head.qual = p.qual;
  head.check = p.check;
  for (int i = 0; i < p.nkeys; ++i) head.keys[i] = p.keys[i];
  for (int c = 0; c < p.ncolumns; ++c) head.columns[c] = p.columns[c];
  if (probe) {
    head.cache = 1;
    head.key.database = probe->database;
    head.key.relation = probe->relation;
    head.key.spc = probe->node.spcNode;
    head.key.db = probe->node.dbNode;
    head.key.rel = probe->node.relNode;
    head.key.ncolumns = p.ncolumns;
    for (int c = 0; c < p.ncolumns; ++c) {
      head.key.attnos[c] = probe->attnos[c];
      head.key.columns[c] = p.columns[c];
    }
    head.nblocks = probe->nblocks;
    head.nvm = probe->nvm;
    head.vm_span = probe->vm_span;
  }
  const TopKWireOffsets o = topk_wire_offsets(head);
  const TopKWireCacheOffsets co = topk_wire_cache_offsets(head, o);
  const int64 batch = topk_wire_layout(p.columns, p.ncolumns, capacity, nullptr, nullptr);
  // Room for the program (and probe) and a cache map of the table's blocks;
  // a batch's too, unless a cache hit may need none (carve makes room).
  int64 bytes = Max(o.end, int64{64} << 10);
  if (probe)  // the map, or a finished session's rows
    bytes = Max(bytes, Max(co.end, Max(probe->nblocks + 64, 8 * Min(k, int64{1} << 14))));
  else
    bytes = Max(bytes, batch);
  ServiceTopK* t = open_session(bytes);
  t->batch_bytes = batch;
  t->capacity = capacity;
  t->ncolumns = p.ncolumns;
  for (int c = 0; c < p.ncolumns; ++c) t->columns[c] = p.columns[c];

  char* b = t->buf[0];
  memcpy(b, &head, sizeof(head));
  put(b, o.code, p.code, p.ncode);
  put(b, o.consts, p.consts, p.nconst);
  put(b, o.const_nulls, p.const_nulls, p.nconst);
  put(b, o.vectors, p.vectors, p.nvectors);
  if (probe) {
    put(b, co.vm_lsn, probe->vm_lsn, probe->nvm);
    put(b, co.bits, probe->bits, (probe->nblocks + 7) / 8);
  }
  // With a probe, the whole segment: the answer (a map of the blocks) may be longer.
  RequestSlot* s = request(t, kTopKBegin, 0, probe ? t->buf_bytes : o.end);
  if (send(t, s, nullptr) != kServiceTopKOk) return nullptr;
  *device = s->topk.device;
  if (probe) {
    probe->state = s->topk.cache_state;
    probe->map = nullptr;
    probe->map_blocks = 0;
    probe->checks = 0;
    probe->rows = 0;
    probe->checked = false;
    probe->final = false;
    probe->ranked = 0;
    if (probe->state == kCacheHit && s->topk.cache_final) {  // ranked and finished: the rows came back
      probe->final = true;
      probe->rows = s->topk.cache_rows;
      probe->checked = true;
      probe->ranked = s->topk.cache_ranked;
      t->final = true;
      read_stats(s, &t->final_stats);
      if (!raised(s, &t->final_err)) {
        t->final_total = s->count;
        t->final_got = rows_in_answer(t, t->final_total);
        t->final_rows = result_rows(reinterpret_cast<const uint64*>(t->buf[0]), t->final_total, t->final_got);
      }
    } else if (probe->state == kCacheHit) {  // the map, out of the buffer batches are filled in
      const int64 n = s->topk.cache_blocks;
      if (n < 0 || n > probe->nblocks || n > t->buf_bytes)
        elog(ERROR, "gknn GPU service: a cache map of %lld blocks", static_cast<long long>(n));
      probe->map = static_cast<uint8*>(palloc_extended(Max(n, int64{1}), MCXT_ALLOC_HUGE));
      memcpy(probe->map, t->buf[0], n);
      probe->map_blocks = n;
      probe->checks = s->topk.cache_checks;
      probe->rows = s->topk.cache_rows;
      probe->checked = s->topk.cache_checked != 0;
      probe->ranked = s->topk.cache_ranked;
      t->map_blocks = n;
    }
  }
  t->cur = 0;
  t->carved = false;  // on the first batch
  return t;
}

int gknn_service_topk_cache_check(ServiceTopK* t, const uint64* lsn, int64 n, uint8* map, int64* rows) {
  const int64 per_piece = t->buf_bytes / static_cast<int64>(sizeof(uint64));
  int64 sent = 0;
  for (;;) {
    const int64 m = Min(n - sent, per_piece);
    const bool last = sent + m == n;
    RequestSlot* s = request(t, kTopKCacheCheck, 0, t->buf_bytes);
    if (m > 0) memcpy(t->buf[0], lsn + sent, sizeof(uint64) * m);
    s->section = last ? 1 : 0;
    s->section_offset = sent;
    s->count = m;
    const int done = send(t, s, nullptr);
    if (done != kServiceTopKOk) return done;
    sent += m;
    if (!last) continue;
    memcpy(map, t->buf[0], t->map_blocks);
    *rows = s->topk.cache_rows;
    t->carved = false;  // the batch being filled is in buf[cur], which may be buf[0]: laid out again
    return kServiceTopKOk;
  }
}

int gknn_service_topk_cache_rank(ServiceTopK* t, gknn::expr::EvalError* err) {
  const int done = collect(t, err);
  if (done != kServiceTopKOk) return done;
  RequestSlot* s = request(t, kTopKCacheRank, 0, 0);
  if (!submit(s)) return service_gone(t);
  t->inflight = true;  // ranked while the backend reads the heap; collected by the next push
  return kServiceTopKOk;
}

void gknn_service_topk_keep(ServiceTopK* t, bool keep) { t->keep = keep; }

int gknn_service_topk_cache_commit(ServiceTopK* t, const uint64* block_lsn, int64 nblocks,
                                   const uint64* vm_lsn, int64 nvm, bool* committed,
                                   gknn::expr::EvalError* err) {
  *committed = false;
  int done = collect(t, err);  // the last kept batch's answer first
  if (done != kServiceTopKOk || t->fill_lost) return done;
  const int64 per_piece = t->buf_bytes / static_cast<int64>(sizeof(uint64));
  const uint64* arrays[2] = {block_lsn, vm_lsn};
  const int64 counts[2] = {nblocks, nvm};
  for (int section = 0; section < 2; ++section)
    for (int64 from = 0; from < counts[section]; from += per_piece) {
      const int64 m = Min(counts[section] - from, per_piece);
      RequestSlot* s = request(t, kTopKCacheMeta, t->cur, t->buf_bytes);
      memcpy(t->buf[t->cur], arrays[section] + from, sizeof(uint64) * m);
      s->section = section;
      s->section_offset = from;
      s->count = m;
      done = send(t, s, nullptr);
      if (done != kServiceTopKOk) return done;
    }
  RequestSlot* s = request(t, kTopKCacheCommit, 0, 0);
  done = send(t, s, nullptr);
  if (done == kServiceTopKOk) *committed = s->topk.cache_kept != 0;
  t->carved = false;  // the LSNs went through buf[cur]: the batch is laid out again (it was empty)
  return done;
}

bool gknn_service_topk_fill_lost(const ServiceTopK* t) { return t->fill_lost; }

bool gknn_service_topk_cache_columns(Oid relation, RelFileNode node, int ncolumns, const int16* attnos,
                                     const gknn::expr::ColumnSpec* columns, int* nout, int16* attnos_out,
                                     gknn::expr::ColumnSpec* columns_out) {
  ServiceShared* ctl = shared();
  if (!ctl) return false;
  ShownCacheEntry best{};
  bool found = false;
  SpinLockAcquire(&ctl->mutex);
  const int n = Min(ctl->ncache, kMaxShownCache);
  for (int i = 0; i < n; ++i) {
    const ShownCacheEntry& e = ctl->cache[i];
    if (!e.ready || e.database != MyDatabaseId || e.relation != relation ||
        !RelFileNodeEquals(e.node, node) || e.ncolumns < ncolumns || (found && e.ncolumns >= best.ncolumns))
      continue;
    bool holds = true;
    for (int c = 0; c < ncolumns && holds; ++c) {
      holds = false;
      for (int j = 0; j < e.ncolumns && !holds; ++j)
        holds = e.attnos[j] == attnos[c] && e.types[j] == static_cast<int32>(columns[c].type) &&
                e.dims[j] == columns[c].dim;
    }
    if (!holds) continue;
    best = e;  // a plain copy under the spinlock
    found = true;
  }
  SpinLockRelease(&ctl->mutex);
  if (!found) return false;
  *nout = best.ncolumns;
  for (int c = 0; c < best.ncolumns; ++c) {
    attnos_out[c] = best.attnos[c];
    columns_out[c].type = static_cast<gknn::expr::Type>(best.types[c]);
    columns_out[c].dim = best.dims[c];
  }
  return true;
}

int gknn_service_topk_cache_reset() {
  RequestSlot* s = my_slot();
  acquire_slot(s);
  s->kind = kTopKCacheReset;
  s->payload_bytes = 0;
  s->payload_dsm = DSM_HANDLE_INVALID;
  const ReplyCode reply = call(s);
  if (reply == kError) raise_reply_error(s);
  if (reply != kOk)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the gknn GPU service is not running")));
  return static_cast<int>(s->count);
}

gknn::expr::BatchView* gknn_service_topk_batch(ServiceTopK* t) {
  if (!t->carved) carve(t);
  return &t->view;
}

int gknn_service_topk_push(ServiceTopK* t, gknn::expr::EvalError* err) {
  const int done = collect(t, err);  // the previous batch's answer first
  if (done != kServiceTopKOk) return done;
  const int64 n = t->view.n;
  if (n == 0) return kServiceTopKOk;
  RequestSlot* s = request(t, kTopKBatch, t->cur, t->batch_bytes);
  s->count = n;
  s->section = t->keep ? 1 : 0;
  if (!submit(s)) return service_gone(t);
  t->inflight = true;
  t->trips.batches++;
  t->trips.rows += n;
  t->cur ^= 1;    // the other segment's batch was answered: the service is done with it
  t->view.n = 0;  // (a pointer to the view kept by the caller sees an empty batch)
  t->carved = false;
  return kServiceTopKOk;
}

int gknn_service_topk_finish(ServiceTopK* t, gknn::expr::EvalError* err, uint64** rows, int64* nrows,
                             gknn::expr::TopKStats* stats) {
  *rows = nullptr;
  *nrows = 0;
  int64 total = 0, got = 0;
  uint64* ids = nullptr;
  int done = kServiceTopKOk;
  if (t->final) {  // answered with the probe
    *stats = t->final_stats;
    if (t->final_err.kind != gknn::expr::ErrorKind::None) {
      *err = t->final_err;
      return kServiceTopKRaised;
    }
    total = t->final_total;
    got = t->final_got;
    ids = result_rows(t->final_rows, total, got);  // in the caller's context (the session's goes first)
  } else {
    done = collect(t, err);
    if (done != kServiceTopKOk) return done;
    RequestSlot* s = request(t, kTopKFinish, 0, t->buf_bytes);
    done = send(t, s, err);
    read_stats(s, stats);
    if (done != kServiceTopKOk) return done;
    total = s->count;
    got = rows_in_answer(t, total);
    ids = result_rows(reinterpret_cast<const uint64*>(t->buf[0]), total, got);
  }
  const int64 per_piece = t->buf_bytes / static_cast<int64>(sizeof(uint64));
  while (got < total) {
    const int64 n = Min(total - got, per_piece);
    RequestSlot* s = request(t, kTopKFetch, 0, t->buf_bytes);
    s->section_offset = got;
    s->count = n;
    done = send(t, s, nullptr);
    if (done != kServiceTopKOk) {
      pfree(ids);
      return done;
    }
    memcpy(ids + got, t->buf[0], sizeof(uint64) * n);
    got += n;
  }
  *rows = ids;
  *nrows = total;
  gknn_service_topk_end(t);
  return kServiceTopKOk;
}

void gknn_service_topk_end(ServiceTopK* t) {
  close_session(t);
  detach(t);
}

const ServiceTopKTrips& gknn_service_topk_trips(const ServiceTopK* t) { return t->trips; }

bool gknn_service_serves_gpu() {
  ServiceShared* ctl = shared();
  if (!ctl) return false;
  SpinLockAcquire(&ctl->mutex);
  const bool gpu = ctl->state == kReady && ctl->device >= 0;
  SpinLockRelease(&ctl->mutex);
  return gpu;
}
