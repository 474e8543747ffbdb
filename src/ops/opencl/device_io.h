// What OpenCL variants (ops/opencl/<op>_opencl.cpp) share: the wrapper that makes one of a CPU op,
// inputs and outputs as device memory, and constants uploaded once at prepack.
#pragma once
#include <memory>

#include "kernels/opencl/device.h"
#include "kernels/opencl/kernels.h"
#include "ops/op.h"

namespace tern {

// An op's OpenCL variant: the CPU op for everything but running on the device — shape rule, prepack,
// cost, state, and the CPU run for inputs the device does not take (the session then runs the node on
// the CPU, inputs downloaded). A variant adds which inputs it takes and its device run; what it
// uploads, it uploads at prepack, so it too is fixed after load.
class OpenClVariant : public Op {
 public:
  explicit OpenClVariant(const Node& node) : cpu_(OpRegistry::instance().create(node)) {}
  void infer(InferContext& ctx) const override { cpu_->infer(ctx); }
  bool outputs_are_views() const override { return cpu_->outputs_are_views(); }
  bool foldable() const override { return cpu_->foldable(); }
  std::vector<int> prepack(const std::vector<const Tensor*>& constants, const PrepackOptions& options) override {
    return cpu_->prepack(constants, options);
  }
  int64_t packed_weight_bytes() const override { return cpu_->packed_weight_bytes(); }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState* state) const override {
    return cpu_->cost(in, out, state);
  }
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override { return cpu_->kernel(in, isa); }
  std::unique_ptr<OpState> make_state() const override { return cpu_->make_state(); }
  bool runs_on(const Device& d, const std::vector<const Tensor*>& in) const final { return d.kind == DeviceKind::CPU || device_takes(in); }
  void run(RunContext& ctx) const final {
    if (ctx.device.kind == DeviceKind::OpenCL) run_device(ctx);
    else cpu_->run(ctx);
  }

 protected:
  // Whether the device run computes the node for these inputs (host or device tensors).
  virtual bool device_takes(const std::vector<const Tensor*>& inputs) const = 0;
  virtual void run_device(RunContext& ctx) const = 0;
  std::unique_ptr<Op> cpu_;
};

// Input i as device memory: itself when it is there, else uploaded into `scratch` (counted as a transfer).
cl_mem device_input(const RunContext& ctx, int i, Tensor& scratch);
cl_mem device_output(RunContext& ctx, int i);
// A constant uploaded to the session's device (PrepackOptions::device) at prepack, with the host tensor
// it came from; `device` is undefined when there is no device or no constant — the variant then leaves
// the node to the CPU.
struct DeviceCopy {
  Tensor device;
  const void* source = nullptr;
  // Whether `input` is that constant (another tensor in its place goes to the CPU).
  bool of(const Tensor* input) const { return device.defined() && input && input->raw() == source; }
  cl_mem mem() const { return cl::mem_of(device); }
};
DeviceCopy upload_constant(const PrepackOptions& options, const Tensor* constant);

}  // namespace tern
