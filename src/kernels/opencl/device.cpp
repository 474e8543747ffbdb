#include "kernels/opencl/device.h"
#include "core/hash.h"

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/output_files.h"

namespace tern::cl {
namespace {

void check(cl_int status, const char* what) {
  if (status != CL_SUCCESS) fail("OpenCL: ", what, " failed: ", error_name(status));
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

struct Found {
  cl_device_id id;
  DeviceInfo info;
};

std::vector<Found> find_devices() {
  std::vector<Found> out;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    size_t n = 0;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n);
    std::string pname(n, '\0');
    clGetPlatformInfo(p, CL_PLATFORM_NAME, n, pname.data(), nullptr);
    while (!pname.empty() && pname.back() == '\0') pname.pop_back();
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr);
    for (cl_device_id d : devices) {
      DeviceInfo i;
      i.index = static_cast<int>(out.size());
      i.platform = pname;
      i.name = device_string(d, CL_DEVICE_NAME);
      i.vendor = device_string(d, CL_DEVICE_VENDOR);
      i.version = device_string(d, CL_DEVICE_VERSION);
      i.driver = device_string(d, CL_DRIVER_VERSION);
      i.extensions = device_string(d, CL_DEVICE_EXTENSIONS);
      i.gpu = (device_value<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
      i.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
      i.global_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
      i.local_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE));
      i.max_alloc_bytes = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
      i.max_work_group = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      i.fp16 = i.extensions.find("cl_khr_fp16") != std::string::npos;
      i.subgroups =
          i.extensions.find("cl_khr_subgroups") != std::string::npos || i.extensions.find("cl_intel_subgroups") != std::string::npos;
      out.push_back({d, i});
    }
  }
  return out;
}

std::filesystem::path binary_cache_dir() { return cache_dir("opencl"); }

}  // namespace

