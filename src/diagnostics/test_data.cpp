#include "diagnostics/test_data.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace tern {
namespace fs = std::filesystem;

std::vector<std::pair<std::string, Tensor>> read_input_dir(const Session& session, const std::string& dir) {
  if (!fs::is_directory(dir)) fail("input folder '", dir, "' does not exist");
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0;; ++i) {
    fs::path p = fs::path(dir) / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    std::string name;
    Tensor t = load_tensor_pb(p.string(), &name);
    bool is_input = false;
    for (const auto& in : session.inputs()) is_input |= in.name == name;
    if (!is_input) {
      if (i >= session.inputs().size()) fail("'", p.string(), "': the model has only ", session.inputs().size(), " inputs");
      name = session.inputs()[i].name;
    }
    feeds.emplace_back(name, std::move(t));
  }
  return feeds;
}

std::vector<Tensor> read_output_dir(const std::string& dir) {
  std::vector<Tensor> outs;
  for (size_t i = 0;; ++i) {
    fs::path p = fs::path(dir) / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    outs.push_back(load_tensor_pb(p.string()));
  }
  return outs;
}

void write_output_dir(const Outputs& outputs, const std::string& dir) {
  fs::create_directories(dir);
  for (size_t i = 0; i < outputs.size(); ++i)
    save_tensor_pb(outputs[i], outputs.items[i].first, (fs::path(dir) / ("output_" + std::to_string(i) + ".pb")).string());
}

std::string compare_tensors(const Tensor& expected, const Tensor& actual) {
  if (expected.dtype() != actual.dtype())
    return std::string("dtype ") + dtype_name(actual.dtype()) + ", expected " + dtype_name(expected.dtype());
  if (expected.shape() != actual.shape()) return "shape " + shape_str(actual.shape()) + ", expected " + shape_str(expected.shape());
  double rtol = 0, atol = 0;
  switch (expected.dtype()) {
    case DType::Float32:
    case DType::Float64:
      rtol = 1e-3;
      atol = 1e-4;
      break;
    case DType::Float16:
      rtol = 1e-2;
      atol = 1e-2;
      break;
    case DType::BFloat16:
      rtol = 2e-2;
      atol = 2e-2;
      break;
    default: break;
  }
  if (!is_float(expected.dtype())) {
    if (std::memcmp(expected.raw(), actual.raw(), expected.nbytes()) == 0) return "";
  }
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.at_f64(i), a = actual.at_f64(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isinf(e) && e == a) continue;
    if (std::abs(a - e) <= atol + rtol * std::abs(e)) continue;
    std::ostringstream os;
    os << "element " << i << " is " << a << ", expected " << e;
    return os.str();
  }
  return "";
}

}  // namespace tern
