// The kernels' threads: a pool of workers that, with the calling thread, run the chunks of one job.
//
// Why not OpenMP's teams: a parallel region ends at a barrier that waits for every thread, and libgomp's
// idle threads spin ~300,000 iterations before sleeping. With one CPU-bound process beside a 2-thread
// decode on 2 cores, SmolLM2's decode fell to 0.33x of its speed alone (bench/contention.sh; llama.cpp,
// also spinning, 0.36x), where a fair share of the cores is 0.67x. Here the caller and the workers take
// chunks from one counter and a job is over when its chunks are: a worker the OS has not scheduled takes
// none and holds nobody up, and workers sleep after a short spin.
#pragma once
#include <cstdint>

namespace tern::kernels {

// Every core the process may run on: how many threads a session asked for 0 gets.
int hardware_threads();

// Runs fn(begin, end, slot) over [0, n) cut into `chunks` pieces (chunk c is [n·c/chunks,
// n·(c+1)/chunks)), spread over `threads` threads, the caller included (the run's count: context.h); returns
// when every chunk has run. `slot` < threads names the thread running the chunk (for per-thread scratch). Chunk bounds depend on n
// and chunks alone, so results summed per chunk repeat bit for bit however the chunks were shared out.
// Called from inside a chunk, or while another thread's job runs (another session, or another run of one
// session), it runs the chunks itself. Allocates
// nothing (a decode step stays allocation-free).
template <class Fn>  // void(int64_t begin, int64_t end, int slot)
void parallel_chunks(int threads, int64_t n, int64_t chunks, const Fn& fn);

// A chunk function without its type (no std::function: that allocates for a lambda's captures).
struct ChunkFn {
  const void* fn;
  void (*call)(const void* fn, int64_t begin, int64_t end, int slot);
  void operator()(int64_t begin, int64_t end, int slot) const { call(fn, begin, end, slot); }
};
void parallel_chunks(int threads, int64_t n, int64_t chunks, ChunkFn fn);

template <class Fn>
void parallel_chunks(int threads, int64_t n, int64_t chunks, const Fn& fn) {
  parallel_chunks(threads, n, chunks,
                  ChunkFn{&fn, [](const void* f, int64_t b, int64_t e, int s) { (*static_cast<const Fn*>(f))(b, e, s); }});
}
// Chunks for `units` of even work when the result does not depend on the split: 4 for each of `threads`, so a
// thread the OS holds back leaves its share to the others; 1 when `small` (not worth waking a thread).
int64_t balanced_chunks(int threads, int64_t units, bool small = false);

}  // namespace tern::kernels
