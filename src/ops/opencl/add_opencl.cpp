// Add on an OpenCL device: the residual add — two float32 tensors of one shape.
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class AddOpenCl : public OpenClVariant {
 public:
  using OpenClVariant::OpenClVariant;

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    return in[0] && in[1] && in[0]->dtype() == DType::Float32 && in[1]->dtype() == DType::Float32 && in[0]->shape() == in[1]->shape();
  }
  void run_device(RunContext& ctx) const override {
    Tensor a, b;
    ctx.opencl->add(device_input(ctx, 0, a), device_input(ctx, 1, b), device_output(ctx, 0), static_cast<int>(ctx.out(0).numel()));
  }
};

}  // namespace

void register_add_opencl(OpRegistry& r) { r.add_variant(DeviceKind::OpenCL, "", "Add", factory<AddOpenCl>()); }

}  // namespace tern
