// The GPU service's side of GpuTopK (service_topk.h): a backend (or a
// parallel plan's participant) opens a session with its compiled program,
// ships the columns of its heap scan in batches, asks for the k best rows
// and fetches their row ids. The service ranks them with the core's running
// top-k on its device (gknn::expr::make_topk_gpu), or on its CPU
// (make_topk_cpu) for gknn.service = cpu or a shape the GPU kernels do not
// take: the same rows in the same order either way, as in a backend.
//
// Threads: sessions and tasks belong to the main thread. Opening a
// session's TopK (device memory, pinned buffers), ranking a batch and the
// finish are tasks on the executor threads; a session has at most one task
// at a time (its requester sends one request at a time), and a session
// dropped meanwhile is kept alive by its task. The batch is read from the
// requester's shared memory, which the main thread keeps mapped until it
// answers.
//
// Memory: a session's working memory (two batches in pinned host memory and
// on the device, the selection's scratch, k rows) is reserved under
// gknn.gpu_memory_limit with the resident images (least recently used
// images are evicted to make room) for the session's life; a session that
// cannot fit is answered 53200.
//
// Errors: a row that raises in the program is no error of the service's: its
// position and kind go back in the reply (the requester raises PostgreSQL's
// error for it), and the session ranks nothing more. Core errors become
// replies; nothing here throws out or raises a PostgreSQL ERROR.
#include "service_topk.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core_call.h"
#include "gknn/error.h"
#include "gknn/expr.h"
#include "service.h"
#include "service_reply.h"
#include "service_topk_cache.h"
#include "service_topk_wire.h"

extern "C" {
#include "storage/latch.h"
}

namespace gknn_service {
namespace {

using gknn::Error;
using gknn::ErrorCode;
using gknn::expr::ErrorKind;

// Main thread only.
ResidentImages* budget_owner = nullptr;  // whose budget sessions reserve (the worker's images)

struct Session {
  std::uint64_t id = 0;
  int device = -1;  // -1: the CPU
  TopKWireProgram head{};
  gknn::expr::Program program;
  std::vector<gknn::expr::ColumnSpec> columns;
  std::unique_ptr<gknn::expr::TopK> topk;
  std::int64_t reserved = 0;
  gknn::expr::EvalError error;  // the first row that raised (kind None: none)
  std::vector<std::uint64_t> result;
  gknn::expr::TopKStats stats;
  bool finished = false;  // the finish ran: only fetches follow
  // The table cache (service_topk_cache.h): what the probe found, and the
  // reply's numbers for kTopKBegin.
  CacheUse cache;
  std::int64_t probe_blocks = 0, probe_checks = 0, probe_rows = 0, probe_ranked = 0;
  TopKCacheState probe_state = kCacheNone;
  bool probe_checked = false;  // a hit with no page to check: its final map made at the probe
  // A hit whose entry holds every block of the table: ranked and finished by
  // the kTopKBegin task, with the other sessions' such hits on the entry.
  bool one_shot = false;

