#include "kernels/cpu/parallel.h"

#include <sched.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tern::kernels {
namespace {

// A spin-wait's pause: the core lets its sibling thread run and saves power.
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker spins before it sleeps: a decode step's products follow each other within
// microseconds (the small ops between them run on the caller), so workers stay awake through a step and
// sleep between steps and when the machine is busy.
constexpr auto kSpin = std::chrono::microseconds(100);

constexpr int kChunksShift = 20, kGenerationShift = 40;
constexpr uint64_t kFieldMask = (uint64_t{1} << 20) - 1, kGenerationMask = (uint64_t{1} << 24) - 1;

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int slot = 1; slot < threads; ++slot) workers_.emplace_back([this, slot] { work(slot); });
  }
  ~Pool() {
    stop_.store(true);
    wake_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  // One job at a time, run by the caller and workers 1 … threads − 1; a second caller — another session's
  // thread, or a chunk of this job calling a kernel (nested: run where it is called) — runs its chunks itself.
  bool try_run(int64_t n, int64_t chunks, int threads, ChunkFn fn) {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    struct Free {
      std::atomic<bool>& busy;
      ~Free() { busy.store(false, std::memory_order_release); }
    } release{busy_};
    job_threads_.store(threads, std::memory_order_relaxed);
    fn_ = fn;
    n_ = n;
    chunks_ = chunks;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t generation = ((next_.load(std::memory_order_relaxed) >> kGenerationShift) + 1) & kGenerationMask;
    next_.store(generation << kGenerationShift | static_cast<uint64_t>(chunks) << kChunksShift, std::memory_order_release);
    wake_all();
    run_chunks(generation, 0);
    // The chunks others took: wait for them, yielding the core after a while in case the thread holding
    // one is waiting for it.
    for (int spins = 0; done_.load(std::memory_order_acquire) < chunks_; ++spins) {
      if (spins < 2000) cpu_relax();
      else sched_yield();
    }
    return true;
  }

 private:
  // Wakes the idle workers: spinning ones see `wake_` change; sleeping ones are notified under the mutex
  // they checked `wake_` under, so none misses it (the seq_cst pair sleepers_/wake_ here and in work()
  // guarantees one side sees the other).
  void wake_all() {
    wake_.fetch_add(1);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lock(sleep_mutex_); }
      sleep_cv_.notify_all();
    }
  }
  // Takes chunks of job `generation` until none is left (or a newer job has replaced it). The job's
  // generation, chunk count and next chunk share one word, so a chunk is taken only from the job that
  // word describes; its function, size and thread count are read after that, while the job cannot end.
  void run_chunks(uint64_t generation, int slot) {
    for (;;) {
      uint64_t v = next_.load(std::memory_order_acquire);
      int64_t c;
      do {
        if ((v >> kGenerationShift) != generation) return;
        // (A newer job's count, read here, only sends this worker back to check the generation again.)
        if (slot >= job_threads_.load(std::memory_order_relaxed)) return;
        c = static_cast<int64_t>(v & kFieldMask);
        if (c >= static_cast<int64_t>((v >> kChunksShift) & kFieldMask)) return;
      } while (!next_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel));
      fn_(n_ * c / chunks_, n_ * (c + 1) / chunks_, slot);
      done_.fetch_add(1, std::memory_order_release);
    }
  }
  void work(int slot) {
    uint32_t seen = 0;  // (not wake_'s value when this thread starts: that may already be a job's, or the stop's)
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpin;
      int polls = 0;
      while (wake_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
        cpu_relax();
        if (++polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
          sleepers_.fetch_add(1);
          {
            std::unique_lock<std::mutex> lock(sleep_mutex_);
            sleep_cv_.wait(lock, [&] { return wake_.load() != seen || stop_.load(); });
          }
          sleepers_.fetch_sub(1);
        }
      }
      seen = wake_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      run_chunks(next_.load(std::memory_order_acquire) >> kGenerationShift, slot);
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};
  // The job: its function and size are written before `next_` publishes it (generation | chunk count |
  // next chunk), and stay until every chunk is done.
  ChunkFn fn_{};
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int> job_threads_{1};
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<uint32_t> wake_{0};  // bumped per job: what idle workers wait on
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<bool> stop_{false};
};

std::mutex g_pool_mutex;
std::shared_ptr<Pool> g_pool;

// A pool of at least `threads` (the largest count asked for so far: a smaller job leaves the rest idle).
std::shared_ptr<Pool> pool(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool || g_pool->threads() < threads)
    g_pool = std::make_shared<Pool>(threads);  // the old one's workers finish when its last user lets go
  return g_pool;
}

}  // namespace

int hardware_threads() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

int64_t balanced_chunks(int threads, int64_t units, bool small) { return small ? 1 : std::min<int64_t>(units, 4 * std::max(threads, 1)); }

void parallel_chunks(int threads, int64_t n, int64_t chunks, ChunkFn fn) {
  chunks = std::clamp<int64_t>(chunks, 1, std::min<int64_t>(std::max<int64_t>(n, 1), kFieldMask));
  if (n <= 0) return;
  const auto p = chunks > 1 && threads > 1 ? pool(threads) : nullptr;  // (one thread: no lock)
  if (p && p->try_run(n, chunks, threads, fn)) return;
  for (int64_t c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks, 0);
}

}  // namespace tern::kernels
