// Runs one node on concrete tensors: shape rule → output allocation → kernel. Shared by the session
// and by constant folding so both compute exactly the same thing.
#pragma once
#include <functional>

#include "ops/op.h"

namespace tern {

using Allocator = std::function<Tensor(DType, const Shape&)>;

Tensor allocate_on_heap(DType dtype, const Shape& shape);

// Runs the kernel of a node whose outputs are already shaped (and allocated unless views), rethrowing
// errors with the node named.
void run_op(const Op& op, RunContext& ctx);

// Inside a catch block: the exception again, its message naming `node` (kept: UnsupportedError,
// MemoryLimitError).
[[noreturn]] void rethrow_naming(const Node& node);

// Infers output shapes from the actual inputs (device tensors give their shapes, not their values),
// allocates outputs with `alloc`, runs the op's CPU kernels with `cpu` or the op on `device`. Errors are rethrown
// with the node named.
std::vector<Tensor> execute_node(const Op& op, const Node& node, const std::vector<const Tensor*>& inputs, const Allocator& alloc,
                                 const kernels::Context& cpu, Device device = {}, kernels::opencl::Kernels* opencl = nullptr,
                                 OpState* state = nullptr);

}  // namespace tern