  ~Session() {
    // Destroyed on the main thread (the last reference is a session map's or
    // a finished task's); the TopK's destructor frees device memory only.
    if (cache.state == kCacheFill) topk_cache().abandon(&cache);  // a fill that never committed
    if (budget_owner && reserved > 0) budget_owner->release(device, reserved);
  }
};

// An open, a batch or a finish. The executor thread writes the outcome.
struct Task : TaskOutcome {
  std::uint64_t id = 0;
  int slot = 0;
  RequestSlot* s = nullptr;
  std::shared_ptr<Session> session;
  char* payload = nullptr;
  // A filling session's kept batch: the store's bound (0: not kept), the
  // store and its rows' blocks.
  std::int64_t keep_bytes = 0;
  std::unique_ptr<gknn::expr::ResidentBatches> kept;
  std::uint32_t first_block = 0, last_block = 0;
  // One-shot hits of other sessions on the same entry, ranked with this one
  // (their tasks stay in `tasks`, out of `waiting`).
  std::vector<Task*> riders;
};

// Made once and never destroyed: a session may hold a GPU TopK, whose
// destructor must not run after the CUDA runtime's own teardown at exit.
std::map<int, std::shared_ptr<Session>>* sessions = nullptr;
// The entries with one-shot rankings running, and how many. A ranking's
// cost is reading the entry's columns, whatever the number of sessions
// riding, so past kRankingsPerEntry the hits that arrive wait and go
// together in the next (a lone hit started beside them would read them all
// again for one query).
std::map<const CacheEntry*, int>* ranking = nullptr;
std::map<std::uint64_t, std::unique_ptr<Task>>* tasks = nullptr;
std::deque<std::uint64_t>* waiting = nullptr;
std::uint64_t next_task = 0;
int running = 0;

void ensure_state() {
  if (sessions) return;
  sessions = new std::map<int, std::shared_ptr<Session>>();
  tasks = new std::map<std::uint64_t, std::unique_ptr<Task>>();
  waiting = new std::deque<std::uint64_t>();
  ranking = new std::map<const CacheEntry*, int>();
}

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "GpuTopK request: " + what);
}

// Working memory of a session's TopK on a GPU (gpu/expr/topk_cuda.cu): two
// slots, each a batch in pinned host memory and on the device, a word per
// position and the selection's scratch (under one more: two words per
// position), and k words on both sides.
// On the CPU: one batch and the k rows kept.
std::int64_t session_bytes(const Session& ss) {
  const std::int64_t batch =
      topk_wire_layout(ss.head.columns, ss.head.ncolumns, ss.head.capacity, nullptr, nullptr);
  const std::int64_t word = 8 * (ss.program.key_limbs() + 1);
  const std::int64_t kept = word * std::min<std::int64_t>(std::max<std::int64_t>(ss.head.k, 1), 1 << 24);
  if (ss.device < 0) return batch + 2 * kept;
  // A cache hit ranks its kept batches in groups (gknn/expr.h), each position
  // with its word
  const std::int64_t positions =
      ss.head.cache ? std::max(ss.head.capacity, gknn::expr::kKeptGroupPositions) : ss.head.capacity;
  // and each vector distance it computes ahead of the rows (8 bytes each).
  std::int64_t distances = 0;
  for (const gknn::expr::Instr& in : ss.program.code) distances += in.op == gknn::expr::Op::VecDist ? 8 : 0;
  return 2 * (2 * batch + (2 * word + distances) * positions + 2 * kept);
}

// --- the executor's part (no PostgreSQL) ---------------------------------------

void rank_batch(Session& ss, Task& t) {
  if (ss.error.kind != ErrorKind::None) return;  // a row raised: nothing more is ranked
  gknn::expr::BatchView from;
  topk_wire_layout(ss.head.columns, ss.head.ncolumns, ss.head.capacity, t.payload, &from);
  gknn::expr::BatchView& to = ss.topk->next_batch();
  topk_wire_copy(from, ss.head.columns, t.s->count, to);
  gknn::expr::EvalError err;
  if (t.keep_bytes > 0) {  // a table cache fill's rows: kept as they are ranked
    t.first_block = static_cast<std::uint32_t>(from.row_ids[0] >> 16);
    t.last_block = static_cast<std::uint32_t>(from.row_ids[t.s->count - 1] >> 16);
    ss.topk->keep_start(static_cast<std::size_t>(t.keep_bytes));
    if (!ss.topk->push(err)) ss.error = err;
    t.kept.reset(ss.topk->keep_stop());
    return;
  }
  if (!ss.topk->push(err)) ss.error = err;
}

// The table cache entry's rows the final map keeps, ranked where they are.
void rank_cached(Session& ss) {
  gknn::expr::EvalError err;
  for (const gknn::expr::ResidentBatches* r : ss.cache.ranked) {
    if (ss.error.kind != ErrorKind::None) return;
    if (!ss.topk->push_resident(*r, err)) ss.error = err;
  }
}

