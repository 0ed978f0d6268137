// The GPU service's side of index builds (service_build.cpp): a session per
// requester holding its training sample, then its trained quantizer, until
// the requester closes it. The quick requests (open a session, a piece of
// the sample, a piece of the quantizer) are answered on the main thread at
// once; a training or an encode batch runs on an executor thread
// (service_executors.h), at most all executors but one at a time so that
// searches always have one. Main thread only, but for the tasks themselves.
// Internal to extension/service/.
#pragma once

#include "service_executors.h"
#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {

// Answers the request of a slot (the worker's answer(): the reply is
// written; it frees or fails the slot and wakes the requester).
using AnswerFn = void (*)(int slot);

// Runs one build request (is_build_request(s->kind)) of requester `slot`,
// its payload mapped at `payload` (null: it could not be mapped; it must stay
// mapped until the request is answered). Never throws. False: the reply is
// written, answer it now. True: an executor task runs it (or will: tasks
// wait while the builds' share of the executors is taken), and
// finish_build_task answers it. Other requests answered meanwhile (tasks
// that waited and could not start) go through `answer`.
bool run_build_request(ResidentImages& images, Executors& executors, int slot, RequestSlot* s, char* payload,
                       AnswerFn answer);

// Whether an executor task id is a build's (the worker's own batch ids are
// never this large).
constexpr uint64 kBuildTaskBit = uint64{1} << 63;
inline bool is_build_task(uint64 id) { return (id & kBuildTaskBit) != 0; }

// A build task finished (`id` from Executors::finished()): writes the reply
// of its request and answers it through `answer` (unless it runs again,
// after an image was evicted from a device that ran out of memory), then
// starts the tasks waiting for an executor. *fault: a device fault happened
// (the worker then exits). Never throws.
void finish_build_task(ResidentImages& images, Executors& executors, uint64 id, AnswerFn answer, bool* fault);

// Build tasks handed to the executors and not finished.
int build_tasks_running();
bool build_sessions_open();  // a build session holds the GPU (the resident graph kernel waits)

// Drops the sessions whose requester closed them (its slot's build_open
// names another session or none: the build ended, failed or was cancelled,
// or the requester exited). Never throws.
void sweep_build_sessions(ServiceShared* ctl);

}  // namespace gknn_service
