// The GPU service's side of an index build (service_build.h): the backend
// opens a session with the quantizer's parameters, ships its training
// sample in pieces, asks for the training, fetches the quantizer back in
// pieces, then sends its vectors in batches to be encoded. Training and
// encoding run on the device the service picks for the build (the one with
// the least in use; the CPU for gknn.service = cpu), with the same core
// calls and so the same results as a backend building on its own.
//
// A gpu_graph build is a session of the same shape: the rows' vectors
// shipped as the sample, one "training" that builds the graph
// (gknn::graph::build_gpu on the build's device, build_cpu on the CPU),
// then its rows and entries fetched back in pieces. No encode batches.
//
// Threads: sessions, tasks and the resident images belong to the main
// thread. A training or an encode batch is a task on an executor thread,
// which reads its session's sample or quantizer (nothing else changes them
// while it runs: the requester sends one request at a time, and a session
// dropped meanwhile is kept alive by its task), writes its outcome into the
// task, and its progress into the request's slot. The main thread writes the
// reply when the task has finished.
//
// Memory: while a task runs, its working memory (an estimate from the
// core's allocations) counts under gknn.gpu_memory_limit with the resident
// images; least recently used images are evicted to make room, and again
// (the task then runs again) when the device runs out anyway; a build that
// cannot fit is answered 53200.
//
// Cancellation: a training reports its progress into the slot and wakes the
// requester (SetLatch of another process: atomics and a kill(), safe from a
// thread); once the requester gave the request up (a cancel,
// statement_timeout, its exit), or the service is stopping, the next report
// stops the core (Error(Cancelled)).
//
// Errors never leave as exceptions, and nothing here raises a PostgreSQL
// ERROR.
#include "service_build.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "core_call.h"
#include "gknn/error.h"
#include "gknn/graph.h"
#include "service_reply.h"

extern "C" {
#include "storage/ipc.h"
#include "storage/latch.h"
}

namespace gknn_service {
namespace {

using gknn::Error;
using gknn::ErrorCode;
using gknn::ivfpq::Params;
using gknn::ivfpq::Quantizer;

struct Session {
  std::uint64_t id = 0;
  Params params;
  std::int64_t rows = 0;
  std::vector<float> sample;  // rows x dim, until trained
  std::unique_ptr<Quantizer> quantizer;
  // A gpu_graph build: its parameters, and the graph once built (the
  // sample then holds the rows' vectors).
  bool graph = false;
  gknn::graph::BuildParams graph_params;
  std::unique_ptr<gknn::graph::Graph> built;
  int device = -1;        // where it trains and encodes (-1: the CPU)
  bool training = false;  // a training task exists
};

// A training or an encode batch. The executor thread writes the outcome.
struct Task : TaskOutcome {
  int slot = 0;
  RequestSlot* s = nullptr;
  std::shared_ptr<Session> session;
  char* payload = nullptr;  // encode: the vectors in, their lists and codes out
  std::int64_t reserved = 0;
  std::unique_ptr<Quantizer> trained;
  std::unique_ptr<gknn::graph::Graph> graph;
};

// Main thread only. Sessions by requester slot; tasks by id (running or
// waiting for an executor); host memory only, so destroying them at exit
// touches no CUDA.
std::map<int, std::shared_ptr<Session>> sessions;
std::map<std::uint64_t, std::unique_ptr<Task>> tasks;
std::deque<std::uint64_t> waiting;
std::uint64_t next_task = 0;
int running = 0;

// Set at the service's exit: trainings stop at their next progress report
// (the executors are joined after it).
std::atomic<bool> stopping{false};
bool exit_callback = false;

void on_exit_stop(int, Datum) { stopping = true; }

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "index build request: " + what);
}

// The core's sizes behind the estimates below (gpu/ivfpq/assign_gemm.cu,
// assign_cuda.cu): the GEMM's tile of dot products, the encoder's batch.
constexpr std::int64_t kGemmTileFloats = std::int64_t(1) << 26;
constexpr std::int64_t kEncodeBatchRows = 65536;
constexpr std::int64_t kEncodeBatchFloats = std::int64_t(1) << 25;

std::int64_t largest_k(const Params& p) {
  return std::max<std::int64_t>(p.lists, std::int64_t(1) << p.nbits);
}