void finish_ranking(Session& ss) {
  ss.finished = true;
  gknn::expr::EvalError err;
  if (ss.error.kind == ErrorKind::None && !ss.topk->finish(err)) ss.error = err;
  ss.stats = ss.topk->stats();
  if (ss.error.kind != ErrorKind::None) return;
  const std::vector<gknn::expr::Selected> rows = ss.topk->result();
  ss.result.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) ss.result[i] = rows[i].row_id();
}

// One-shot hits (the task's and its riders') ranked together over their
// entry's segments: each session finished with its rows or its error.
void rank_one_shots(Task& t) {
  std::vector<Task*> all = {&t};
  all.insert(all.end(), t.riders.begin(), t.riders.end());
  std::vector<gknn::expr::KeptQuery> queries(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    queries[i].program = &all[i]->session->program;
    queries[i].k = all[i]->session->head.k;
  }
  Session& lead = *t.session;
  gknn::expr::rank_kept_shared(lead.cache.ranked, lead.columns, queries, lead.device);
  for (std::size_t i = 0; i < all.size(); ++i) {
    Session& ss = *all[i]->session;
    ss.finished = true;
    ss.error = queries[i].error;
    ss.stats = queries[i].stats;
    ss.result.resize(queries[i].rows.size());
    for (std::size_t j = 0; j < queries[i].rows.size(); ++j) ss.result[j] = queries[i].rows[j].row_id();
  }
}

void run_task(Task& t) {
  Session& ss = *t.session;
  run_captured(t, [&] {
    switch (t.s->kind) {
      case kTopKBegin:
        if (ss.one_shot) {
          rank_one_shots(t);
          break;
        }
        ss.topk.reset(
            ss.device >= 0
                ? gknn::expr::make_topk_gpu(ss.program, ss.columns, ss.head.capacity, ss.head.k, ss.device)
                : gknn::expr::make_topk_cpu(ss.program, ss.columns, ss.head.capacity, ss.head.k));
        break;
      case kTopKBatch:
        rank_batch(ss, t);
        break;
      case kTopKCacheRank:
        rank_cached(ss);
        break;
      default:
        finish_ranking(ss);
        break;
    }
  });
}

// --- the main thread's part ------------------------------------------------------

// A kTopKBegin's table cache probe (service_topk_cache.h), on the session's
// device if it is the service's (a shape the GPU does not take gets none).
// A hit's per-block map goes back over the payload.
void probe_cache(ResidentImages& images, Session& ss, const RequestSlot* s, const char* payload) {
  const TopKWireProgram& h = ss.head;
  if (h.nblocks < 0 || h.nblocks > (std::int64_t(1) << 32) || h.nvm < 0 || h.vm_span <= 0 ||
      h.nvm > h.nblocks / h.vm_span + 1 || h.key.ncolumns != h.ncolumns)
    invalid("a malformed cache probe");
  const TopKWireCacheOffsets c = topk_wire_cache_offsets(h, topk_wire_offsets(h));
  if (c.end > s->payload_bytes) invalid("a cache probe longer than its payload");
  if (ss.device != shared()->device) return;
  std::vector<std::uint64_t> vm(h.nvm);
  std::vector<std::uint8_t> bits((h.nblocks + 7) / 8);
  if (h.nvm > 0) std::memcpy(vm.data(), payload + c.vm_lsn, 8 * h.nvm);
  if (!bits.empty()) std::memcpy(bits.data(), payload + c.bits, bits.size());
  topk_cache().probe(images, h, vm.data(), reinterpret_cast<const std::uint8_t*>(bits.data()), ss.device,
                     ss.id, now_us(), &ss.cache, reinterpret_cast<std::uint8_t*>(const_cast<char*>(payload)),
                     s->payload_bytes);
  ss.probe_state = ss.cache.state;
  ss.probe_blocks = ss.cache.entry ? ss.cache.entry->nblocks : 0;
  ss.probe_checks = static_cast<std::int64_t>(ss.cache.checks.size());
  ss.probe_rows = ss.cache.state == kCacheHit ? ss.cache.entry->rows : 0;
  if (ss.cache.state == kCacheHit && ss.cache.checks.empty()) {
    // Nothing to check: the final map over the probe's and the rows ranked
    // from the entry now, one round trip (kTopKCacheCheck) fewer for the hit.
    topk_cache().finish_checks(&ss.cache, reinterpret_cast<std::uint8_t*>(const_cast<char*>(payload)),
                               s->payload_bytes);
    ss.probe_checked = true;
    ss.probe_ranked = ss.cache.rows;
    // Every block of the table (as the requester read it) from the entry: no
    // heap to read, so the session is ranked and finished now.
    const std::int64_t n = ss.cache.entry->nblocks;
    const std::uint8_t* map = reinterpret_cast<const std::uint8_t*>(payload);
    ss.one_shot =
        n == h.nblocks && std::all_of(map, map + n, [](std::uint8_t b) { return b == kBlockCached; });
  }
}

