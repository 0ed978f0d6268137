// The GPU service's side of an index build (service_build.h): the backend
// opens a session with the quantizer's parameters, ships its training
// sample in pieces, asks for the training, fetches the quantizer back in
// pieces, then sends its vectors in batches to be encoded. Training and
// encoding run on the device the service picks for the build (the one with
// the least in use; the CPU for gknn.service = cpu), with the same core
// calls and so the same results as a backend building on its own.
//
// Memory: while a core call runs, its working memory (an estimate from the
// core's allocations) counts under gknn.gpu_memory_limit with the resident
// images; least recently used images are evicted to make room, and again
// when the device runs out anyway; a build that cannot fit is answered
// 53200.
//
// Cancellation: a training reports its progress into the slot (and wakes the
// requester to show it); once the requester gave the request up (a cancel,
// statement_timeout, its exit) the next report stops the core
// (Error(Cancelled)), and the session is dropped.
//
// Errors never leave as exceptions: every request runs in try/catch and a
// failure becomes its reply (SQLSTATE and message). Nothing here raises a
// PostgreSQL ERROR.
#include "service_build.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core_call.h"
#include "gknn/error.h"

extern "C" {
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
  int device = -1;  // where it trains and encodes (-1: the CPU)
};

// By requester slot. Host memory only, so destroying it at exit touches no
// CUDA.
std::map<int, Session> sessions;

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "index build request: " + what);
}

std::string kb(std::int64_t bytes) { return std::to_string((bytes + 1023) >> 10); }

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

// Runs `fn` (a core call on `device`) with `bytes` of working memory counted
// under the budget: images are evicted to make room, and again while the
// device runs out anyway (the call is then run again from its start).
template <typename Fn>
void with_room(ResidentImages& images, int device, std::int64_t bytes, const char* what, Fn&& fn) {
  if (!images.reserve(device, bytes))
    throw Error(ErrorCode::OutOfMemory, std::string(what) + " needs " + kb(bytes) +
                                            " kB, more than gknn.gpu_memory_limit allows (" +
                                            kb(images.budget()) + " kB)");
  struct Reservation {
    ResidentImages& images;
    int device;
    std::int64_t bytes;
    ~Reservation() { images.release(device, bytes); }
  } held{images, device, bytes};
  for (;;) {
    try {
      fn();
      return;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::OutOfMemory || device < 0 || !images.evict_one(device)) throw;
    }
  }
}

// The core's progress callback for a request: the report goes into the slot
// (the requester, woken, shows it); false, which stops the core, once the
// requester gave the request up.
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
    return !withdrawn;
  };
}

void begin(int slot, const RequestSlot* s) {
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
  Session fresh;
  fresh.id = s->build_id;
  fresh.params = p;
  fresh.rows = s->shape.entries;
  fresh.sample.resize(static_cast<std::size_t>(fresh.rows) * p.dim);
  sessions[slot] = std::move(fresh);
}

void sample_piece(Session& ss, const RequestSlot* s, const char* payload) {
  if (ss.quantizer) invalid("sample after training");
  const std::int64_t size = static_cast<std::int64_t>(ss.sample.size() * sizeof(float));
  const std::int64_t off = s->section_offset, bytes = s->payload_bytes;
  if (off < 0 || bytes < 0 || off > size || bytes > size - off) invalid("a sample piece past the sample");
  std::memcpy(reinterpret_cast<char*>(ss.sample.data()) + off, payload, bytes);
}

void train(ResidentImages& images, Session& ss, RequestSlot* s) {
  if (ss.quantizer) invalid("trained twice");
  ss.device = images.build_device();
  std::unique_ptr<Quantizer> q;
  with_room(images, ss.device, train_bytes(ss.params, ss.rows), "the index build's training", [&] {
    q = std::make_unique<Quantizer>(
        gknn::ivfpq::train(ss.params, ss.sample.data(), ss.rows, ss.device, progress_into(s)));
  });
  ss.quantizer = std::move(q);
  std::vector<float>().swap(ss.sample);
  s->count = ss.quantizer->params.lists;
}