// Working memory of gknn::ivfpq::train on n rows as its GPU path allocates
// it: the rows (the sample, then its residuals), one assignment's centroids
// and labels, the GEMM's dot products.
std::int64_t train_bytes(const Params& p, std::int64_t n) {
  const std::int64_t centroids = std::max(std::int64_t(p.lists) * p.dim, std::int64_t(p.dim) << p.nbits);
  const std::int64_t floats = n * p.dim + centroids + std::min(n * largest_k(p), kGemmTileFloats);
  const std::int64_t labels = n * std::max(1, p.m);
  return 4 * (floats + labels);
}

// Working memory of gknn::ivfpq::encode on n rows: the quantizer, and two
// batches in flight (rows, residuals, labels, codes, the GEMM's dot products).
std::int64_t encode_bytes(const Params& p, std::int64_t n) {
  const std::int64_t batch =
      std::min({n, kEncodeBatchRows, std::max<std::int64_t>(1, kEncodeBatchFloats / p.dim)});
  const std::int64_t quantizer = 4 * (std::int64_t(p.lists) * p.dim + (std::int64_t(p.dim) << p.nbits));
  const std::int64_t per_batch =
      batch * (8 * std::int64_t(p.dim) + 4 + 4 * std::int64_t(p.m) + gknn::ivfpq::code_size(p)) +
      4 * std::min(batch * largest_k(p), kGemmTileFloats);
  return quantizer + 2 * per_batch;
}

// Working memory of gknn::graph::build_gpu over n rows: the core's own
// estimate (build_gpu_bytes). build_cpu holds about as much in host memory.
std::int64_t graph_bytes(const gknn::graph::BuildParams& p, std::int64_t n) {
  return gknn::graph::build_gpu_bytes(p, n);
}

// --- the executor's part (no PostgreSQL but the slot's lock and a latch) ----

// A graph build's phase as the slot carries it.
int32 graph_phase(const char* phase) {
  if (std::strcmp(phase, gknn::graph::kPhasePrune) == 0) return kGraphBuildPrune;
  if (std::strcmp(phase, gknn::graph::kPhaseReverse) == 0) return kGraphBuildReverse;
  if (std::strcmp(phase, gknn::graph::kPhaseConnect) == 0) return kGraphBuildConnect;
  return kGraphBuildKnn;
}

// The core's progress callback for a task: the report goes into the slot
// (the requester, woken, shows it); false, which stops the core, once the
// requester gave the request up or the service is stopping.
gknn::ivfpq::Progress progress_into(RequestSlot* s) {
  return [s](gknn::ivfpq::Phase phase, std::int64_t done, std::int64_t total) {
    SpinLockAcquire(&s->mutex);
    s->progress_phase = static_cast<int32>(phase);
    s->progress_done = done;
    s->progress_total = total;
    const bool withdrawn = s->state == kAbandoned;
    Latch* wake = s->owner_latch;
    SpinLockRelease(&s->mutex);
    if (wake && !withdrawn) SetLatch(wake);
    return !withdrawn && !stopping;
  };
}

// The graph of a gpu_graph session, on the session's device (the CPU: -1).
std::unique_ptr<gknn::graph::Graph> build_graph(const Session& ss, RequestSlot* s) {
  const gknn::ivfpq::Progress report = progress_into(s);
  const gknn::graph::Progress progress = [&report](const char* phase, std::int64_t done, std::int64_t total) {
    return report(static_cast<gknn::ivfpq::Phase>(graph_phase(phase)), done, total);
  };
  auto g = std::make_unique<gknn::graph::Graph>(
      ss.device >= 0 ? gknn::graph::build_gpu(ss.sample.data(), ss.rows, ss.graph_params, ss.device, progress)
                     : gknn::graph::build_cpu(ss.sample.data(), ss.rows, ss.graph_params, progress));
  gknn::graph::validate(*g);  // what the requester will write to its pages
  return g;
}

