// Reuses freed activation buffers. The session releases each intermediate tensor after its last
// consumer runs; its memory goes back here and serves a later allocation of similar size, so a
// steady-state run (same shapes as the previous one) allocates nothing from the system.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace tern {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Its blocks are counted against the process's cap and `account`'s (a session's; may be null).
  static std::shared_ptr<BufferPool> create(MemoryAccountPtr account = nullptr) {
    return std::shared_ptr<BufferPool>(new BufferPool(std::move(account)));
  }
  ~BufferPool();
  // A buffer of at least `bytes`; returns to this pool when the last tensor using it is dropped.
  std::shared_ptr<Buffer> acquire(size_t bytes);
  size_t system_allocations() const { return system_allocations_; }
  // Bytes of the blocks this pool holds from the system, in use or free (counted as owned host memory).
  size_t held_bytes() const { return held_bytes_; }

  // The capacity a block for `bytes` gets from the system, its size class (a free block that serves it may be up
  // to twice that).
  static size_t capacity_of(size_t bytes);

  // A run's acquires and releases played against a copy of the pool's free blocks, nothing allocated: what the
  // pool would take from the system for them (ActivationForecast), by the rules acquire() follows.
  // (Its free list is a sorted vector with room for `releases` more: a generation's forecast then allocates the
  // same few times whatever the pool holds.)
  class DryRun {
   public:
    DryRun(const BufferPool& pool, size_t releases);
    size_t acquire(size_t bytes);  // the block's capacity (to release it with)
    void release(size_t capacity);
    size_t taken() const { return taken_; }  // bytes new from the system so far

   private:
    std::vector<size_t> free_;  // capacities, ascending
    size_t taken_ = 0;
  };

 private:
  explicit BufferPool(MemoryAccountPtr account) : account_(std::move(account)) {}
  void give_back(void* p, size_t capacity);
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // capacity → block
  const MemoryAccountPtr account_;
  std::atomic<size_t> system_allocations_{0};
  std::atomic<size_t> held_bytes_{0};
};

}  // namespace tern
