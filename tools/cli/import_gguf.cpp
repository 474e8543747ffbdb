#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>

#include "llm/gguf_import.h"

namespace tern::cli {

int import_gguf(int argc, char** argv) {
  if (argc != 4) fail("usage: tern import-gguf FILE.gguf OUT_DIR");
  const auto t0 = std::chrono::steady_clock::now();
  llm::import_gguf(argv[2], argv[3]);
  std::cout << "wrote " << argv[3] << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}

}  // namespace tern::cli
