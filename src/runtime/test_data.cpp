#include "runtime/test_data.h"

#include <filesystem>

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
      if (i >= session.inputs().size())
        fail("'", p.string(), "': the model has only ", session.inputs().size(), " inputs");
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

}  // namespace tern
