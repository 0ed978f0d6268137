// launch_floor.cu: the launch-and-wait floor under a small gpu_graph call.
#pragma once

// The median ms of an empty kernel's launch and wait, shaped as a search of
// `queries` queries (a cluster of 8 CTAs a query when `cluster`, else one
// CTA), on device 0; -1 where the device cannot run it.
double launch_floor_ms(int queries, bool cluster);