void quantizer_piece(const Session& ss, const RequestSlot* s, char* payload) {
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

// The payload holds n vectors; their lists (int32) and codes replace them.
// payload_bytes is the room the requester gave, enough for either.
void encode(ResidentImages& images, const Session& ss, RequestSlot* s, char* payload) {
  if (!ss.quantizer) invalid("encode before training");
  const Params& p = ss.quantizer->params;
  const std::int64_t n = s->count, cs = gknn::ivfpq::code_size(p);
  if (n < 0 || s->payload_bytes < n * 4 * std::int64_t(p.dim) || s->payload_bytes < n * (4 + cs))
    invalid("an encode batch larger than its payload");
  std::vector<std::int32_t> lists(static_cast<std::size_t>(n));
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * cs));
  with_room(images, ss.device, encode_bytes(p, n), "the index build's encoding", [&] {
    gknn::ivfpq::encode(*ss.quantizer, reinterpret_cast<const float*>(payload), n, ss.device, lists.data(),
                        codes.data(), progress_into(s));
  });
  std::memcpy(payload, lists.data(), lists.size() * sizeof(std::int32_t));
  std::memcpy(payload + lists.size() * sizeof(std::int32_t), codes.data(), codes.size());
}

void dispatch(ResidentImages& images, int slot, RequestSlot* s, char* payload) {
  if (s->kind == kBuildBegin) return begin(slot, s);
  auto it = sessions.find(slot);
  if (it == sessions.end() || it->second.id != s->build_id) {
    // A service that restarted since the session was opened: the requester
    // takes it as the service gone (and goes on on its own CPU, or errors).
    s->reply = kServiceGone;
    return;
  }
  if (s->payload_bytes > 0 && payload == nullptr)
    throw std::runtime_error("could not map a build request's payload");
  Session& ss = it->second;
  switch (s->kind) {
    case kBuildSample:
      return sample_piece(ss, s, payload);
    case kBuildTrain:
      return train(images, ss, s);
    case kBuildFetch:
      return quantizer_piece(ss, s, payload);
    case kBuildEncode:
      return encode(images, ss, s, payload);
    default:
      invalid("unknown kind " + std::to_string(s->kind));
  }
}

void set_error(RequestSlot* s, int sqlstate, const char* message) {
  s->reply = kError;
  s->sqlstate = sqlstate;
  strlcpy(s->message, message, sizeof(s->message));
}

}  // namespace

bool run_build_request(ResidentImages& images, int slot, RequestSlot* s, char* payload) {
  bool fault = false;
  s->reply = kOk;
  try {
    dispatch(images, slot, s, payload);
  } catch (const Error& e) {
    fault = e.code() == ErrorCode::DeviceFault;
    set_error(s, gknn_pg::sqlstate_for(e.code()), e.what());
    // Stopped because the requester gave the request up: no one reads the
    // reply, and a withdrawn build is no error of the service's.
    if (e.code() == ErrorCode::Cancelled) {
      s->reply = kServiceGone;
      sessions.erase(slot);
    }
  } catch (const std::bad_alloc&) {
    set_error(s, ERRCODE_OUT_OF_MEMORY, "out of memory in the gknn service");
  } catch (const std::exception& e) {
    set_error(s, ERRCODE_INTERNAL_ERROR, e.what());
  } catch (...) {
    set_error(s, ERRCODE_INTERNAL_ERROR, "unexpected error in the gknn service");
  }
  // A failed request ends the build (its requester raises an ERROR).
  if (s->reply == kError) sessions.erase(slot);
  return fault;
}

void sweep_build_sessions(ServiceShared* ctl) {
  for (auto it = sessions.begin(); it != sessions.end();) {
    RequestSlot* s = &ctl->slots[it->first];
    SpinLockAcquire(&s->mutex);
    const bool open = s->build_open == it->second.id;
    SpinLockRelease(&s->mutex);
    it = open ? std::next(it) : sessions.erase(it);
  }
}

}  // namespace gknn_service
