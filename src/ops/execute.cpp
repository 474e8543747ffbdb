#include "ops/execute.h"

namespace tern {

Tensor allocate_on_heap(DType dtype, const Shape& shape) { return Tensor(dtype, shape); }

[[noreturn]] void rethrow_naming(const Node& node) {
  try {
    throw;
  } catch (const ShapeUnknown&) {
    fail(node.describe(), ": shape rule could not resolve its outputs from concrete inputs");
  } catch (const UnsupportedError& e) {
    if (std::string(e.what()).find(node.name) != std::string::npos) throw;
    throw UnsupportedError(node.describe() + ": " + e.what());
  } catch (const MemoryLimitError& e) {
    throw MemoryLimitError(node.describe() + ": " + e.what());
  } catch (const Error& e) {
    if (std::string(e.what()).find("node '" + node.name + "'") != std::string::npos) throw;
    throw Error(node.describe() + ": " + e.what());
  }
}

void run_op(const Op& op, RunContext& ctx) {
  try {
    op.run(ctx);
  } catch (...) {
    rethrow_naming(ctx.node);
  }
}

std::vector<Tensor> execute_node(const Op& op, const Node& node, const std::vector<const Tensor*>& inputs, const Allocator& alloc,
                                 const kernels::Context& cpu, Device device, kernels::opencl::Kernels* opencl, OpState* state) {
  try {
    if (op.traits().shapes_from_run) {
      std::vector<Tensor> outputs(node.outputs.size());
      RunContext rctx{node, inputs, outputs, device, cpu, opencl, state};
      op.run(rctx);
      for (size_t i = 0; i < outputs.size(); ++i)
        if (node.outputs[i] >= 0 && !outputs[i].defined()) ::tern::fail("made no output ", i);
      return outputs;
    }
    std::vector<SymShape> shapes(inputs.size());
    std::vector<InferContext::Input> infos(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      shapes[i] = sym_shape(inputs[i]->shape());
      const bool host = !inputs[i]->buffer() || inputs[i]->buffer()->device().kind == DeviceKind::CPU;
      infos[i] = {inputs[i]->dtype(), &shapes[i], host ? inputs[i] : nullptr, true, nullptr};
    }
    InferContext ictx(node, std::move(infos));
    op.infer(ictx);
    std::vector<Tensor> outputs(node.outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto& o = ictx.outputs[i];
      // An optional output this op did not produce, or one the node omits (ops check defined() before writing those;
      // output 0 always has memory): none.
      if (!o.shape || (i > 0 && node.outputs[i] < 0)) continue;
      auto shape = concrete(*o.shape);
      if (!shape) ::tern::fail("could not determine the shape of output ", i, " (", sym_shape_str(*o.shape), ")");
      if (op.traits().outputs_are_views) outputs[i] = Tensor(o.dtype, *shape, nullptr);
      else outputs[i] = alloc(o.dtype, *shape);
    }
    RunContext rctx{node, inputs, outputs, device, cpu, opencl, state};
    op.run(rctx);
    return outputs;
  } catch (...) {
    rethrow_naming(node);
  }
}

}  // namespace tern
