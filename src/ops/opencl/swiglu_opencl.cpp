// SwiGLU on an OpenCL device: float32 gate and up, or one packed input.
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class SwiGluOpenCl : public OpenClVariant {
 public:
  using OpenClVariant::OpenClVariant;

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    return in[0]->dtype() == DType::Float32 && (in.size() < 2 || !in[1] || in[1]->dtype() == DType::Float32);
  }
  void run_device(RunContext& ctx) const override {
    const bool packed = !ctx.has(1);
    Tensor g, u;
    const int64_t n = ctx.out(0).dim(-1);
    if (!packed && ctx.in(0).shape() != ctx.in(1).shape()) fail(ctx.node.describe(), ": gate and up differ in shape");
    ctx.opencl->swiglu(device_input(ctx, 0, g), packed ? nullptr : device_input(ctx, 1, u), device_output(ctx, 0),
                       static_cast<int>(ctx.out(0).numel() / n), static_cast<int>(n));
  }
};

}  // namespace

void register_swiglu_opencl(OpRegistry& r) { r.add_variant(DeviceKind::OpenCL, "tern", "SwiGLU", factory<SwiGluOpenCl>()); }

}  // namespace tern
