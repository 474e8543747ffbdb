// The OpenCL device behind `--device opencl[:N]`: devices listed across platforms, one context and
// in-order queue per device, programs compiled from source at run time (cached per device and source,
// in memory and as binaries on disk), buffers that count every byte crossing host↔device. OpenCL 1.2
// API only, so the same code runs on PoCL (CPU, what CI has) and on Intel/Mali/Adreno iGPUs; what a
// device can do (fp16, work-group sizes, subgroups) is queried, never assumed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

typedef struct _cl_context* cl_context;
typedef struct _cl_command_queue* cl_command_queue;
typedef struct _cl_mem* cl_mem;
typedef struct _cl_program* cl_program;
typedef struct _cl_kernel* cl_kernel;
typedef struct _cl_device_id* cl_device_id;

namespace tern::cl {

struct DeviceInfo {
  int index = 0;  // across all platforms, in the order listed: --device opencl:INDEX
  std::string platform, name, vendor, version, driver;
  bool gpu = false;
  int compute_units = 0;
  int64_t global_mem_bytes = 0, local_mem_bytes = 0, max_alloc_bytes = 0;
  size_t max_work_group = 0;
  bool fp16 = false;       // cl_khr_fp16: half arithmetic (vload_half/vstore_half need nothing)
  bool subgroups = false;  // cl_khr_subgroups or cl_intel_subgroups
  std::string extensions;
};

// Every OpenCL device of every platform the ICD loader finds; empty (never throws) when there is none.
std::vector<DeviceInfo> list_devices();

using TransferStats = ::tern::TransferStats;  // (core/tensor.h: sessions report it without OpenCL)

class Context;

// A device buffer. Moving data in or out goes through the Context, which counts it.
class Buffer {
 public:
  Buffer(Context& ctx, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  cl_mem handle() const { return mem_; }
  size_t bytes() const { return bytes_; }

 private:
  cl_mem mem_ = nullptr;
  size_t bytes_;
};

// A kernel of a built program, arguments set one by one then launched on the context's queue.
class Kernel {
 public:
  Kernel(cl_program program, const std::string& name);
  ~Kernel();
  Kernel(Kernel&& other) noexcept : k_(other.k_), name_(std::move(other.name_)) { other.k_ = nullptr; }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  Kernel& arg(int i, const Buffer& b);
  Kernel& arg(int i, cl_mem m);
  Kernel& arg(int i, int32_t v);
  Kernel& arg(int i, float v);
  Kernel& local(int i, size_t bytes);  // __local scratch of this size
  // Sets every argument in order: Buffers, int32_t and float.
  template <typename... Args>
  Kernel& args(const Args&... a) {
    int i = 0;
    (arg(i++, a), ...);
    return *this;
  }
  const std::string& name() const { return name_; }
  cl_kernel handle() const { return k_; }

 private:
  cl_kernel k_ = nullptr;
  std::string name_;
};

class Context {
 public:
  // Device `index` of list_devices(); fails naming the devices there are when it does not exist.
  explicit Context(int index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  cl_context handle() const { return ctx_; }

  // Builds `source` with `options` once per context (and loads it from the on-disk binary cache
  // when this device compiled the same source before); fails with the build log.
  cl_program program(const std::string& source, const std::string& options = "");
  Kernel kernel(cl_program program, const std::string& name) { return Kernel(program, name); }

  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset = 0) { upload(dst.handle(), dst.bytes(), src, bytes, offset); }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset = 0) { download(src.handle(), src.bytes(), dst, bytes, offset); }
  void upload(cl_mem dst, size_t dst_bytes, const void* src, size_t bytes, size_t offset = 0);
  void download(cl_mem src, size_t src_bytes, void* dst, size_t bytes, size_t offset = 0);
  // Device-to-device copy (no host transfer).
  void copy(cl_mem src, cl_mem dst, size_t bytes);
  // Enqueues a 1-D launch: `global` work-items in groups of `local` (global rounded up to a multiple).
  void launch(const Kernel& k, size_t global, size_t local);
  void launch_2d(const Kernel& k, size_t global0, size_t global1, size_t local0, size_t local1);
  void finish();
  // The largest work-group this kernel can run with on this device (≤ info().max_work_group).
  size_t max_work_group(const Kernel& k) const;

  const TransferStats& transfers() const { return transfers_; }
  // Programs built from source (not loaded from the disk cache) by this context.
  int compiled_programs() const { return compiled_; }

 private:
  DeviceInfo info_;
  cl_device_id device_ = nullptr;
  cl_context ctx_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::map<std::string, cl_program> programs_;  // by source hash + options
  TransferStats transfers_;
  int compiled_ = 0;
};

// Tensors on the device: a tern::Tensor whose Buffer is device memory (Device{OpenCL, index}; its
// data pointer is the cl_mem). Only device code and these helpers may touch it.
Tensor device_tensor(Context& ctx, DType dtype, const Shape& shape);
cl_mem mem_of(const Tensor& t);
bool on_device(const Tensor& t);
Tensor to_device(Context& ctx, const Tensor& host);  // upload (counted)
Tensor to_host(Context& ctx, const Tensor& dev);     // download (counted)

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL status code.
std::string error_name(int status);

}  // namespace tern::cl
