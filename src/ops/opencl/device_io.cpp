#include "ops/opencl/device_io.h"

namespace tern {

cl_mem device_input(const RunContext& ctx, int i, Tensor& scratch) {
  const Tensor& t = ctx.in(i);
  if (cl::on_device(t)) return cl::mem_of(t);
  scratch = cl::to_device(ctx.opencl->context(), t);
  return cl::mem_of(scratch);
}

cl_mem device_output(RunContext& ctx, int i) { return cl::mem_of(ctx.out(i)); }

DeviceCopy upload_constant(const PackSettings& settings, const Tensor* constant) {
  if (!settings.device || !constant || !constant->raw()) return {};
  return {cl::to_device(settings.device->context(), *constant), constant->raw()};
}

}  // namespace tern
