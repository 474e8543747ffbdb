#include "llm/request_queue.h"

#include <iostream>

namespace tern::llm {

RequestQueue::RequestQueue(ContinuousBatcher& batcher, int64_t queue) : batcher_(batcher), queue_(queue) {}

RequestQueue::~RequestQueue() {
  stop_now();
  join();
}

void RequestQueue::start() {
  thread_ = std::thread([this] { schedule(); });
}

void RequestQueue::join() {
  if (thread_.joinable()) thread_.join();
}

// Rows free now (read racily: the scheduler is the only writer; a stale value only shifts the refusal by a step).
bool RequestQueue::room_for(int64_t sequences) const {
  return pending_sequences_ + sequences <= queue_ + std::max<int64_t>(0, batcher_.rows() - active_rows_.load());
}

RequestQueue::Admission RequestQueue::check(int64_t sequences) const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_ ? Admission::Stopping : room_for(sequences) ? Admission::Queued : Admission::Full;
}

RequestQueue::Admission RequestQueue::push(std::vector<Group> groups) {
  int64_t sequences = 0;
  for (const Group& g : groups) sequences += static_cast<int64_t>(g.sequences.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Admission::Stopping;
    if (!room_for(sequences)) return Admission::Full;
    pending_sequences_ += sequences;
    for (Group& g : groups) pending_.push_back(std::move(g));
  }
  wake_.notify_one();
  return Admission::Queued;
}

void RequestQueue::stop(Clock::time_point by) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) stopping_ = true, stop_by_ = by;
  }
  wake_.notify_all();
}

void RequestQueue::stop_now() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    hard_stop_ = true;
  }
  wake_.notify_all();
}

int64_t RequestQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_sequences_;
}

RequestQueue::Stats RequestQueue::stats() const {
  return {active_rows_.load(),   held_tokens_.load(),   steps_.load(),          dropped_.load(),        prefix_hits_.load(),
          prefix_misses_.load(), reused_tokens_.load(), drafted_tokens_.load(), accepted_tokens_.load()};
}

// Requests whose client left or whose deadline passed while they waited leave the queue unrun.
void RequestQueue::drop_gone(Clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!it->gone || !it->gone(now)) {
      ++it;
      continue;
    }
    for (auto& r : it->sequences)
      if (r.on_finish) r.on_finish(FinishReason::Stop);
    pending_sequences_ -= static_cast<int64_t>(it->sequences.size());
    it = pending_.erase(it);
    ++dropped_;
  }
}

// First come, first served: a request waits until its n choices have rows.
void RequestQueue::admit() {
  while (!pending_.empty() && static_cast<int64_t>(pending_.front().sequences.size()) <= batcher_.free_rows()) {
    Group g = std::move(pending_.front());
    pending_.pop_front();
    pending_sequences_ -= static_cast<int64_t>(g.sequences.size());
    try {  // (here, where the rings are not growing: on an HTTP thread a step could be resizing them)
      batcher_.check_memory(g.sequences);
    } catch (const MemoryLimitError& e) {  // refused alone, before a step fails with it and every row with that
      if (g.refuse_memory) g.refuse_memory(e);
      for (auto& r : g.sequences)
        if (r.on_finish) r.on_finish(FinishReason::Error);
      continue;
    }
    try {
      batcher_.add_group(std::move(g.sequences));
    } catch (const Error& e) {  // (checked on the HTTP thread already; a last guard)
      std::cerr << "tern serve: a request was refused at admission: " << e.what() << "\n";
    }
  }
}

// Admits waiting sequences into free rows, then runs one step, until stopped.
void RequestQueue::schedule() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Idle with requests queued (every row taken by others): wake to drop those past their deadline.
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_ || !pending_.empty() || batcher_.active() > 0; });
      if (stopping_) {
        if (Clock::now() >= stop_by_) hard_stop_ = true;
        if (hard_stop_) {  // the grace period is over: every client still waiting gets its answer, an error
          batcher_.end_all();
          for (auto& g : pending_)
            for (auto& r : g.sequences)
              if (r.on_finish) r.on_finish(FinishReason::Error);
          pending_.clear();
          pending_sequences_ = 0;
          return;
        }
        if (pending_.empty() && batcher_.active() == 0) return;  // every request finished within the grace period
      }
      drop_gone(Clock::now());
      admit();
    }
    try {
      batcher_.step();
    } catch (const std::exception& e) {  // every active row has ended (FinishReason::Error)
      std::cerr << "tern serve: a step failed: " << e.what() << "\n";
    }
    ++steps_;
    active_rows_ = batcher_.active();
    held_tokens_ = batcher_.held_tokens();
    prefix_hits_ = batcher_.prefix_hits(), prefix_misses_ = batcher_.prefix_misses(), reused_tokens_ = batcher_.reused_tokens();
    drafted_tokens_ = batcher_.drafted_tokens(), accepted_tokens_ = batcher_.accepted_tokens();
  }
}

}  // namespace tern::llm
