// The GPU service's side of GpuTopK (service_topk.cpp): a session per
// requester (a backend or a parallel worker scanning the heap) holding the
// core's running top-k (gknn::expr::TopK, on the service's GPU, or its CPU
// for gknn.service = cpu) until the requester closes it. Opening it, each
// batch and the finish run as tasks on the executor threads (at most all
// but one at a time, so that index searches always have one); fetching the
// result's row ids is answered on the main thread. Main thread only, but for
// the tasks themselves. Internal to extension/service/.
#pragma once

#include "service_build.h"
#include "service_executors.h"
#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {

// Runs one GpuTopK request (is_topk_request(s->kind)) of requester `slot`,
// its payload mapped at `payload` (null: it could not be mapped; it must stay
// mapped until the request is answered). Never throws. False: the reply is
// written, answer it now. True: an executor task runs it (or will), and
// finish_topk_task answers it. Requests answered meanwhile (tasks that
// waited and could not start) go through `answer`.
bool run_topk_request(ResidentImages& images, Executors& executors, int slot, RequestSlot* s, char* payload,
                      AnswerFn answer);

// Whether an executor task id is a GpuTopK task's (build tasks have bit 63,
// the worker's batch ids never reach bit 62).
constexpr uint64 kTopKTaskBit = uint64{1} << 62;
inline bool is_topk_task(uint64 id) { return (id >> 62) == 1; }

// A GpuTopK task finished (`id` from Executors::finished()): writes its
// request's reply, answers it through `answer`, then starts the tasks
// waiting for an executor. *fault: a device fault happened (the worker then
// exits). Never throws.
void finish_topk_task(ResidentImages& images, Executors& executors, uint64 id, AnswerFn answer, bool* fault);

// GpuTopK tasks handed to the executors and not finished.
int topk_tasks_running();
bool topk_sessions_open();  // a GpuTopK session holds the GPU (the resident graph kernel waits)

// Drops the sessions whose requester closed them (its slot's topk_open
// names another session or none: the scan ended, failed or was cancelled,
// or the requester exited); their memory reservation goes back to
// `images`. Never throws.
void sweep_topk_sessions(ServiceShared* ctl, ResidentImages& images);

}  // namespace gknn_service