std::string error_name(int status) {
  static const std::map<int, const char*> names = {{CL_DEVICE_NOT_FOUND, "CL_DEVICE_NOT_FOUND"},
                                                   {CL_DEVICE_NOT_AVAILABLE, "CL_DEVICE_NOT_AVAILABLE"},
                                                   {CL_COMPILER_NOT_AVAILABLE, "CL_COMPILER_NOT_AVAILABLE"},
                                                   {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
                                                   {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
                                                   {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
                                                   {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
                                                   {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
                                                   {CL_INVALID_DEVICE, "CL_INVALID_DEVICE"},
                                                   {CL_INVALID_BINARY, "CL_INVALID_BINARY"},
                                                   {CL_INVALID_BUILD_OPTIONS, "CL_INVALID_BUILD_OPTIONS"},
                                                   {CL_INVALID_PROGRAM, "CL_INVALID_PROGRAM"},
                                                   {CL_INVALID_KERNEL_NAME, "CL_INVALID_KERNEL_NAME"},
                                                   {CL_INVALID_ARG_INDEX, "CL_INVALID_ARG_INDEX"},
                                                   {CL_INVALID_ARG_VALUE, "CL_INVALID_ARG_VALUE"},
                                                   {CL_INVALID_ARG_SIZE, "CL_INVALID_ARG_SIZE"},
                                                   {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
                                                   {CL_INVALID_WORK_GROUP_SIZE, "CL_INVALID_WORK_GROUP_SIZE"},
                                                   {CL_INVALID_WORK_ITEM_SIZE, "CL_INVALID_WORK_ITEM_SIZE"},
                                                   {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
                                                   {CL_INVALID_MEM_OBJECT, "CL_INVALID_MEM_OBJECT"},
                                                   {CL_INVALID_OPERATION, "CL_INVALID_OPERATION"},
                                                   {-1001, "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)"}};
  auto it = names.find(status);
  return std::string(it != names.end() ? it->second : "OpenCL error") + " (" + std::to_string(status) + ")";
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> v;
  for (const Found& f : find_devices()) v.push_back(f.info);
  return v;
}

Buffer::Buffer(Context& ctx, size_t bytes) : bytes_(bytes) {
  cl_int status = CL_SUCCESS;
  mem_ = clCreateBuffer(ctx.handle(), CL_MEM_READ_WRITE, bytes ? bytes : 4, nullptr, &status);
  if (status != CL_SUCCESS) fail("OpenCL: allocating ", bytes, " bytes on ", ctx.info().name, " failed: ", error_name(status));
}

Buffer::~Buffer() {
  if (mem_) clReleaseMemObject(mem_);
}

Kernel::Kernel(cl_program program, const std::string& name) : name_(name) {
  cl_int status = CL_SUCCESS;
  k_ = clCreateKernel(program, name.c_str(), &status);
  if (status != CL_SUCCESS) fail("OpenCL: kernel '", name, "': ", error_name(status));
}

Kernel::~Kernel() {
  if (k_) clReleaseKernel(k_);
}

Kernel& Kernel::arg(int i, const Buffer& b) { return arg(i, b.handle()); }
Kernel& Kernel::arg(int i, cl_mem m) {
  check(clSetKernelArg(k_, static_cast<cl_uint>(i), sizeof m, &m), name_.c_str());
  return *this;
}
Kernel& Kernel::arg(int i, int32_t v) {
  check(clSetKernelArg(k_, static_cast<cl_uint>(i), sizeof v, &v), name_.c_str());
  return *this;
}
Kernel& Kernel::arg(int i, float v) {
  check(clSetKernelArg(k_, static_cast<cl_uint>(i), sizeof v, &v), name_.c_str());
  return *this;
}
Kernel& Kernel::local(int i, size_t bytes) {
  check(clSetKernelArg(k_, static_cast<cl_uint>(i), bytes, nullptr), name_.c_str());
  return *this;
}

Context::Context(int index) {
  const auto devices = find_devices();
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    std::string have;
    for (const auto& d : devices) have += "\n  opencl:" + std::to_string(d.info.index) + "  " + d.info.name + " (" + d.info.platform + ")";
    fail("no OpenCL device ", index,
         devices.empty() ? std::string(": no OpenCL platform or device is installed "
                                       "(on Debian: apt-get install pocl-opencl-icd)")
                         : "; there are:" + have);
  }
  device_ = devices[static_cast<size_t>(index)].id;
  info_ = devices[static_cast<size_t>(index)].info;
  cl_int status = CL_SUCCESS;
  ctx_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &status);
  check(status, "clCreateContext");
  queue_ = clCreateCommandQueue(ctx_, device_, 0, &status);
  check(status, "clCreateCommandQueue");
}

Context::~Context() {
  for (auto& [key, p] : programs_) clReleaseProgram(p);
  if (queue_) clReleaseCommandQueue(queue_);
  if (ctx_) clReleaseContext(ctx_);
}

cl_program Context::program(const std::string& source, const std::string& options) {
  const uint64_t key_hash = fnv1a(options, fnv1a(source));
  const std::string key = std::to_string(key_hash);
  if (auto it = programs_.find(key); it != programs_.end()) return it->second;
  // The binary a device compiled is only good for that device and driver.
  const auto dir = binary_cache_dir();
  const uint64_t device_hash = fnv1a(info_.platform + "|" + info_.name + "|" + info_.driver + "|" + info_.version);
  const std::filesystem::path cached = dir.empty() ? std::filesystem::path() : dir / (std::to_string(device_hash) + "-" + key + ".bin");
  cl_int status = CL_SUCCESS;
  cl_program p = nullptr;
  if (!cached.empty()) {
    std::ifstream f(cached, std::ios::binary);
    std::string bin((std::istreambuf_iterator<char>(f)), {});
    if (!bin.empty()) {
      const unsigned char* data = reinterpret_cast<const unsigned char*>(bin.data());
      size_t size = bin.size();
      cl_int bin_status = CL_SUCCESS;
      p = clCreateProgramWithBinary(ctx_, 1, &device_, &size, &data, &bin_status, &status);
      if (status != CL_SUCCESS || bin_status != CL_SUCCESS ||
          clBuildProgram(p, 1, &device_, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
        if (p) clReleaseProgram(p);  // a stale or foreign binary: compile from source instead
        p = nullptr;
      }
    }
  }
  if (!p) {
    const char* src = source.c_str();
    const size_t len = source.size();
    p = clCreateProgramWithSource(ctx_, 1, &src, &len, &status);
    check(status, "clCreateProgramWithSource");
    status = clBuildProgram(p, 1, &device_, options.c_str(), nullptr, nullptr);
    if (status != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      clReleaseProgram(p);
      fail("OpenCL: building kernels for ", info_.name, " failed (", error_name(status), "):\n", log);
    }
    ++compiled_;
    size_t size = 0;
    if (!cached.empty() && clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) == CL_SUCCESS && size > 0) {
      std::string bin(size, '\0');
      unsigned char* data = reinterpret_cast<unsigned char*>(bin.data());
      if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) == CL_SUCCESS) {
        std::error_code ec;  // a cache that cannot be written costs a compile next time, nothing else
        std::filesystem::create_directories(dir, ec);
        std::ofstream(cached, std::ios::binary) << bin;
      }
    }
  }
  programs_[key] = p;
  return p;
}

void Context::upload(cl_mem dst, size_t dst_bytes, const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > dst_bytes) fail("OpenCL: upload of ", bytes, " bytes at ", offset, " overruns a ", dst_bytes, "-byte buffer");
  if (bytes == 0) return;
  check(clEnqueueWriteBuffer(queue_, dst, CL_TRUE, offset, bytes, src, 0, nullptr, nullptr), "upload");
  transfers_.to_device += static_cast<int64_t>(bytes);
}

void Context::download(cl_mem src, size_t src_bytes, void* dst, size_t bytes, size_t offset) {
  if (offset + bytes > src_bytes) fail("OpenCL: download of ", bytes, " bytes at ", offset, " overruns a ", src_bytes, "-byte buffer");
  if (bytes == 0) return;
  check(clEnqueueReadBuffer(queue_, src, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr), "download");
  transfers_.to_host += static_cast<int64_t>(bytes);
}

void Context::copy(cl_mem src, cl_mem dst, size_t bytes) {
  if (bytes) check(clEnqueueCopyBuffer(queue_, src, dst, 0, 0, bytes, 0, nullptr, nullptr), "device copy");
}

void Context::launch(const Kernel& k, size_t global, size_t local) {
  const size_t g = (global + local - 1) / local * local;
  check(clEnqueueNDRangeKernel(queue_, k.handle(), 1, nullptr, &g, &local, 0, nullptr, nullptr), k.name().c_str());
}

void Context::launch_2d(const Kernel& k, size_t global0, size_t global1, size_t local0, size_t local1) {
  const size_t g[2] = {(global0 + local0 - 1) / local0 * local0, (global1 + local1 - 1) / local1 * local1};
  const size_t l[2] = {local0, local1};
  check(clEnqueueNDRangeKernel(queue_, k.handle(), 2, nullptr, g, l, 0, nullptr, nullptr), k.name().c_str());
}

void Context::finish() { check(clFinish(queue_), "clFinish"); }

size_t Context::max_work_group(const Kernel& k) const {
  size_t n = 0;
  check(clGetKernelWorkGroupInfo(k.handle(), device_, CL_KERNEL_WORK_GROUP_SIZE, sizeof n, &n, nullptr), "work-group size");
  return n;
}

Tensor device_tensor(Context& ctx, DType dtype, const Shape& shape) {
  auto* b = new Buffer(ctx, bytes_for(dtype, numel_of(shape)));
  auto buf = std::make_shared<tern::Buffer>(static_cast<void*>(b->handle()), b->bytes(), Device{DeviceKind::OpenCL, ctx.info().index},
                                            [b](void*) { delete b; });
  return Tensor(dtype, shape, std::move(buf));
}

cl_mem mem_of(const Tensor& t) {
  if (!on_device(t)) fail("OpenCL: a host tensor where device memory was expected");
  return static_cast<cl_mem>(t.buffer()->data());
}

bool on_device(const Tensor& t) { return t.buffer() && t.buffer()->device().kind == DeviceKind::OpenCL; }

Tensor to_device(Context& ctx, const Tensor& host) {
  Tensor d = device_tensor(ctx, host.dtype(), host.shape());
  ctx.upload(mem_of(d), d.buffer()->bytes(), host.raw(), host.nbytes());
  return d;
}

Tensor to_host(Context& ctx, const Tensor& dev) {
  Tensor h(dev.dtype(), dev.shape());
  ctx.download(mem_of(dev), dev.buffer()->bytes(), h.raw(), h.nbytes(), 0);
  return h;
}

}  // namespace tern::cl
