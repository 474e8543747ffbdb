// Reuses freed activation buffers. The session releases each intermediate tensor after its last
// consumer runs; its memory goes back here and serves a later allocation of similar size, so a
// steady-state run (same shapes as the previous one) allocates nothing from the system.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

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
