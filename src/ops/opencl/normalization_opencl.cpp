// The RMS normalizations on an OpenCL device: float32 over the last axis with a constant one-row scale
// (uploaded at load), plain or with a skip of the input's shape (no bias), when no statistics output is
// read.
#include "ops/normalization.h"
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// input + skip, when the node does not output the sum.
struct SumScratch : OpState {
  Tensor sum;
};

class RmsNormOpenCl : public OpenClVariant {
 public:
  explicit RmsNormOpenCl(const Node& n) : OpenClVariant(n), p_(norm_params(n)) {}
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& options) override {
    const Tensor* scale = static_cast<size_t>(p_.scale) < constants.size() ? constants[static_cast<size_t>(p_.scale)] : nullptr;
    if (scale && scale->dtype() == DType::Float32) scale_ = upload_constant(options, scale);
    return OpenClVariant::pack(constants, options);
  }
  std::unique_ptr<OpState> make_state() const override { return std::make_unique<SumScratch>(); }

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    const Tensor* x = in[0];
    const Tensor* scale = static_cast<size_t>(p_.scale) < in.size() ? in[static_cast<size_t>(p_.scale)] : nullptr;
    if (!p_.rms || p_.statistics || !x || !scale_.of(scale) || x->dtype() != DType::Float32 || x->rank() < 1) return false;
    if ((p_.axis < 0 ? p_.axis + x->rank() : p_.axis) != x->rank() - 1 || scale->numel() != x->dim(-1)) return false;
    if (p_.skip < 0) return true;
    const Tensor* skip = in[static_cast<size_t>(p_.skip)];
    const bool bias = p_.bias >= 0 && static_cast<size_t>(p_.bias) < in.size() && in[static_cast<size_t>(p_.bias)];
    return skip && skip->dtype() == DType::Float32 && skip->shape() == x->shape() && !bias;
  }
  void run_device(RunContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor xd, skip;
    const int D = static_cast<int>(x.dim(-1)), rows = static_cast<int>(x.numel() / x.dim(-1));
    const cl_mem scale = scale_.mem();
    const bool sum = p_.skip >= 0 && ctx.outputs.size() > 3 && ctx.out(3).defined();
    if (p_.skip < 0) {
      ctx.opencl->rms_norm(device_input(ctx, 0, xd), nullptr, nullptr, scale, device_output(ctx, 0), rows, D, p_.eps);
    } else if (sum) {
      ctx.opencl->rms_norm(device_input(ctx, 0, xd), device_input(ctx, p_.skip, skip), device_output(ctx, 3), scale, device_output(ctx, 0),
                           rows, D, p_.eps);
    } else {  // the sum goes nowhere: a scratch of the device's
      Tensor& s = static_cast<SumScratch*>(ctx.state)->sum;
      if (!s.defined() || s.numel() < x.numel()) s = cl::device_tensor(ctx.opencl->context(), DType::Float32, x.shape());
      ctx.opencl->rms_norm(device_input(ctx, 0, xd), device_input(ctx, p_.skip, skip), cl::mem_of(s), scale, device_output(ctx, 0), rows, D,
                           p_.eps);
    }
  }

 private:
  NormParams p_;
  DeviceCopy scale_;
};

}  // namespace

void register_normalization_opencl(OpRegistry& r) {
  for (const char* type : {"RMSNormalization", "SimplifiedLayerNormalization"})
    r.add_variant(DeviceKind::OpenCL, "", type, factory<RmsNormOpenCl>());
  r.add_variant(DeviceKind::OpenCL, "com.microsoft", "SkipSimplifiedLayerNormalization", factory<RmsNormOpenCl>());
}

}  // namespace tern
