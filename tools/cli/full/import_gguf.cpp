#include "tools/cli/cli.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>

#include "convert/gguf_import.h"
#include "core/output_files.h"

namespace tern::cli {
namespace fs = std::filesystem;

int import_gguf(int argc, char** argv) {
  if (argc != 4) fail("usage: tern import-gguf FILE.gguf OUT_DIR");
  const auto t0 = std::chrono::steady_clock::now();
  StagedFolder out(argv[3]);  // all or nothing: a kill leaves the earlier folder or the new one
  convert::import_gguf(argv[2], out.path().string());
  out.commit();
  std::cout << "wrote " << argv[3] << " in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}

std::string imported_gguf_folder(const std::string& gguf) {
  // One folder per file as it is now: its path, size and modification time name it, so an edited or
  // replaced file is imported again, and the same file is imported once.
  const fs::path file = fs::canonical(gguf);
  const auto key = std::to_string(fs::file_size(file)) + "/" + std::to_string(fs::last_write_time(file).time_since_epoch().count()) + "/" +
                   file.string();
  char id[17];
  std::snprintf(id, sizeof id, "%016zx", std::hash<std::string>{}(key));
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const fs::path cache = xdg && *xdg ? fs::path(xdg) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : ".") / ".cache";
  const fs::path dir = cache / "tern" / "gguf" / (file.stem().string() + "-" + id);
  if (fs::exists(dir / "model.onnx")) return dir.string();
  const auto t0 = std::chrono::steady_clock::now();
  fs::create_directories(dir.parent_path());
  StagedFolder out(dir.string());
  convert::import_gguf(file.string(), out.path().string());
  out.commit();
  std::cerr << "tern: imported " << gguf << " into " << dir.string() << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s (once: later runs of this file read that folder; `tern import-gguf` picks the folder)\n";
  return dir.string();
}

}  // namespace tern::cli
