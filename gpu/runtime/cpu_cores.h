// The host's logical CPUs, read once. std::thread::hardware_concurrency()
// reads /sys/devices/system/cpu/online at every call (glibc: an open, a read
// and a close; 10 us a call on the 2-core development VM), which every CPU
// graph or IVF-PQ search paid when it asked how many threads to use: about
// as long as a small graph search itself.
#pragma once

#include <algorithm>
#include <thread>

namespace gknn {

inline unsigned cpu_cores() {
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

}  // namespace gknn
