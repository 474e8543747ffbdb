#include "kernels/cpu/context.h"

#include <cstdlib>

#include "core/tensor.h"

namespace tern::kernels {
namespace {
// Workspace::Use's names, in its order (an error names the buffer that would pass the cap).
constexpr const char* kUseNames[] = {"gemv partial sums",    "packed GEMM rows",  "packed tile rows", "AMX bf16 rows",
                                     "AMX panel blocks",     "n-bit activations", "n-bit block sums", "2-bit pair tables",
                                     "2-bit table passes",   "int8 activations",  "int8 scales",      "int8 block sums",
                                     "int8 block code sums", "int8 chunk sums",   "int8 lane sums",   "prompt-chunk keys and values",
                                     "ring attention",       "integer code sums", "centered codes",   "AMX-INT8 code quads",
                                     "integer codes",        "act-order columns"};
static_assert(std::size(kUseNames) == Workspace::kUses);
}  // namespace

Workspace::Workspace() = default;
Workspace::~Workspace() {
  for (Block& b : blocks_) release(b);
}

void Workspace::release(Block& b) {
  if (!b.data) return;
  std::free(b.data);
  give_host_bytes(b.bytes, b.account);
  b = Block{};
}

void* Workspace::bytes(Use use, size_t n) {
  Block& b = blocks_[use];
  if (b.data && b.bytes >= n) return b.data;
  release(b);  // (before the new one: the old bytes are not held twice)
  const size_t rounded = std::max<size_t>((n + 63) / 64 * 64, 64);
  try {
    take_host_bytes(rounded, charged_account());
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(std::string("kernel scratch (") + kUseNames[use] + ", " + memory_size(rounded) + "): " + e.what());
  }
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    give_host_bytes(rounded, charged_account());
    fail("out of memory allocating ", rounded, " bytes of kernel scratch (", kUseNames[use], ")");
  }
  b = Block{p, rounded, charged_account()};
  return p;
}

int64_t Workspace::held_bytes() const {
  int64_t total = 0;
  for (const Block& b : blocks_) total += static_cast<int64_t>(b.bytes);
  return total;
}

Workspace& Context::workspace() const {
  if (!scratch) fail("a kernel that needs scratch was called without a workspace (kernels/cpu/context.h)");
  return *scratch;
}

}  // namespace tern::kernels
