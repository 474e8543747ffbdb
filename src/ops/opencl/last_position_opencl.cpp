// LastPosition on an OpenCL device: the last row of each sequence, float32 (other positions — a speculative step's
// verification — on the CPU).
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class LastPositionOpenCl : public OpenClVariant {
 public:
  using OpenClVariant::OpenClVariant;

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    const bool last_only =
        in.size() < 2 || !in[1] || (in[1]->device().kind == DeviceKind::CPU && in[1]->numel() == 1 && in[1]->data<int64_t>()[0] == -1);
    return in[0] && in[0]->dtype() == DType::Float32 && last_only;
  }
  void run_device(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    if (x.dim(1) < 1) fail(ctx.node.describe(), ": a sequence of 0 positions has no last one");
    Tensor xd;
    ctx.opencl->last_rows(device_input(ctx, 0, xd), device_output(ctx, 0), static_cast<int>(x.dim(0)), static_cast<int>(x.dim(1)),
                          static_cast<int>(x.dim(2)));
  }
};

}  // namespace

void register_last_position_opencl(OpRegistry& r) {
  r.add_variant(DeviceKind::OpenCL, "tern", "LastPosition", factory<LastPositionOpenCl>());
}

}  // namespace tern
