// The threads tern serve's HTTP connections run on: one started for a connection when none is idle, up to
// `most`, each ending after `idle` without work. cpp-httplib's own ThreadPool is fixed: with a thread for every
// row and queue place and 16 more (84 by default), that many half-open connections (a client that connects and
// sends nothing, or a header a byte at a time) held every thread for their read timeouts, and /health waited
// 10-70 s behind them (issue 79). Growing on demand, a request still finds a thread at once — to be answered or
// refused 429 by admission, which is what bounds the work — while idle capacity costs nothing.
#pragma once
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace tern::serve {

class ConnectionThreads final : public httplib::TaskQueue {
 public:
  ConnectionThreads(size_t most, std::chrono::milliseconds idle) : most_(most), idle_time_(idle) {}
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> job) override;
  // Runs what is queued, then waits for every thread to end.
  void shutdown() override;
  size_t threads() const;  // running now

 private:
  void work();
  mutable std::mutex mu_;
  std::condition_variable ready_, ended_;
  std::deque<std::function<void()>> jobs_;
  const size_t most_;
  const std::chrono::milliseconds idle_time_;
  size_t threads_ = 0, idle_ = 0;
  bool stopping_ = false;
};

}  // namespace tern::serve
