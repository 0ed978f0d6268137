// The GPU service's executor threads: batched searches run here, several at
// once, so that one batch's host work, copies and waits overlap the next
// batch's kernels (one thread at a time left the GPU mostly idle: a small
// batch's time is latency, not GPU work). PostgreSQL-free: the service's
// main thread keeps every PostgreSQL call (latches, DSM, shared memory
// locks); a task only runs core code on memory the main thread mapped for
// it, and never throws (it catches what the core throws).
//
// Every thread that comes free polls the queue for a while (set_poll)
// before it sleeps: under load the next batch starts without a wake-up,
// which costs as much as a small batch's GPU work, and a batch submitted
// while one poller runs the last finds another poller, not a sleeper (at 16
// clients the four executors are ~65 % busy: a second free thread is
// common). Against one poller at a time: +2 to +8 % QPS for gpu_graph at 16
// and 64 clients on the H200, exact within 1 %
// (bench/results/service-ab-GKNN_SERVICE_POLLERS-all-H200-2026-11-28.md).
// A task queued beyond the polling threads wakes a sleeper.
//
// Each thread uses its own CUDA streams (the core keeps one per thread and
// device). Threads start with every signal blocked, so PostgreSQL's handlers
// run on the main thread only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gknn_service {

class Executors {
 public:
  // Starts `threads` threads (at least 1); throws std::system_error if the
  // eventfd or a thread cannot be made.
  explicit Executors(int threads);
  Executors(const Executors&) = delete;
  Executors& operator=(const Executors&) = delete;

  // Finishes the tasks already running, drops queued ones, joins. Called
  // before the process exits (a thread inside CUDA while the runtime tears
  // down at exit could crash the process, which the postmaster takes for a
  // crash of the cluster).
  void stop();

  int threads() const { return static_cast<int>(threads_.size()); }
  // How long a free thread polls for the next task (gknn.service_poll_us).
  void set_poll(std::int64_t us) { poll_us_.store(us < 0 ? 0 : us, std::memory_order_relaxed); }
  // Readable when a task has finished (for the main thread's wait).
  int fd() const { return fd_; }

  // Queues `task` under `id`; the main thread learns of its end through
  // finished(). Tasks run in submission order as threads come free.
  void submit(std::uint64_t id, std::function<void()> task);
  // The ids of the tasks finished since the last call (clears fd()).
  std::vector<std::uint64_t> finished();

 private:
  void run();
  // The next task (false: stopping), polled for, then waited for.
  bool next(std::pair<std::uint64_t, std::function<void()>>* job);
  bool poll(std::pair<std::uint64_t, std::function<void()>>* job);

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<std::uint64_t, std::function<void()>>> queue_;
  std::vector<std::uint64_t> done_;
  bool stopping_ = false;
  int polling_ = 0;                       // threads polling (under mu_)
  std::atomic<int> queued_{0};            // queue_.size(), for the polling threads' peek
  std::atomic<std::int64_t> poll_us_{0};  // set_poll's
  int fd_ = -1;
  std::vector<std::thread> threads_;
};

}  // namespace gknn_service
