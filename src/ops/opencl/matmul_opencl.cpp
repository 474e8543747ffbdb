// MatMul on an OpenCL device: float32 activations times the weight MatMul repacked at load, uploaded
// then as [N, K] (float32 or half) or as its int8/int4 blocks.
#include "ops/matmul.h"
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulOpenCl : public OpenClVariant {
 public:
  using OpenClVariant::OpenClVariant;
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& options) override {
    auto freed = OpenClVariant::pack(constants, options);
    if (!options.device) return freed;
    const auto& op = static_cast<const RepackedMatMul&>(*cpu_);
    auto& c = options.device->context();
    if (const auto* p = op.packed()) {
      weights_.push_back(cl::to_device(c, kernels::unpack_transposed(*p)));
    } else if (const auto* q = op.quantized()) {
      for (const Tensor* t : {&q->data, &q->scales, &q->zero_points}) weights_.push_back(cl::to_device(c, *t));
    }
    return freed;
  }

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    return !weights_.empty() && in[0] && in[0]->dtype() == DType::Float32;
  }
  void run_device(RunContext& ctx) const override {
    const auto& op = static_cast<const RepackedMatMul&>(*cpu_);
    const auto* p = op.packed();
    const auto* q = op.quantized();
    const int64_t K = p ? p->K : q->K, N = p ? p->N : q->N;
    const int M = static_cast<int>(ctx.in(0).numel() / K);
    Tensor a;
    const cl_mem x = device_input(ctx, 0, a), y = device_output(ctx, 0);
    if (p)
      ctx.opencl->gemv(x, cl::mem_of(weights_[0]), weights_[0].dtype() == DType::Float16, y, M, static_cast<int>(K), static_cast<int>(N));
    else
      ctx.opencl->gemv_nbits(x, cl::mem_of(weights_[0]), cl::mem_of(weights_[1]), cl::mem_of(weights_[2]), y, M, static_cast<int>(K),
                             static_cast<int>(N), static_cast<int>(q->bits), static_cast<int>(q->block));
  }

 private:
  std::vector<Tensor> weights_;  // on the device: [N, K], or blocks, scales, zero points
};

}  // namespace

void register_matmul_opencl(OpRegistry& r) {
  r.add_variant(DeviceKind::OpenCL, "", "MatMul", factory<MatMulOpenCl>());
  // A weight read transposed (passes/canonicalize.h: a tied LM head) is repacked like any other.
  r.add_variant(DeviceKind::OpenCL, "com.microsoft", "FusedMatMul", factory<MatMulOpenCl>());
}

}  // namespace tern
