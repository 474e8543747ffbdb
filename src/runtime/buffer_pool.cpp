#include "runtime/buffer_pool.h"

#include <cstdlib>

namespace tern {

BufferPool::~BufferPool() {
  for (auto& kv : free_) std::free(kv.second);
}

std::shared_ptr<Buffer> BufferPool::acquire(size_t bytes) {
  size_t capacity = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Best fit, but never hand out a block more than twice the request: big blocks stay for big tensors.
    auto it = free_.lower_bound(capacity);
    if (it != free_.end() && it->first <= 2 * capacity) {
      capacity = it->first;
      p = it->second;
      free_.erase(it);
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, capacity);
    if (!p) fail("out of memory allocating ", bytes, " bytes");
    ++system_allocations_;
  }
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::make_shared<Buffer>(p, bytes, Device{}, [pool, capacity](void* q) {
    if (auto live = pool.lock()) live->give_back(q, capacity);
    else std::free(q);
  });
}

void BufferPool::give_back(void* p, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(capacity, p);
}

}  // namespace tern
