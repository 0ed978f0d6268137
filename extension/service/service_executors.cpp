// The GPU service's executor threads (service_executors.h). No PostgreSQL here.
#include "service_executors.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(id, std::move(task));
  }
  wake_.notify_one();
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

void Executors::run() {
  for (;;) {
    std::pair<std::uint64_t, std::function<void()>> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
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
