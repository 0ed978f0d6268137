// The GPU service's executor pool alone (extension/service/service_executors.h,
// PostgreSQL-free): how long a task waits to start and how many tasks a second
// go through when a main thread keeps `inflight` tasks of `task_us` busy-work
// queued on `threads` executors, submitting one a round as the service does
// with batches. Every task
// is checked to run exactly once and be reported finished exactly once.
//
//   g++ -O2 -std=c++17 -pthread -Iextension bench/service/bench_executors.cpp \
//       extension/service/service_executors.cpp -o /tmp/bench_executors
//   /tmp/bench_executors [threads=4] [inflight=6] [task_us=50] [tasks=200000] [poll_us=1000]
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "service/service_executors.h"

namespace {

using Clock = std::chrono::steady_clock;

void spin_for(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const int inflight = argc > 2 ? std::atoi(argv[2]) : 6;
  const int task_us = argc > 3 ? std::atoi(argv[3]) : 50;
  const int tasks = argc > 4 ? std::atoi(argv[4]) : 200000;
  const int poll_us = argc > 5 ? std::atoi(argv[5]) : 1000;
  if (threads < 1 || inflight < 1 || task_us < 0 || tasks < 1) {
    std::fprintf(stderr,
                 "usage: bench_executors [threads>=1] [inflight>=1] [task_us>=0] [tasks>=1] [poll_us]\n");
    return 2;
  }
  gknn_service::Executors ex(threads);
  ex.set_poll(poll_us);
  std::vector<std::atomic<int>> ran(tasks);
  std::vector<std::atomic<int>> reported(tasks);
  std::vector<double> wait_us(tasks);
  std::mt19937 rng(42);
  int next = 0, open = 0, done = 0;
  const auto t0 = Clock::now();
  while (done < tasks) {
    // One task a round, as the service hands out one batch per (index,
    // settings) group a round: a burst would measure the queue instead.
    if (open < inflight && next < tasks) {
      const int id = next++;
      const int len = static_cast<int>(rng() % (2 * task_us + 1));  // mean task_us
      const auto submitted = Clock::now();
      ex.submit(id, [&, id, len, submitted] {
        wait_us[id] = std::chrono::duration<double, std::micro>(Clock::now() - submitted).count();
        ran[id]++;
        spin_for(len);
      });
      ++open;
    }
    pollfd p{ex.fd(), POLLIN, 0};
    ::poll(&p, 1, open < inflight && next < tasks ? 0 : 100);
    for (std::uint64_t id : ex.finished()) {
      reported[id]++;
      --open;
      ++done;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ex.stop();
  for (int i = 0; i < tasks; ++i)
    if (ran[i] != 1 || reported[i] != 1) {
      std::printf("FAILED: task %d ran %d times, reported %d times\n", i, ran[i].load(), reported[i].load());
      return 1;
    }
  std::sort(wait_us.begin(), wait_us.end());
  std::printf("| %d | %d | %d | %.0f | %.1f | %.1f | %.1f |\n", threads, inflight, task_us, tasks / secs,
              wait_us[tasks / 2], wait_us[tasks * 9 / 10], wait_us[tasks * 99 / 100]);
  return 0;
}