// The session a kTopKBegin describes: its program read from the payload and
// checked (the core's validator, as for any program), its device and its
// memory reserved.
std::shared_ptr<Session> open_session(ResidentImages& images, const RequestSlot* s, const char* payload) {
  if (!payload) invalid("could not map the program");
  if (s->payload_bytes < std::int64_t(sizeof(TopKWireProgram))) invalid("a program shorter than its header");
  auto ss = std::make_shared<Session>();
  std::memcpy(&ss->head, payload, sizeof(TopKWireProgram));
  const TopKWireProgram& h = ss->head;
  if (h.ncode < 0 || h.nconst < 0 || h.nvectors < 0 || h.nkeys < 0 || h.nkeys > gknn::expr::kMaxKeyLimbs ||
      h.ncolumns < 0 || h.ncolumns > gknn::expr::kMaxColumns || h.k < 0 || h.capacity < 1 ||
      h.capacity > (std::int64_t(1) << 24))
    invalid("a malformed program header");
  for (int c = 0; c < h.ncolumns; ++c)
    if (h.columns[c].dim < 0 || h.columns[c].dim > 16000) invalid("a vector column of a bad dimension");
  const TopKWireOffsets o = topk_wire_offsets(h);
  if (o.end > s->payload_bytes) invalid("a program longer than its payload");
  gknn::expr::Program& p = ss->program;
  const auto* code = reinterpret_cast<const gknn::expr::Instr*>(payload + o.code);
  const auto* consts = reinterpret_cast<const gknn::expr::Value*>(payload + o.consts);
  const auto* nulls = reinterpret_cast<const std::uint8_t*>(payload + o.const_nulls);
  const auto* vectors = reinterpret_cast<const float*>(payload + o.vectors);
  p.code.assign(code, code + h.ncode);
  p.consts.assign(consts, consts + h.nconst);
  p.const_nulls.assign(nulls, nulls + h.nconst);
  p.vectors.assign(vectors, vectors + h.nvectors);
  p.qual = h.qual;
  p.check = h.check;
  p.keys.assign(h.keys, h.keys + h.nkeys);
  ss->columns.assign(h.columns, h.columns + h.ncolumns);
  gknn::expr::validate(p, ss->columns);
  const int device = shared()->device;  // the service's first device (-1: its CPU)
  ss->device = device >= 0 && gknn::expr::gpu_supports(p, h.k) ? device : -1;
  ss->id = s->build_id;
  const std::int64_t need = session_bytes(*ss);
  if (!images.reserve(ss->device, need))
    throw Error(ErrorCode::OutOfMemory, over_budget("a GpuTopK scan", need, images.budget()));
  ss->reserved = need;
  if (h.cache) probe_cache(images, *ss, s, payload);
  return ss;
}

