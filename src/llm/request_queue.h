// The scheduler tern serve runs completions through: requests wait here, first come first served, until their
// sequences (a prompt's n choices) have rows of a ContinuousBatcher; one thread of its own admits them and runs the
// batch a step at a time. HTTP knows nothing of it but push() and the counts, and it knows nothing of HTTP: a group
// says through its callbacks whether its client is gone and takes a refusal at admission.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "llm/continuous_batch.h"

namespace tern::llm {

class RequestQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // One prompt's sequences, given rows together or not at all.
  struct Group {
    std::vector<SequenceRequest> sequences;
    std::function<bool(Clock::time_point now)> gone;             // its client left or its deadline passed: it leaves unrun
    std::function<void(const MemoryLimitError&)> refuse_memory;  // the memory cap refuses it alone, before a step fails with it
  };
  enum class Admission { Queued, Full, Stopping };

  // `queue` sequences may wait beyond the batcher's free rows.
  RequestQueue(ContinuousBatcher& batcher, int64_t queue);
  ~RequestQueue();  // stops at once and joins
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  void start();  // the scheduler's thread
  // Whether `sequences` more would be taken now (Full: the caller's 429), without queueing anything.
  Admission check(int64_t sequences) const;
  // Queues the groups, all or none.
  Admission push(std::vector<Group> groups);
  // New requests are refused (Stopping); those running or queued get until `by` (the first stop's), then end
  // (FinishReason::Error); stop_now ends them at once.
  void stop(Clock::time_point by);
  void stop_now();
  void join();  // once stopped: when the scheduler's thread has ended
  bool stopped_hard() const { return hard_stop_.load(); }

  int64_t waiting() const;  // sequences waiting for a row
  // Counts the scheduler writes after each step, read racily by /metrics.
  struct Stats {
    int64_t active_rows, held_tokens, steps, dropped, prefix_hits, prefix_misses, reused_tokens, drafted_tokens, accepted_tokens;
  };
  Stats stats() const;

 private:
  void schedule();
  bool room_for(int64_t sequences) const;  // (under mu_)
  void drop_gone(Clock::time_point now);   // (under mu_)
  void admit();                            // (under mu_)

  ContinuousBatcher& batcher_;
  const int64_t queue_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Group> pending_;
  int64_t pending_sequences_ = 0;
  bool stopping_ = false;
  Clock::time_point stop_by_;
  std::atomic<bool> hard_stop_{false};
  std::thread thread_;
  std::atomic<int64_t> active_rows_{0}, held_tokens_{0}, steps_{0}, dropped_{0}, prefix_hits_{0}, prefix_misses_{0}, reused_tokens_{0},
      drafted_tokens_{0}, accepted_tokens_{0};
};

}  // namespace tern::llm
