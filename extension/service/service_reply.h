// What the GPU service's request handlers share when they answer
// (service_worker.cpp, service_build.cpp, service_topk.cpp, the images):
// an error reply, whether the requester gave a request up, and an executor
// task's outcome from what its core code threw (the message of a request
// over gknn.gpu_memory_limit is service_images.h's over_budget). Callable from executor threads: no
// PostgreSQL call but the slot's spinlock (an atomic).
#pragma once

#include <cstdint>
#include <cstdio>
#include <new>
#include <string>

#include "core_call.h"
#include "gknn/error.h"
#include "service_shmem.h"

namespace gknn_service {

// Writes an error reply into the slot (delivered by whoever answers it).
inline void set_error(RequestSlot* s, int sqlstate, const char* message) {
  s->reply = kError;
  s->sqlstate = sqlstate;
  snprintf(s->message, sizeof(s->message), "%s", message);
}

// The requester gave the request up (a cancel, statement_timeout, its exit).
inline bool withdrawn(RequestSlot* s) {
  SpinLockAcquire(&s->mutex);
  const bool gone = s->state == kAbandoned;
  SpinLockRelease(&s->mutex);
  return gone;
}

// An executor task's outcome; run_captured() fills it.
struct TaskOutcome {
  bool failed = false;
  gknn::ErrorCode code = gknn::ErrorCode::InvalidArgument;
  int sqlstate = 0;
  std::string message;
};

// Runs `fn` (core code, on an executor thread) and records what it throws,
// so that nothing escapes the thread.
template <typename Fn>
void run_captured(TaskOutcome& out, Fn&& fn) {
  try {
    fn();
    out.failed = false;
    return;
  } catch (const gknn::Error& e) {
    out.code = e.code();
    out.sqlstate = gknn_pg::sqlstate_for(e.code());
    out.message = e.what();
  } catch (const std::bad_alloc&) {
    out.code = gknn::ErrorCode::OutOfMemory;
    out.sqlstate = ERRCODE_OUT_OF_MEMORY;
    out.message = "out of memory in the gknn service";
  } catch (const std::exception& e) {
    out.code = gknn::ErrorCode::InvalidArgument;
    out.sqlstate = ERRCODE_INTERNAL_ERROR;
    out.message = e.what();
  }
  out.failed = true;
}

}  // namespace gknn_service