// A batch's payload holds `count` rows of the session's layout.
void check_batch(const Session& ss, const RequestSlot* s, const char* payload) {
  if (!ss.topk) invalid("a batch before the session was opened");
  if (ss.finished) invalid("a batch after the finish");
  const std::int64_t bytes =
      topk_wire_layout(ss.head.columns, ss.head.ncolumns, ss.head.capacity, nullptr, nullptr);
  if (!payload || s->payload_bytes < bytes) invalid("a batch shorter than its layout");
  if (s->count < 0 || s->count > ss.head.capacity) invalid("a batch of more rows than its capacity");
}

// kTopKFinish's or kTopKFetch's row ids: `n` of them from row `from` on.
void copy_rows(const Session& ss, RequestSlot* s, char* payload, std::int64_t from, std::int64_t n) {
  const std::int64_t total = static_cast<std::int64_t>(ss.result.size());
  if (from < 0 || n < 0 || from > total || n > total - from || n * 8 > s->payload_bytes ||
      (n > 0 && !payload))
    invalid("result rows past the result or the payload");
  if (n > 0) std::memcpy(payload, ss.result.data() + from, static_cast<std::size_t>(n) * 8);
}

void outcome(const Session& ss, RequestSlot* s) {
  TopKOutcome& o = s->topk;
  std::memset(&o, 0, sizeof(o));
  o.eval_kind = static_cast<int32>(ss.error.kind);
  o.eval_detail[0] = ss.error.detail[0];
  o.eval_detail[1] = ss.error.detail[1];
  o.eval_row = ss.error.row_id;
  o.rows_scanned = ss.stats.rows_scanned;
  o.rows_passed = ss.stats.rows_passed;
  o.batches = ss.stats.batches;
  o.bytes_to_device = ss.stats.bytes_to_device;
  o.device_ms = ss.stats.device_ms;
  o.device = ss.device;
}

// A one-shot hit waiting behind `lead` that can ride with it: the same
// entry and segments, on the same device.
bool rides_with(const Task& lead, const Task& t) {
  const Session& a = *lead.session;
  const Session& b = *t.session;
  return t.s->kind == kTopKBegin && b.one_shot && b.device == a.device && b.cache.entry == a.cache.entry &&
         b.cache.ranked == a.cache.ranked && !withdrawn(t.s);
}

// The one-shot hits that wait on the same entry as `lead` join it (out of
// `waiting`): one shared ranking serves them all (rank_kept_shared). Under
// load they queue up behind the running tasks; a lone one goes at once.
constexpr std::size_t kMaxRiders = 31;
void gather_riders(Task& lead) {
  if (lead.s->kind != kTopKBegin || !lead.session->one_shot) return;
  for (auto w = waiting->begin(); w != waiting->end() && lead.riders.size() < kMaxRiders;) {
    auto it = tasks->find(*w);
    if (it != tasks->end() && rides_with(lead, *it->second)) {
      lead.riders.push_back(it->second.get());
      w = waiting->erase(w);
    } else {
      ++w;
    }
  }
}

bool is_one_shot(const Task& t) { return t.s->kind == kTopKBegin && t.session->one_shot; }
// One-shot rankings of one entry at once: two, so that one's host work (its
// programs staged, its rows merged and answered) overlaps the other's GPU
// work. Fashion-MNIST on the H200, 32 clients: 20,439 QPS with one at a
// time, 26,415 with two, 24,142 with three; 16 clients: 16,838 / 16,835 /
// 16,212 (bench/results/fashion-mnist-topk-H200-2026-11-27-per-entry.md).
constexpr int kRankingsPerEntry = 2;
bool entry_busy(const Task& t) {
  if (!is_one_shot(t)) return false;
  auto r = ranking->find(t.session->cache.entry.get());
  return r != ranking->end() && r->second >= kRankingsPerEntry;
}

