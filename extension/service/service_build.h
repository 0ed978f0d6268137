// The GPU service's side of index builds (service_build.cpp): a session per
// requester holding its training sample, then its trained quantizer, until
// the requester closes it. Internal to extension/service/.
#pragma once

#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {

// Runs one build request (is_build_request(s->kind)) of requester `slot`,
// its payload mapped at `payload` (null: it could not be mapped), and
// writes the reply into the slot. Never throws. Returns true after a device
// fault (the worker then exits, to be restarted with a fresh context).
bool run_build_request(ResidentImages& images, int slot, RequestSlot* s, char* payload);

// Drops the sessions whose requester closed them (its slot's build_open
// names another session or none: the build ended, failed or was cancelled,
// or the requester exited). Never throws.
void sweep_build_sessions(ServiceShared* ctl);

}  // namespace gknn_service
