#include "runtime/buffer_pool.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>

namespace tern {

BufferPool::~BufferPool() {
  for (auto& kv : free_) {
    std::free(kv.second);
    give_host_bytes(kv.first, account_);
  }
}

// Block sizes come in classes a quarter of a power of two apart (64-byte multiples below 4 KiB), so a
// tensor that grows a little each run — the graph's own KV cache, one token per decode step — finds the
// block it released last run instead of a new one from the system: on SmolLM2-135M's Optimum export
// (window 0) that took decode from ~1,290 page faults per step to ~0. Costs at most 25% of a block.
size_t BufferPool::capacity_of(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  size_t step = size_t{1} << (std::bit_width(bytes - 1) - 3);  // an eighth of the next power of two
  return (bytes + step - 1) / step * step;
}

namespace {
// Which free block serves a request of `capacity` (capacity_of's): the smallest at least that big, but
// never one more than twice the request — big blocks stay for big tensors.
bool serves(size_t block, size_t capacity) { return block <= 2 * capacity; }
}  // namespace

std::shared_ptr<Buffer> BufferPool::acquire(size_t bytes) {
  size_t capacity = capacity_of(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = free_.lower_bound(capacity); it != free_.end() && serves(it->first, capacity)) {
      capacity = it->first;
      p = it->second;
      free_.erase(it);
    }
  }
  if (!p) {
    take_host_bytes(capacity, account_);  // the memory caps cover activations too
    p = std::aligned_alloc(64, capacity);
    if (!p) {
      give_host_bytes(capacity, account_);
      fail("out of memory allocating ", bytes, " bytes");
    }
    ++system_allocations_;
    held_bytes_ += capacity;
  }
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::make_shared<Buffer>(p, bytes, Device{}, [pool, capacity, account = account_](void* q) {
    if (auto live = pool.lock()) {
      live->give_back(q, capacity);
    } else {
      std::free(q);
      give_host_bytes(capacity, account);
    }
  });
}

BufferPool::DryRun::DryRun(const BufferPool& pool, size_t releases) {
  std::lock_guard<std::mutex> lock(pool.mu_);
  free_.reserve(pool.free_.size() + releases);
  for (const auto& block : pool.free_) free_.push_back(block.first);  // (a multimap iterates in key order)
}

size_t BufferPool::DryRun::acquire(size_t bytes) {
  size_t capacity = capacity_of(bytes);
  if (auto it = std::lower_bound(free_.begin(), free_.end(), capacity); it != free_.end() && serves(*it, capacity)) {
    capacity = *it;
    free_.erase(it);
  } else {
    taken_ = capacity > SIZE_MAX - taken_ ? SIZE_MAX : taken_ + capacity;
  }
  return capacity;
}

void BufferPool::DryRun::release(size_t capacity) { free_.insert(std::upper_bound(free_.begin(), free_.end(), capacity), capacity); }

void BufferPool::give_back(void* p, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(capacity, p);
}

}  // namespace tern
