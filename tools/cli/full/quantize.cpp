#include "tools/cli/cli.h"

#include <filesystem>
#include <iostream>

#include "convert/quantize.h"
#include "core/output_files.h"

namespace tern::cli {

int quantize(int argc, char** argv) {
  namespace fs = std::filesystem;
  Flags f = parse(argc, argv, *find_command("quantize"));
  if (!f.has("model") || !f.has("out")) fail("tern quantize needs a model (MODEL or --model PATH) and --out DIR");
  const llm::ModelFiles files = llm::resolve_model(f.get("model"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  StagedFolder out(f.get("out"));  // all or nothing: a kill leaves the earlier folder or the new one
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir)) {  // config, tokenizer, … (not a pack of the old weights)
    const std::string name = e.path().filename().string();
    const bool model_file = e.path().extension() == ".onnx" || e.path().extension() == ".tern-pack" ||
                            name.find(".onnx_data") != std::string::npos || name.find(".onnx.data") != std::string::npos;
    if (e.is_regular_file() && !model_file) fs::copy_file(e.path(), out.path() / name);
  }
  convert::QuantizeOptions o;
  o.bits = f.integer("bits");
  o.block = f.integer("block");
  o.symmetric = f.has("symmetric");
  o.accuracy_level = f.integer("accuracy-level");
  const int n = convert::quantize_model(model_path, (out.path() / "model.onnx").string(), o, terminal_progress("quantizing"));
  out.commit();
  std::cout << "quantized " << n << " MatMul weight(s) to " << o.bits << " bits, block " << o.block << ", "
            << (o.symmetric ? "symmetric" : "asymmetric") << ", accuracy_level " << o.accuracy_level << ": "
            << (fs::path(f.get("out")) / "model.onnx").string() << "\n";
  return 0;
}

}  // namespace tern::cli
