// What OpenCL variants (ops/opencl/<op>_opencl.cpp) share: the wrapper that makes one of a CPU op,
// inputs and outputs as device memory, and constants uploaded once at pack.
#pragma once
#include <memory>

#include "kernels/opencl/device.h"
#include "kernels/opencl/kernels.h"
#include "ops/op.h"
#include "ops/weight_packer.h"

namespace tern {

// An op's OpenCL variant: the CPU op for everything but running on the device — shape rule, packing,
// cost, state, and the CPU run for inputs the device does not take (the session then runs the node on
// the CPU, inputs downloaded). A variant adds which inputs it takes and its device run; what it
// uploads, it uploads at pack, so it too is fixed after load.
class OpenClVariant : public Op, public WeightPacker, public StatefulOp, public CostedOp {
 public:
  explicit OpenClVariant(const Node& node) : cpu_(OpRegistry::instance().create(node)) {}
  void infer(InferContext& ctx) const override { cpu_->infer(ctx); }
  OpTraits traits() const override { return cpu_->traits(); }
  PackPlan plan(const std::vector<const Tensor*>& constants, const PackSettings& settings) const override {
    const WeightPacker* p = cpu_->packer();
    return p ? p->plan(constants, settings) : PackPlan{};
  }
  // A variant that uploads a constant overrides this, calling it for the CPU op's packing before or after. (A
  // variant packs nothing from parts: its uploads read each input whole, so the session makes them whole first.)
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& settings) override {
    WeightPacker* p = cpu_->packer();
    return p ? p->pack(constants, settings) : std::vector<int>{};
  }
  int64_t packed_bytes() const override { return cpu_->packer() ? cpu_->packer()->packed_bytes() : 0; }
  OpCost cost(const std::vector<const Tensor*>& in, const std::vector<Tensor>& out, const OpState* state) const override {
    return op_cost(*cpu_, in, out, state);
  }
  std::string kernel(const std::vector<const Tensor*>& in, kernels::Isa isa) const override { return op_kernel(*cpu_, in, isa); }
  std::unique_ptr<OpState> make_state() const override { return make_op_state(*cpu_); }
  int64_t state_bytes(int64_t rows, int64_t positions, const std::vector<const Value*>& inputs) const override {
    const StatefulOp* s = cpu_->stateful();
    return s ? s->state_bytes(rows, positions, inputs) : 0;
  }
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
// A constant uploaded to the session's device (PackSettings::device) at pack, with the host tensor
// it came from; `device` is undefined when there is no device or no constant — the variant then leaves
// the node to the CPU.
struct DeviceCopy {
  Tensor device;
  const void* source = nullptr;
  // Whether `input` is that constant (another tensor in its place goes to the CPU).
  bool of(const Tensor* input) const { return device.defined() && input && input->raw() == source; }
  cl_mem mem() const { return cl::mem_of(device); }
};
DeviceCopy upload_constant(const PackSettings& settings, const Tensor* constant);

}  // namespace tern
