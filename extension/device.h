// Which device a gknn operation runs on, from the GUCs gknn.device and
// gknn.gpu_id. CUDA is initialised on first use, in the backend that needs it.
#pragma once

enum GknnDeviceMode { GKNN_DEVICE_AUTO, GKNN_DEVICE_GPU, GKNN_DEVICE_CPU };

extern int gknn_device_mode;  // GUC gknn.device
extern int gknn_gpu_id;       // GUC gknn.gpu_id

// The GPU ordinal to use, or -1 for the CPU. `auto` falls back to the CPU
// silently; `gpu` raises an error when gknn.gpu_id names no usable GPU.
int gknn_resolve_device();
