// MatMulNBits on an OpenCL device: float32 activations and scales, packed (or no) zero points, no bias;
// the blocks uploaded at load, as stored.
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

class MatMulNBitsOpenCl : public OpenClVariant {
 public:
  explicit MatMulNBitsOpenCl(const Node& n)
      : OpenClVariant(n),
        K_(n.attr_int("K", 0)),
        N_(n.attr_int("N", 0)),
        bits_(n.attr_int("bits", 4)),
        block_(n.attr_int("block_size", 0)) {}
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& options) override {
    auto at = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
    const bool zp_ok = constants.size() <= 3 || !constants[3] || constants[3]->dtype() == DType::UInt8;
    if (at(1) && at(2) && at(2)->dtype() == DType::Float32 && zp_ok) {
      blocks_ = upload_constant(options, at(1));
      scales_ = upload_constant(options, at(2));
      zero_points_ = upload_constant(options, at(3));
    }
    return OpenClVariant::pack(constants, options);
  }

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    const bool zp_ok = in.size() <= 3 || !in[3] || zero_points_.of(in[3]);
    const bool no_bias = in.size() <= 5 || !in[5];
    // (2-bit weights and g_idx stay on the CPU: the device kernels read 4 and 8 bits in the file's column order)
    const bool device_reads_it = (bits_ == 4 || bits_ == 8) && (in.size() <= 4 || !in[4]);
    return blocks_.of(in[1]) && scales_.of(in[2]) && in[0]->dtype() == DType::Float32 && zp_ok && no_bias && device_reads_it &&
           block_ % 2 == 0;
  }
  void run_device(RunContext& ctx) const override {
    Tensor a;
    ctx.opencl->gemv_nbits(device_input(ctx, 0, a), blocks_.mem(), scales_.mem(), ctx.has(3) ? zero_points_.mem() : nullptr,
                           device_output(ctx, 0), static_cast<int>(ctx.in(0).numel() / K_), static_cast<int>(K_), static_cast<int>(N_),
                           static_cast<int>(bits_), static_cast<int>(block_));
  }

 private:
  int64_t K_, N_, bits_, block_;  // (checked by the CPU op, built first)
  DeviceCopy blocks_, scales_, zero_points_;
};

}  // namespace

void register_matmul_nbits_opencl(OpRegistry& r) {
  r.add_variant(DeviceKind::OpenCL, "com.microsoft", "MatMulNBits", factory<MatMulNBitsOpenCl>());
}

}  // namespace tern
