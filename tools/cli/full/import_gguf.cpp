#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>

#include "convert/gguf_import.h"
#include "core/output_files.h"

namespace tern::cli {

int import_gguf(int argc, char** argv) {
  if (argc != 4) fail("usage: tern import-gguf FILE.gguf OUT_DIR");
  const auto t0 = std::chrono::steady_clock::now();
  StagedFolder out(argv[3]);  // all or nothing: a kill leaves the earlier folder or the new one
  convert::import_gguf(argv[2], out.path().string());
  out.commit();
  std::cout << "wrote " << argv[3] << " in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}

}  // namespace tern::cli