// Hands waiting tasks to the executors while the share allows (all
// executors but one: index searches always keep one), in order, passing
// over one-shot hits whose entry is being ranked.
void start_waiting(Executors& executors, AnswerFn answer, int own_slot, bool* own_failed) {
  const int share = std::max(1, executors.threads() - 1);
  while (running < share) {
    auto w = std::find_if(waiting->begin(), waiting->end(), [](std::uint64_t id) {
      auto it = tasks->find(id);
      return it == tasks->end() || !entry_busy(*it->second);
    });
    if (w == waiting->end()) break;
    const std::uint64_t id = *w;
    waiting->erase(w);
    auto it = tasks->find(id);
    if (it == tasks->end()) continue;
    Task& t = *it->second;
    bool started = false;
    if (withdrawn(t.s)) {
      t.s->reply = kServiceGone;  // given up while waiting: nobody reads a reply
    } else {
      Task* task = &t;
      try {
        gather_riders(t);
        executors.submit(id, [task] { run_task(*task); });
        started = true;
      } catch (const std::exception&) {
        for (auto r = t.riders.rbegin(); r != t.riders.rend(); ++r) waiting->push_front((*r)->id);
        t.riders.clear();
        set_error(t.s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
      }
    }
    if (started) {
      ++running;
      if (is_one_shot(t)) (*ranking)[t.session->cache.entry.get()]++;
      continue;
    }
    const int slot = t.slot;
    tasks->erase(it);
    if (slot == own_slot)
      *own_failed = true;
    else
      answer(slot);
  }
}

Task& queue_task(int slot, const std::shared_ptr<Session>& ss, RequestSlot* s, char* payload) {
  auto t = std::make_unique<Task>();
  Task& task = *t;
  t->slot = slot;
  t->s = s;
  t->session = ss;
  t->payload = payload;
  const std::uint64_t id = kTopKTaskBit | ++next_task;
  t->id = id;
  (*tasks)[id] = std::move(t);
  waiting->push_back(id);
  return task;
}

// A table cache request answered at once: page checks (the last one writes
// the final map over the payload), a fill's LSNs, its commit.
void cache_step(Session& ss, RequestSlot* s, char* payload) {
  std::memset(&s->topk, 0, sizeof(s->topk));
  s->topk.device = ss.device;
  const std::int64_t n = s->kind == kTopKCacheCommit ? 0 : s->count;
  if (n < 0 || n * 8 > s->payload_bytes || (n > 0 && !payload)) invalid("cache LSNs past the payload");
  const auto* lsn = reinterpret_cast<const std::uint64_t*>(payload);
  TopKCache& cache = topk_cache();
  if (s->kind == kTopKCacheCheck) {
    cache.check(&ss.cache, s->section_offset, lsn, n);
    if (s->section != 1) return;
    if (!payload) invalid("a cache check with no payload");
    cache.finish_checks(&ss.cache, reinterpret_cast<std::uint8_t*>(payload), s->payload_bytes);
    s->topk.cache_state = kCacheHit;
    s->topk.cache_blocks = ss.cache.entry->nblocks;
    s->topk.cache_rows = ss.cache.rows;
  } else if (s->kind == kTopKCacheMeta) {
    cache.meta(&ss.cache, s->section, s->section_offset, lsn, n);
  } else {
    const std::int64_t rows = ss.cache.entry ? ss.cache.entry->rows : 0;
    s->topk.cache_kept = cache.commit(&ss.cache, now_us());
    s->topk.cache_rows = rows;
  }
}

// True when the request became a task.
bool dispatch(ResidentImages& images, int slot, RequestSlot* s, char* payload) {
  if (s->kind == kTopKBegin) {
    sessions->erase(slot);  // an earlier session of the same requester
    auto ss = open_session(images, s, payload);
    (*sessions)[slot] = ss;
    SpinLockAcquire(&shared()->mutex);
    shared()->topk_sessions++;
    SpinLockRelease(&shared()->mutex);
    queue_task(slot, ss, s, payload);
    return true;
  }
  auto it = sessions->find(slot);
  if (it == sessions->end() || it->second->id != s->build_id) {
    // A service that restarted since the session was opened (or one that
    // dropped it after an error): the requester takes it as the service gone.
    s->reply = kServiceGone;
    return false;
  }
  Session& ss = *it->second;
  switch (s->kind) {
    case kTopKBatch: {
      check_batch(ss, s, payload);
      std::int64_t keep = 0;
      if (s->section == 1 && ss.cache.state == kCacheFill && s->count > 0) {
        // A fill's rows: room for them under gknn.topk_cache_mb, or the fill is given up.
        const std::int64_t bytes =
            topk_wire_layout(ss.head.columns, ss.head.ncolumns, s->count, nullptr, nullptr);
        if (topk_cache().room_for(ss.cache, bytes))
          keep = bytes + 4096;
        else
          topk_cache().abandon(&ss.cache);
      }
      queue_task(slot, it->second, s, payload).keep_bytes = keep;
      return true;
    }
    case kTopKCacheRank:
      if (!ss.topk || ss.finished || ss.cache.state != kCacheHit) invalid("a cache rank without a hit");
      queue_task(slot, it->second, s, payload);
      return true;
    case kTopKCacheCheck:
    case kTopKCacheMeta:
    case kTopKCacheCommit:
      cache_step(ss, s, payload);
      return false;
    case kTopKFinish:
      if (!ss.topk || ss.finished) invalid("a finish before the session was opened, or twice");
      queue_task(slot, it->second, s, payload);
      return true;
    case kTopKFetch:
      if (!ss.finished) invalid("a fetch before the finish");
      copy_rows(ss, s, payload, s->section_offset, s->count);
      return false;
    default:
      invalid("unknown kind " + std::to_string(s->kind));
  }
}

}  // namespace

