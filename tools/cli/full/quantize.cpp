#include "tools/cli/cli.h"

#include <filesystem>
#include <iostream>

#include "convert/quantize.h"
#include "core/output_files.h"

namespace tern::cli {

int quantize(int argc, char** argv) {
  namespace fs = std::filesystem;
  Flags f = parse(argc, argv, 2, {});
  if (!f.has("model") || !f.has("out")) fail("quantize needs --model PATH and --out DIR");
  const llm::ModelFiles files = llm::resolve_model(f.get("model"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  StagedFolder out(f.get("out"));  // all or nothing: a kill leaves the earlier folder or the new one
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir)) {  // config, tokenizer, … (not a pack of the old weights)
    const std::string name = e.path().filename().string();
    const bool model_file = e.path().extension() == ".onnx" || e.path().extension() == ".tern-pack" ||
                            name.find(".onnx_data") != std::string::npos || name.find(".onnx.data") != std::string::npos;
    if (e.is_regular_file() && !model_file) fs::copy_file(e.path(), out.path() / name);
  }
  const int n = convert::quantize_model(model_path, (out.path() / "model.onnx").string(), f.get_int("bits", 4), f.get_int("block", 32),
                                        terminal_progress("quantizing"));
  out.commit();
  std::cout << "quantized " << n << " MatMul weight(s) to " << f.get("bits", "4") << " bits, block " << f.get("block", "32") << ": "
            << (fs::path(f.get("out")) / "model.onnx").string() << "\n";
  return 0;
}

}  // namespace tern::cli
