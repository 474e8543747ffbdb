#include "tools/serve/connection_threads.h"

#include <thread>

namespace tern::serve {

void ConnectionThreads::enqueue(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(job));
  if (jobs_.size() > idle_ && threads_ < most_) {  // (every idle thread has a job already)
    ++threads_;
    std::thread([this] { work(); }).detach();  // (shutdown() waits for it)
  } else {
    ready_.notify_one();
  }
}

void ConnectionThreads::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (jobs_.empty()) {
      if (stopping_) break;
      ++idle_;
      const bool woken = ready_.wait_for(lock, idle_time_, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (!woken) break;  // idle long enough: the thread ends
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
  --threads_;
  ended_.notify_all();  // (under the lock: shutdown() returns only after this thread lets it go)
}

void ConnectionThreads::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  ready_.notify_all();
  ended_.wait(lock, [&] { return threads_ == 0; });
}

size_t ConnectionThreads::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_;
}

}  // namespace tern::serve
