// The OpenCL device of a session (runtime/device_executor.h): its context (queue, transfers), compiled
// kernels, output memory per node and the top-k buffers.
#include <algorithm>
#include <cstdio>

#include "kernels/opencl/device.h"
#include "kernels/opencl/kernels.h"
#include "runtime/device_executor.h"

namespace tern {
namespace {

class OpenClExecutor : public DeviceExecutor {
 public:
  explicit OpenClExecutor(int index) : context_(index), kernels_(context_) {}
  kernels::opencl::Kernels* kernels() override { return &kernels_; }
  Allocator allocator(size_t node) override {
    if (outputs_.size() <= node) outputs_.resize(node + 1);
    return [this, node, n = size_t{0}](DType dt, const Shape& shape) mutable {
      std::vector<Tensor>& cache = outputs_[node];
      const size_t j = n++;
      if (cache.size() <= j) cache.resize(j + 1);
      const size_t need = bytes_for(dt, numel_of(shape));
      if (!cache[j].defined() || cache[j].buffer()->bytes() < need || cache[j].buffer().use_count() > 1)
        cache[j] = cl::device_tensor(context_, dt, shape);
      return Tensor(dt, shape, cache[j].buffer());
    };
  }
  bool holds(const Tensor& t) const override { return cl::on_device(t); }
  Tensor to_host(const Tensor& t) override { return cl::to_host(context_, t); }
  void finish() override { context_.finish(); }
  const TransferStats& transfers() const override { return context_.transfers(); }

  void top_k(const Tensor& t, int k, std::vector<int32_t>& ids, std::vector<float>& values) override {
    if (t.rank() != 3 || t.dim(0) != 1) fail("device top-k needs [1, S, V] scores, got ", shape_str(t.shape()));
    const int64_t S = t.dim(1), V = t.dim(2);
    k = static_cast<int>(std::min<int64_t>(k, V));
    ids.resize(static_cast<size_t>(k));
    values.assign(static_cast<size_t>(k), 0.0f);
    if (!cl::on_device(t)) {  // computed on the CPU after all (a node the device lacks): picked here
      const Tensor f = cast_to(t, DType::Float32);
      const float* row = f.data<float>() + (S - 1) * V;
      std::vector<int32_t> order(static_cast<size_t>(V));
      for (int32_t i = 0; i < static_cast<int32_t>(V); ++i) order[static_cast<size_t>(i)] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (size_t j = 0; j < static_cast<size_t>(k); ++j) ids[j] = order[j], values[j] = row[order[j]];
      return;
    }
    if (t.dtype() != DType::Float32) fail("device top-k needs float32 scores");
    const int at = static_cast<int>((S - 1) * V);
    using K = kernels::opencl::Kernels;
    if (!top_ids_) {
      const size_t n = static_cast<size_t>(K::kTopKMax);
      top_ids_ = std::make_unique<cl::Buffer>(context_, n * 4);
      top_values_ = std::make_unique<cl::Buffer>(context_, n * 4);
      scratch_ids_ = std::make_unique<cl::Buffer>(context_, n * K::kTopKItems * 4);
      scratch_values_ = std::make_unique<cl::Buffer>(context_, n * K::kTopKItems * 4);
    }
    if (k == 1) {
      kernels_.argmax(cl::mem_of(t), at, static_cast<int>(V), *top_ids_);
    } else {
      kernels_.top_k(cl::mem_of(t), at, static_cast<int>(V), k, *scratch_values_, *scratch_ids_, *top_values_, *top_ids_);
      context_.download(*top_values_, values.data(), static_cast<size_t>(k) * 4);
    }
    context_.download(*top_ids_, ids.data(), static_cast<size_t>(k) * 4);
  }

 private:
  cl::Context context_;
  kernels::opencl::Kernels kernels_;
  std::vector<std::vector<Tensor>> outputs_;  // per node, device memory its outputs reuse run after run
  std::unique_ptr<cl::Buffer> top_ids_, top_values_, scratch_ids_, scratch_values_;
};

}  // namespace

std::unique_ptr<DeviceExecutor> DeviceExecutor::open(const Device& device) { return std::make_unique<OpenClExecutor>(device.index); }

int DeviceExecutor::max_top_k() { return kernels::opencl::Kernels::kTopKMax; }

std::string DeviceExecutor::describe_devices() {
  const auto devices = cl::list_devices();
  if (devices.empty()) return "opencl    none found (no OpenCL platform/driver; on Debian: apt-get install pocl-opencl-icd)\n";
  std::string s;
  for (const auto& d : devices) {
    char line[1024];
    std::snprintf(line, sizeof line,
                  "opencl:%-3d %s (%s, %s)\n           %s, %s; %d compute units, %.1f GB global, %lld KB local, work-group <= %zu, "
                  "fp16 %s, subgroups %s\n",
                  d.index, d.name.c_str(), d.platform.c_str(), d.gpu ? "GPU" : "not a GPU", d.version.c_str(), d.driver.c_str(),
                  d.compute_units, static_cast<double>(d.global_mem_bytes) / 1e9, static_cast<long long>(d.local_mem_bytes / 1024),
                  d.max_work_group, d.fp16 ? "yes" : "no", d.subgroups ? "yes" : "no");
    s += line;
  }
  return s;
}

}  // namespace tern