void run_task(Task& t) {
  const Session& ss = *t.session;
  run_captured(t, [&] {
    if (t.s->kind == kBuildTrain && ss.graph) {
      t.graph = build_graph(ss, t.s);
    } else if (t.s->kind == kBuildTrain) {
      t.trained = std::make_unique<Quantizer>(
          gknn::ivfpq::train(ss.params, ss.sample.data(), ss.rows, ss.device, progress_into(t.s)));
    } else {
      const Quantizer& q = *ss.quantizer;
      const std::int64_t n = t.s->count;
      std::vector<std::int32_t> lists(static_cast<std::size_t>(n));
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(n) * gknn::ivfpq::code_size(q.params));
      gknn::ivfpq::encode(q, reinterpret_cast<const float*>(t.payload), n, ss.device, lists.data(),
                          codes.data(), progress_into(t.s));
      std::memcpy(t.payload, lists.data(), lists.size() * sizeof(std::int32_t));
      std::memcpy(t.payload + lists.size() * sizeof(std::int32_t), codes.data(), codes.size());
    }
  });
}

// --- the main thread's part ----------------------------------------------------

// Hands a task to the executors with its memory reserved; false (the reply
// written) when it cannot run.
bool start(ResidentImages& images, Executors& executors, std::uint64_t id, Task& t) {
  if (withdrawn(t.s)) {  // given up while waiting: nobody reads a reply
    t.s->reply = kServiceGone;
    return false;
  }
  Session& ss = *t.session;
  const bool train = t.s->kind == kBuildTrain;
  if (train) ss.device = images.build_device();
  const std::int64_t need = ss.graph ? graph_bytes(ss.graph_params, ss.rows)
                            : train  ? train_bytes(ss.params, ss.rows)
                                     : encode_bytes(ss.quantizer->params, t.s->count);
  if (!images.reserve(ss.device, need)) {
    const char* work = ss.graph ? "the gpu_graph build"
                       : train  ? "the index build's training"
                                : "the index build's encoding";
    const std::string what = over_budget(work, need, images.budget());
    set_error(t.s, ERRCODE_OUT_OF_MEMORY, what.c_str());
    return false;
  }
  Task* task = &t;
  try {
    executors.submit(id, [task] { run_task(*task); });
  } catch (const std::exception&) {
    images.release(ss.device, need);
    set_error(t.s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
    return false;
  }
  t.reserved = need;
  ++running;
  return true;
}

// Starts waiting tasks while the builds' share of the executors allows
// (all executors but one: searches always keep one). A task that cannot
// start is answered (through `answer`; for `own_slot`, *own_failed is set
// instead) and dropped, with its session.
void start_waiting(ResidentImages& images, Executors& executors, AnswerFn answer, int own_slot,
                   bool* own_failed) {
  const int share = std::max(1, executors.threads() - 1);
  while (running < share && !waiting.empty()) {
    const std::uint64_t id = waiting.front();
    auto it = tasks.find(id);
    if (it == tasks.end()) {
      waiting.pop_front();
      continue;
    }
    Task& t = *it->second;
    if (start(images, executors, id, t)) {
      waiting.pop_front();
      continue;
    }
    const int slot = t.slot;
    auto sit = sessions.find(slot);
    if (sit != sessions.end() && sit->second == t.session) sessions.erase(sit);
    tasks.erase(it);
    waiting.pop_front();
    if (slot == own_slot)
      *own_failed = true;
    else
      answer(slot);
  }
}

// A gpu_graph build's session: the rows' vectors to come as the sample.
std::shared_ptr<Session> begin_graph(const RequestSlot* s) {
  gknn::graph::BuildParams p;
  p.dim = s->shape.dim;
  p.metric = static_cast<gknn::Metric>(s->shape.metric);
  p.degree = s->shape.degree;
  p.intermediate_degree = s->shape.intermediate_degree;
  p.seed = s->shape.seed;
  gknn::graph::validate(p);
  if (s->shape.entries < 1 || s->shape.entries >= std::int64_t(gknn::graph::kNoNode))
    invalid("a graph build of " + std::to_string(s->shape.entries) + " rows");
  auto fresh = std::make_shared<Session>();
  fresh->graph = true;
  fresh->graph_params = p;
  fresh->params.dim = p.dim;  // the sample's row size
  fresh->rows = s->shape.entries;
  fresh->sample.resize(static_cast<std::size_t>(fresh->rows) * p.dim);
  return fresh;
}

void begin(int slot, const RequestSlot* s) {
  if (s->shape.kind == kImageGraph) {
    sessions.erase(slot);  // an earlier session of the same requester
    auto fresh = begin_graph(s);
    fresh->id = s->build_id;
    sessions[slot] = std::move(fresh);
    return;
  }
  Params p;
  p.dim = s->shape.dim;
  p.lists = s->shape.lists;
  p.m = s->shape.m;
  p.nbits = s->shape.nbits;
  p.metric = static_cast<gknn::Metric>(s->shape.metric);
  p.kmeans_iters = s->shape.kmeans_iters;
  p.seed = s->shape.seed;
  gknn::ivfpq::validate(p);
  if (s->shape.entries < 1) invalid("a training sample needs at least one row");
  sessions.erase(slot);  // an earlier session of the same requester
  auto fresh = std::make_shared<Session>();
  fresh->id = s->build_id;
  fresh->params = p;
  fresh->rows = s->shape.entries;
  fresh->sample.resize(static_cast<std::size_t>(fresh->rows) * p.dim);
  sessions[slot] = std::move(fresh);
}

void sample_piece(Session& ss, const RequestSlot* s, const char* payload) {
  if (ss.training || ss.built) invalid("sample after training");
  const std::int64_t size = static_cast<std::int64_t>(ss.sample.size() * sizeof(float));
  const std::int64_t off = s->section_offset, bytes = s->payload_bytes;
  if (off < 0 || bytes < 0 || off > size || bytes > size - off) invalid("a sample piece past the sample");
  std::memcpy(reinterpret_cast<char*>(ss.sample.data()) + off, payload, bytes);
}

// A piece of a built graph's rows or entries.
void graph_piece(const Session& ss, const RequestSlot* s, char* payload) {
  if (!ss.built) invalid("the graph asked for before it was built");
  const std::vector<std::uint32_t>* v = s->section == kGraphEdges     ? &ss.built->edges
                                        : s->section == kGraphEntries ? &ss.built->entries
                                                                      : nullptr;
  if (!v) invalid("unknown graph section " + std::to_string(s->section));
  const std::int64_t size = static_cast<std::int64_t>(v->size() * sizeof(std::uint32_t));
  const std::int64_t off = s->section_offset, bytes = s->payload_bytes;
  if (off < 0 || bytes < 0 || off > size || bytes > size - off) invalid("a graph piece past its array");
  std::memcpy(payload, reinterpret_cast<const char*>(v->data()) + off, bytes);
}

void quantizer_piece(const Session& ss, const RequestSlot* s, char* payload) {
  if (ss.graph) return graph_piece(ss, s, payload);
  if (!ss.quantizer) invalid("the quantizer asked for before training");
  const std::vector<float>* v = s->section == kCentroids   ? &ss.quantizer->centroids
                                : s->section == kCodebooks ? &ss.quantizer->codebooks
                                                           : nullptr;
  if (!v) invalid("unknown quantizer section " + std::to_string(s->section));
  const std::int64_t size = static_cast<std::int64_t>(v->size() * sizeof(float));
  const std::int64_t off = s->section_offset, bytes = s->payload_bytes;
  if (off < 0 || bytes < 0 || off > size || bytes > size - off) invalid("a quantizer piece past its array");
  std::memcpy(payload, reinterpret_cast<const char*>(v->data()) + off, bytes);
}

// A training or an encode batch, checked, queued as a task.
void queue_task(int slot, const std::shared_ptr<Session>& ss, RequestSlot* s, char* payload) {
  if (s->kind == kBuildTrain) {
    if (ss->training || ss->quantizer || ss->built) invalid("trained twice");
  } else if (ss->graph) {
    invalid("an encode batch in a gpu_graph build");
  } else {
    if (!ss->quantizer) invalid("encode before training");
    const Params& p = ss->quantizer->params;
    const std::int64_t n = s->count, cs = gknn::ivfpq::code_size(p);
    // payload_bytes: the room the requester gave, enough for the vectors in
    // and for their lists and codes out.
    if (n < 0 || s->payload_bytes < n * 4 * std::int64_t(p.dim) || s->payload_bytes < n * (4 + cs))
      invalid("an encode batch larger than its payload");
  }
  auto t = std::make_unique<Task>();
  t->slot = slot;
  t->s = s;
  t->session = ss;
  t->payload = payload;
  const std::uint64_t id = kBuildTaskBit | ++next_task;
  tasks[id] = std::move(t);
  waiting.push_back(id);
  if (s->kind == kBuildTrain) ss->training = true;
}

// True when the request became a task.
bool dispatch(int slot, RequestSlot* s, char* payload) {
  if (s->kind == kBuildBegin) {
    begin(slot, s);
    return false;
  }
  auto it = sessions.find(slot);
  if (it == sessions.end() || it->second->id != s->build_id) {
    // A service that restarted since the session was opened: the requester
    // takes it as the service gone (and goes on on its own CPU, or errors).
    s->reply = kServiceGone;
    return false;
  }
  if (s->payload_bytes > 0 && payload == nullptr)
    throw std::runtime_error("could not map a build request's payload");
  switch (s->kind) {
    case kBuildSample:
      sample_piece(*it->second, s, payload);
      return false;
    case kBuildFetch:
      quantizer_piece(*it->second, s, payload);
      return false;
    case kBuildTrain:
    case kBuildEncode:
      queue_task(slot, it->second, s, payload);
      return true;
    default:
      invalid("unknown kind " + std::to_string(s->kind));
  }
}

}  // namespace

