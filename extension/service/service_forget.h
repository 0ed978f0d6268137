// The service's side of forgetting images (service_forget.cpp). Internal to
// extension/service/.
#pragma once

#include "service_images.h"
#include "service_shmem.h"

namespace gknn_service {

// Takes the indexes committed transactions dropped or rebuilt and drops
// their images, and the table cache entries of dropped tables; true when
// any left (the shown lists are then stale).
// Throws nothing.
bool forget_dropped_images(ServiceShared* ctl, ResidentImages* images);

// From _PG_init, when the service runs: the object access hook that notes
// dropped gpu_ivfpq and gpu_graph indexes and databases.
void register_forget_hook();

}  // namespace gknn_service
