// The backend's side of the GPU service as the files that send requests use
// it (service_client.cpp: searches and image shipping; service_build_client.cpp:
// index builds): the backend's slot, submitting, waiting, the reply's error.
// Internal to extension/service/.
//
// Every function here may leave by longjmp (WaitLatch, CHECK_FOR_INTERRUPTS,
// ereport): callers hold no C++ object with a destructor across them.
#pragma once

#include "service_shmem.h"

namespace gknn_service {

constexpr int64 kChunkBytes = 4 << 20;  // pieces of a shipped image or training sample, per round trip

// This process's request slot (indexed by its PGPROC).
RequestSlot* my_slot();

// Waits until the slot may be filled: a cancelled request of ours that the
// service is still running must finish first.
void acquire_slot(RequestSlot* s);

// Called by call() each time the waiting backend wakes (the service sets its
// latch when it reports progress): plain reads and progress counters only,
// nothing that can raise an error.
using WaitHook = void (*)(RequestSlot* s, void* arg);

// Submits the filled slot and waits for the answer; returns the reply code
// (the slot is then Free again). kServiceGone when the service is not ready
// or stopped meanwhile. A cancel or termination while waiting gives the
// request up (withdrawn, or left to the service to finish into the void)
// and re-throws.
ReplyCode call(RequestSlot* s, WaitHook hook = nullptr, void* arg = nullptr);

// call() in two halves, for a requester that works while its request runs
// (GpuTopK fills its next batch): submit() returns false when the service
// is not ready (nothing submitted); await_reply() waits as call() does. The
// slot and the request's payload are the service's in between.
bool submit(RequestSlot* s);
ReplyCode await_reply(RequestSlot* s, WaitHook hook = nullptr, void* arg = nullptr);

// Gives up the slot's open request (cancel, error, exit): withdrawn when not
// taken yet, else left to the service to finish into the void. Raises
// nothing (memory context callbacks call it).
void abandon(RequestSlot* s);

// ERROR with the reply's SQLSTATE and message.
[[noreturn]] void raise_reply_error(const RequestSlot* s);

// Sets the service's latch (it then looks at the slots again).
void wake_service();

}  // namespace gknn_service
