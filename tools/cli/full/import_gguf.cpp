#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>

#include "convert/gguf_import.h"
#include "core/output_files.h"

namespace tern::cli {

int import_gguf(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("import-gguf"));
  const auto t0 = std::chrono::steady_clock::now();
  StagedFolder out(f.get("out"));  // all or nothing: a kill leaves the earlier folder or the new one
  convert::import_gguf(f.get("model"), out.path().string(), terminal_progress("importing"));
  out.commit();
  std::cout << "wrote " << f.get("out") << " in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}

std::string imported_gguf_folder(const std::string& gguf) {
  const auto t0 = std::chrono::steady_clock::now();
  bool imported = false;
  const std::string dir = convert::gguf_model_folder(gguf, &imported, terminal_progress("importing"));
  if (imported)
    std::cerr << "tern: imported " << gguf << " into " << dir << " in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s (once: later runs of this file read that folder; `tern import-gguf` picks the folder)\n";
  return dir;
}

}  // namespace tern::cli
