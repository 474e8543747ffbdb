#include "tools/cli/cli.h"

#include <filesystem>
#include <iostream>

#include "passes/quantize.h"

namespace tern::cli {

int quantize(int argc, char** argv) {
  namespace fs = std::filesystem;
  Flags f = parse(argc, argv, 2, {});
  if (!f.has("model") || !f.has("out")) fail("quantize needs --model PATH and --out DIR");
  const llm::ModelFiles files = llm::resolve_model(f.get("model"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  const fs::path out = f.get("out");
  if (fs::exists(out / "model.onnx")) fail("'", (out / "model.onnx").string(), "' exists; choose another --out");
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir)) {  // config, tokenizer, …
    const std::string name = e.path().filename().string();
    const bool model_file = e.path().extension() == ".onnx" || name.find(".onnx_data") != std::string::npos ||
                            name.find(".onnx.data") != std::string::npos;
    if (e.is_regular_file() && !model_file) fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing);
  }
  const int n = quantize_model(model_path, (out / "model.onnx").string(), f.get_int("bits", 4),
                                     f.get_int("block", 32));
  std::cout << "quantized " << n << " MatMul weight(s) to " << f.get("bits", "4") << " bits, block " << f.get("block", "32")
            << ": " << (out / "model.onnx").string() << "\n";
  return 0;
}

}  // namespace tern::cli
