#include "tools/cli/cli.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include "core/output_files.h"

namespace tern::cli {

namespace {

// OUT_DIR as a copy of the model folder: each file hard-linked where the file system allows (a
// multi-gigabyte weights file costs nothing twice), else copied. An old pack is not carried over.
void mirror_folder(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path rel = fs::relative(e.path(), from), dest = to / rel;
    if (e.is_directory()) {
      fs::create_directories(dest);
      continue;
    }
    if (!e.is_regular_file() || e.path().extension() == ".tern-pack") continue;
    if (fs::exists(dest)) fail("'", dest.string(), "' exists; choose an empty OUT_DIR");
    std::error_code ec;
    fs::create_hard_link(e.path(), dest, ec);
    if (ec) fs::copy_file(e.path(), dest);
  }
}

}  // namespace

int pack(int argc, char** argv) {
  namespace fs = std::filesystem;
  Flags f = parse(argc, argv, *find_command("pack"));
  const bool out_given = f.has("out");
  const llm::ModelFiles source = llm::resolve_model(f.get("model"));
  std::string onnx = source.onnx;
  // OUT_DIR is made whole or not at all (a full disk mid-pack left a partial one: issue 79): written in a
  // staging folder beside it, renamed into place once the pack is saved.
  std::optional<StagedFolder> staged;
  fs::path out_dir;
  if (out_given) {
    const fs::path from = source.dir.empty() ? "." : source.dir, to = f.get("out");
    std::error_code ec;
    if (!fs::equivalent(from, to, ec)) {
      const fs::path real_from = fs::weakly_canonical(from), real_to = fs::weakly_canonical(to);
      if (std::mismatch(real_from.begin(), real_from.end(), real_to.begin(), real_to.end()).first == real_from.end())
        fail("OUT_DIR '", to.string(), "' is inside MODEL_DIR '", from.string(), "': choose a folder beside it");
      staged.emplace(to);
      out_dir = to;
      mirror_folder(from, staged->path());
      onnx = (staged->path() / fs::path(source.onnx).filename()).string();
    }
  }
  // Prepared as generation loads it (the same fusions, so the same nodes), with the weights asked for.
  llm::DecoderOptions o = decoder_options(f);
  SessionOptions so = llm::decoder_session_options(o, llm::read_model_config(fs::path(onnx).parent_path().string()), true);
  so.pack = SessionOptions::Pack::Record;
  const auto t0 = std::chrono::steady_clock::now();
  Session session(onnx, with_load_progress(so, "packing"));
  std::string path = pack_path_for(onnx);
  session.weights().save_pack(path);
  if (staged) {
    staged->commit();
    onnx = (out_dir / fs::path(onnx).filename()).string();
    path = pack_path_for(onnx);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // "fp32" names the as-stored format: a MatMulNBits model's blocks stay as the file quantized them.
  const std::string what = so.weights == WeightFormat::AsStored ? "weights as stored" : o.weights + " weights";
  std::cout << "packed " << what << ": " << path << " (" << static_cast<double>(fs::file_size(path)) / 1e9 << " GB, " << s
            << " s); loads of " << fs::path(onnx).parent_path().string() << " now map it\n";
  return 0;
}

}  // namespace tern::cli
