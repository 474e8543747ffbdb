// What one kernel call runs with, handed down by the run that makes it (runtime/session.cpp RunState, an op's
// RunContext): the ISA tier its session runs at, how many threads, and the scratch its buffers come from.
// Kernels keep nothing of their own between calls — no per-thread buffers or counts — so what a run uses is the
// run's: its scratch counts against its session's memory cap (--max-memory) and goes when the session does, and
// two sessions side by side share only the worker pool (parallel.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cpu/isa.h"

namespace tern {
class MemoryAccount;
}

namespace tern::kernels {

// A run's scratch: one buffer per use below, each kept at the largest size asked for (so after a run's first
// decode step nothing is allocated), 64-byte aligned, its contents left from whatever used it last. Growing
// allocates on the calling thread under its memory account (core/tensor.h MemoryScope: the session's in a run)
// and fails naming the use when the cap would be passed. One thread uses a workspace at a time — the one that
// calls the kernel; chunks on the pool's threads use the parts the caller took for their slot (slot × size).
class Workspace {
 public:
  // The uses, one buffer each: two uses are never the same buffer, so a kernel may hold several at once.
  enum Use : int {
    GemvPartials,     // gemv.cpp: a band's partial sums, per kernel thread
    PanelsA,          // gemm_panels_impl.h: A packed in row panels
    TilesA,           // x86/gemm_avx512_tiles.h: A packed for the tiles
    AmxA,             // x86/gemm_bf16_amx.cpp: A in bf16 row blocks
    AmxB,             // x86/gemm_bf16_amx.cpp: two panels' pair blocks, per kernel thread
    NBitsX,           // gemv_nbits_impl.h: activations padded or reordered
    NBitsXSums,       //   their block sums
    NBitsPairs,       //   2-bit codes' pair-sum tables, per kernel thread
    NBitsPasses,      //   the pass each thread's tables hold
    Int8Codes,        //   activations quantized to int8
    Int8Scales,       //   their scales
    Int8Sums,         //   scale · Σ codes per block
    Int8BlockSums,    //   Σ codes per block
    Int8ChunkSums,    //   Σ codes per 32
    Int8LaneSums,     //   Σ codes per lane
    ChunkAttention,   // kv_ring_buffer.cpp: rotated keys, values and per-thread rows of a prompt chunk
    RingAttention,    //   a decode query's rotations and partial sums over the ring
    IntegerCodeSums,  // gemm_integer.cpp: each activation row's code sum
    IntegerCentered,  //   the codes minus their zero points (below VNNI)
    IntegerLayout,    //   the codes in AMX-INT8 quads
    IntegerCodes,     // ops/matmul_integer.cpp: DynamicQuantizeMatMul's activations quantized
    ActOrdered,       // ops/matmul_nbits.cpp: A's columns in g_idx order
    kUses
  };
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // `count` T of the buffer for `use`.
  template <class T>
  T* take(Use use, int64_t count) {
    return static_cast<T*>(bytes(use, static_cast<size_t>(count) * sizeof(T)));
  }
  // What the buffers hold, in bytes (as counted against the caps).
  int64_t held_bytes() const;

 private:
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
    std::shared_ptr<MemoryAccount> account;  // what it was charged to besides the process
  };
  void* bytes(Use use, size_t n);
  static void release(Block& b);
  std::array<Block, kUses> blocks_;
};

struct Context {
  int threads = 1;               // kernel threads, the caller included (parallel.h)
  Workspace* scratch = nullptr;  // where the kernels' buffers come from (a kernel that needs one fails without)
  Isa isa = default_isa();       // the tier whose kernels run (SessionOptions::isa: any tier the CPU runs)
  Workspace& workspace() const;
};

}  // namespace tern::kernels
