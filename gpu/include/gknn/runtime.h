// GPU discovery. Nothing here initialises CUDA until a function is called, so
// a process that never asks (the postmaster) never creates a CUDA context.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gknn {

struct DeviceInfo {
  int ordinal;
  std::string name;
  std::size_t total_memory;  // bytes
  int cc_major;
  int cc_minor;
};

// The visible GPUs; empty (never an error) when there is no driver or GPU.
std::vector<DeviceInfo> list_devices();

// Version of the CUDA runtime linked into the library, as CUDART_VERSION
// (13000 for 13.0).
int cuda_runtime_version();

// Throws Error(NoDevice) unless `ordinal` names a usable GPU.
void require_device(int ordinal);

// Makes `ordinal`'s CUDA context now (it is otherwise made by the first
// call that needs it), and with it the driver's helper threads, which take
// the calling thread's signal mask: a process that handles signals on one
// thread (the GPU service) opens its devices with them blocked. Throws
// Error(NoDevice) when the context cannot be made.
void open_device(int ordinal);

// Pins `bytes` of host memory at `p`
// (page-aligned; e.g. shared memory other processes write) and maps it for
// every device (a GraphServer's RingSpec). Throws Error(DeviceFault) when
// refused.
void register_host_memory(void* p, std::size_t bytes);

}  // namespace gknn
