// Gather on an OpenCL device: the embedding lookup — a constant float32 table [rows, D] uploaded at
// load, integer ids read on the host (checked there, uploaded as int32: 4 bytes a token).
#include "ops/opencl/device_io.h"
#include "ops/register_all.h"

namespace tern {
namespace {

// The ids of a run and the device buffer they go to (grown, not made per token).
struct IdsScratch : OpState {
  std::vector<int32_t> ids;
  Tensor device;
};

class GatherOpenCl : public OpenClVariant {
 public:
  explicit GatherOpenCl(const Node& n) : OpenClVariant(n), axis_(n.attr_int("axis", 0)) {}
  std::vector<int> pack(const std::vector<const Tensor*>& constants, const PackSettings& options) override {
    if (!constants.empty() && constants[0] && constants[0]->dtype() == DType::Float32 && constants[0]->rank() == 2)
      table_ = upload_constant(options, constants[0]);
    return OpenClVariant::pack(constants, options);
  }
  std::unique_ptr<OpState> make_state() const override { return std::make_unique<IdsScratch>(); }

 protected:
  bool device_takes(const std::vector<const Tensor*>& in) const override {
    return table_.of(in[0]) && in[1] && !cl::on_device(*in[1]) && (axis_ == 0 || axis_ == -2) &&
           (in[1]->dtype() == DType::Int64 || in[1]->dtype() == DType::Int32);
  }
  void run_device(RunContext& ctx) const override {
    auto& st = *static_cast<IdsScratch*>(ctx.state);
    const std::vector<int64_t> idx = checked_indices(ctx.node, ctx.in(1), table_.device.dim(0));
    st.ids.assign(idx.begin(), idx.end());
    auto& c = ctx.opencl->context();
    if (!st.device.defined() || st.device.numel() < static_cast<int64_t>(idx.size()))
      st.device = cl::device_tensor(c, DType::Int32, {static_cast<int64_t>(idx.size())});
    c.upload(cl::mem_of(st.device), st.device.nbytes(), st.ids.data(), idx.size() * sizeof(int32_t));
    ctx.opencl->embed_rows(cl::mem_of(st.device), table_.mem(), device_output(ctx, 0), static_cast<int>(idx.size()),
                           static_cast<int>(table_.device.dim(1)));
  }

 private:
  int64_t axis_;
  DeviceCopy table_;
};

}  // namespace

void register_gather_opencl(OpRegistry& r) { r.add_variant(DeviceKind::OpenCL, "", "Gather", factory<GatherOpenCl>()); }

}  // namespace tern
