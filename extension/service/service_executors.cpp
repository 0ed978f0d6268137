// The GPU service's executor threads (service_executors.h). No PostgreSQL here.
#include "service_executors.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sched.h>

#include <cerrno>
#include <chrono>
#include <system_error>

namespace gknn_service {

Executors::Executors(int threads) {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  // Threads inherit the signal mask: block everything while they start.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    for (int i = 0; i < (threads < 1 ? 1 : threads); ++i) threads_.emplace_back([this] { run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    stop();
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void Executors::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Executors::submit(std::uint64_t id, std::function<void()> task) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(id, std::move(task));
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    // Each poller takes one task (or sees it when it stops polling); a task
    // beyond them wakes a sleeper rather than wait for a busy thread.
    wake = queue_.size() > static_cast<std::size_t>(polling_);
  }
  if (wake) wake_.notify_one();
}

std::vector<std::uint64_t> Executors::finished() {
  std::uint64_t n;
  while (read(fd_, &n, sizeof n) > 0) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::uint64_t> out;
  out.swap(done_);
  return out;
}

bool Executors::poll(std::pair<std::uint64_t, std::function<void()>>* job) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(poll_us_.load(std::memory_order_relaxed));
  for (;;) {
    const bool expired = std::chrono::steady_clock::now() >= until;
    if (expired || queued_.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return false;
      if (!queue_.empty()) {
        *job = std::move(queue_.front());
        queue_.pop_front();
        queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
        --polling_;
        // More tasks queued than threads left polling: a sleeper takes one.
        if (queue_.size() > static_cast<std::size_t>(polling_)) wake_.notify_one();
        return true;
      }
      if (expired) {
        --polling_;
        return false;
      }
    }
    sched_yield();
  }
}

bool Executors::next(std::pair<std::uint64_t, std::function<void()>>* job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    ++polling_;
  }
  if (poll(job)) return true;
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
  if (stopping_) return false;
  *job = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
  return true;
}

void Executors::run() {
  for (;;) {
    std::pair<std::uint64_t, std::function<void()>> job;
    if (!next(&job)) return;
    job.second();  // never throws (the service's tasks catch everything)
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(job.first);
    }
    const std::uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }
}

}  // namespace gknn_service