bool run_build_request(ResidentImages& images, Executors& executors, int slot, RequestSlot* s, char* payload,
                       AnswerFn answer) {
  if (!exit_callback) {
    // Registered after the worker's own exit callbacks, so it runs before
    // them: trainings stop before the executors are joined.
    before_shmem_exit(on_exit_stop, 0);
    exit_callback = true;
  }
  s->reply = kOk;
  try {
    if (!dispatch(slot, s, payload)) return false;
    bool failed = false;
    start_waiting(images, executors, answer, slot, &failed);
    return !failed;
  } catch (const Error& e) {
    set_error(s, gknn_pg::sqlstate_for(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_error(s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
  } catch (const std::exception& e) {
    set_error(s, ERRCODE_INTERNAL_ERROR, e.what());
  }
  sessions.erase(slot);  // a failed request ends the build (its requester raises an ERROR)
  return false;
}

void finish_build_task(ResidentImages& images, Executors& executors, uint64 id, AnswerFn answer,
                       bool* fault) {
  *fault = false;
  auto it = tasks.find(id);
  if (it == tasks.end()) return;
  Task& t = *it->second;
  Session& ss = *t.session;
  RequestSlot* s = t.s;
  --running;
  // A device that ran out anyway (other processes' memory, the allocator's
  // overhead): evict and run again while anything is left to evict.
  if (t.failed && t.code == ErrorCode::OutOfMemory && ss.device >= 0 && !withdrawn(s) &&
      images.evict_one(ss.device)) {
    Task* task = &t;
    try {
      executors.submit(id, [task] { run_task(*task); });
      ++running;
      return;
    } catch (const std::exception&) {
      // answered with the device's error below
    }
  }
  images.release(ss.device, t.reserved);
  const bool train = s->kind == kBuildTrain;
  if (!t.failed) {
    s->reply = kOk;
    if (train && ss.graph) {
      ss.built = std::move(t.graph);
      std::vector<float>().swap(ss.sample);
      ss.training = false;
      s->count = static_cast<std::int64_t>(ss.built->entries.size());
    } else if (train) {
      ss.quantizer = std::move(t.trained);
      std::vector<float>().swap(ss.sample);
      ss.training = false;
      s->count = ss.quantizer->params.lists;
    }
  } else {
    if (t.code == ErrorCode::Cancelled) {
      s->reply = kServiceGone;  // withdrawn, or the service stopping: no error of the build's
    } else {
      *fault = t.code == ErrorCode::DeviceFault;
      set_error(s, t.sqlstate, t.message.c_str());
    }
    auto sit = sessions.find(t.slot);
    if (sit != sessions.end() && sit->second == t.session) sessions.erase(sit);
  }
  const int slot = t.slot;
  tasks.erase(it);
  answer(slot);
  try {
    bool unused = false;
    start_waiting(images, executors, answer, -1, &unused);
  } catch (const std::exception&) {
    // Out of memory while starting the next: it starts when another ends.
  }
}

int build_tasks_running() { return running; }
bool build_sessions_open() { return !sessions.empty(); }

void sweep_build_sessions(ServiceShared* ctl) {
  for (auto it = sessions.begin(); it != sessions.end();) {
    RequestSlot* s = &ctl->slots[it->first];
    SpinLockAcquire(&s->mutex);
    const bool open = s->build_open == it->second->id;
    SpinLockRelease(&s->mutex);
    it = open ? std::next(it) : sessions.erase(it);
  }
}

}  // namespace gknn_service
