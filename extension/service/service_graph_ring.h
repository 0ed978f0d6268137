// The GPU service's side of the resident graph search kernel
// (service_graph_ring.cpp; the backends' side is service_client.cpp's
// ring_search). Internal to extension/service/; main thread only.
//
// On a GPU (docs/resident-graph-search.md), a gpu_graph image's searches
// are served by a search kernel left running on its GPU
// (gknn::graph::GraphServer, kRingSlots request slots in shared memory,
// clusters of kServerTeam CTAs), which backends write their queries into
// and read their answers from themselves. The service's main thread starts
// it (a graph search reaching it while nothing else runs is answered
// kUseRing), keeps its next launch queued, frees the slots backends gave
// up, and stops it (every slot answered and held first)
// before anything else is taken (another image's or kind's request, a load,
// a build, a GpuTopK session, a forget, a reload) or after kServingIdleUs
// without a request. Each launch ends on its own within 4 ms: a
// synchronizing CUDA call elsewhere waits two lifetimes at most.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {

// Starts the kernel for r's image to serve the group's graph searches (of
// one key) where the ring can take them all and nothing_else_runs (another
// image's kernel is stopped first); true: it serves r now and the caller
// answers the group kUseRing. False where it already serves r (the group
// found every slot taken: the executors search it), or it cannot start.
bool start_serving(ServiceShared* ctl, std::shared_ptr<Resident>& r,
                   const std::vector<const RequestSlot*>& group, bool nothing_else_runs,
                   const std::atomic<bool>& device_fault);

// Each pass of the service's loop while serving: frees the slots their
// backends gave up once answered, counts the ring's searches, keeps the
// kernel's next launch queued, and stops it after kServingIdleUs idle.
void pump_serving(ServiceShared* ctl, const std::atomic<bool>& device_fault);

// Stops the kernel (the ring no longer serves; every slot answered and held
// first, unless device_fault, the service's flag, is or becomes set: then
// at once); nothing where none serves.
void stop_serving(ServiceShared* ctl, const std::atomic<bool>& device_fault);

// The image the kernel serves, or null.
const Resident* serving_image();

// Whether the kernel failed or its ring did not drain (the service then
// restarts with a fresh context, as for a device fault).
bool serving_faulted();

// The ring's descriptor says no kernel serves it (at the service's exit
// too: a kernel dies with its process).
void stop_ring(ServiceShared* ctl);

// At the service's start: the last service's kernel is gone with it (one
// killed while writing the descriptor left its sequence odd: made even).
void reset_ring(ServiceShared* ctl);

}  // namespace gknn_service
