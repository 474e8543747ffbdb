// What a session needs from a device besides its ops' variants: the kernels they call, memory for
// their outputs, transfers, and the top-k that keeps generation's scores on the device. One
// implementation, OpenCL (opencl_executor.cpp, built with -DTERN_OPENCL=ON).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/execute.h"

namespace tern {

class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  // Opens `device`; fails naming the build option when tern was built without OpenCL.
  static std::unique_ptr<DeviceExecutor> open(const Device& device);
  // The largest k top_k() takes.
  static int max_top_k();
  // `tern devices`: a line or two per device ("opencl:N name (platform, GPU or not) …"), or why there is none.
  static std::string describe_devices();

  virtual kernels::opencl::Kernels* kernels() = 0;
  // Device memory for node k's outputs, reused run after run when it is large enough and free.
  virtual Allocator allocator(size_t node) = 0;
  virtual bool holds(const Tensor& t) const = 0;  // t lives in this device's memory
  virtual Tensor to_host(const Tensor& t) = 0;    // download (counted)
  virtual void finish() = 0;                      // every queued kernel has run
  virtual const TransferStats& transfers() const = 0;
  // The k best scores of the last position of [1, S, V] scores `t` (on the device, or on the host after
  // a CPU fallback), best first, ties to the lower index; `values` stays 0 when k = 1 (the argmax alone
  // is downloaded).
  virtual void top_k(const Tensor& t, int k, std::vector<int32_t>& ids, std::vector<float>& values) = 0;
};

}  // namespace tern