bool run_topk_request(ResidentImages& images, Executors& executors, int slot, RequestSlot* s, char* payload,
                      AnswerFn answer) {
  budget_owner = &images;
  s->reply = kOk;
  if (s->kind == kTopKCacheReset) {  // no session: the whole cache
    s->count = topk_cache().reset();
    return false;
  }
  try {
    ensure_state();
    if (!dispatch(images, slot, s, payload)) return false;
    bool failed = false;
    start_waiting(executors, answer, slot, &failed);
    return !failed;
  } catch (const Error& e) {
    set_error(s, gknn_pg::sqlstate_for(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_error(s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
  } catch (const std::exception& e) {
    set_error(s, ERRCODE_INTERNAL_ERROR, e.what());
  }
  try {
    if (sessions) sessions->erase(slot);  // a failed request ends the session (its requester raises an ERROR)
  } catch (...) {
  }
  return false;
}

namespace {

// Writes a finished task's reply (`done`: the outcome of the task that ran,
// the task's own or, for a rider, its leader's) and answers it.
void reply_task(ResidentImages& images, Task& t, const TaskOutcome& done, AnswerFn answer, bool* fault) {
  Session& ss = *t.session;
  RequestSlot* s = t.s;
  const int slot = t.slot;
  bool drop = false;
  if (done.failed) {
    *fault = *fault || done.code == ErrorCode::DeviceFault;
    set_error(s, done.sqlstate, done.message.c_str());
    drop = true;
  } else {
    s->reply = kOk;
    outcome(ss, s);
    if (s->kind == kTopKBegin) {
      s->topk.cache_state = ss.probe_state;
      s->topk.cache_blocks = ss.probe_blocks;
      s->topk.cache_checks = ss.probe_checks;
      s->topk.cache_rows = ss.probe_rows;
      s->topk.cache_checked = ss.probe_checked;
      s->topk.cache_ranked = ss.probe_ranked;
      s->topk.cache_final = ss.one_shot;
    }
    try {  // a kept batch becomes a segment of the entry being filled
      if (s->kind == kTopKBatch && t.keep_bytes > 0)
        s->topk.cache_kept =
            topk_cache().keep(images, &ss.cache, std::move(t.kept), t.first_block, t.last_block);
      else if (s->kind == kTopKBatch && s->section == 1 && ss.cache.state == kCacheFill)
        topk_cache().abandon(&ss.cache);
    } catch (const std::exception&) {  // out of memory: the fill is given up, the ranking goes on
      s->topk.cache_kept = 0;
      topk_cache().abandon(&ss.cache);
    }
    if (s->kind == kTopKCacheRank) s->topk.cache_rows = ss.cache.rows;
    const bool ranked_cache = s->kind == kTopKCacheRank || (s->kind == kTopKBegin && ss.one_shot);
    if (s->kind == kTopKBatch || ranked_cache) {  // a ranking: a heap batch or a cached entry
      SpinLockAcquire(&shared()->mutex);
      shared()->topk_batches++;
      shared()->topk_rows += s->kind == kTopKBatch ? s->count : static_cast<std::int64_t>(ss.cache.rows);
      SpinLockRelease(&shared()->mutex);
    }
    if (s->kind == kTopKFinish || (s->kind == kTopKBegin && ss.one_shot)) {
      const std::int64_t total = static_cast<std::int64_t>(ss.result.size());
      s->count = total;
      try {
        copy_rows(ss, s, t.payload, 0, std::min<std::int64_t>(total, s->payload_bytes / 8));
      } catch (const std::exception& e) {
        set_error(s, ERRCODE_INTERNAL_ERROR, e.what());
        drop = true;
      }
    }
  }
  if (drop) {
    auto sit = sessions->find(slot);
    if (sit != sessions->end() && sit->second == t.session) sessions->erase(sit);
  }
  answer(slot);
}

}  // namespace

void finish_topk_task(ResidentImages& images, Executors& executors, uint64 id, AnswerFn answer, bool* fault) {
  *fault = false;
  if (!tasks) return;
  auto it = tasks->find(id);
  if (it == tasks->end()) return;
  --running;
  Task& t = *it->second;
  if (is_one_shot(t)) {
    auto r = ranking->find(t.session->cache.entry.get());
    if (r != ranking->end() && --r->second == 0) ranking->erase(r);
  }
  const TaskOutcome done = t;
  if (!t.riders.empty()) {
    SpinLockAcquire(&shared()->mutex);
    shared()->topk_shared_rankings++;
    shared()->topk_shared_hits += 1 + static_cast<int64>(t.riders.size());
    SpinLockRelease(&shared()->mutex);
  }
  for (Task* r : t.riders) {
    reply_task(images, *r, done, answer, fault);
    tasks->erase(r->id);
  }
  reply_task(images, t, done, answer, fault);
  tasks->erase(it);
  try {
    bool unused = false;
    start_waiting(executors, answer, -1, &unused);
  } catch (const std::exception&) {
    // Out of memory while starting the next: it starts when another ends.
  }
}

int topk_tasks_running() { return running; }
bool topk_sessions_open() { return sessions && !sessions->empty(); }

void sweep_topk_sessions(ServiceShared* ctl, ResidentImages& images) {
  budget_owner = &images;
  // gknn.topk_cache_mb, as last reloaded (a smaller budget evicts at once).
  try {
    if (topk_cache().set_budget(std::int64_t(gknn_topk_cache_mb) << 20)) topk_cache().publish(ctl);
  } catch (...) {
  }
  if (!sessions) return;
  for (auto it = sessions->begin(); it != sessions->end();) {
    RequestSlot* s = &ctl->slots[it->first];
    SpinLockAcquire(&s->mutex);
    const bool open = s->topk_open == it->second->id;
    SpinLockRelease(&s->mutex);
    it = open ? std::next(it) : sessions->erase(it);
  }
}

}  // namespace gknn_service
