// libFuzzer entry point of tern_fuzz, one binary for every target: the environment's TERN_FUZZ_TARGET
// names which (scripts/fuzz.sh sets it; "list" prints them). The fuzzer's bytes go to that target's
// parser; a tern::Error is the expected answer to bad input, anything else escapes and libFuzzer reports
// it as a crash.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "fuzz/targets.h"

namespace {
const tern::fuzz::Target* g_target = nullptr;
bool g_print = false;  // TERN_FUZZ_PRINT=1: each input's error on stderr (what tests/bad_inputs/expected.txt quotes)
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* name = std::getenv("TERN_FUZZ_TARGET");
  g_print = std::getenv("TERN_FUZZ_PRINT") != nullptr;
  g_target = tern::fuzz::find_target(name ? name : "");
  if (!g_target) {
    const bool listing = name && std::string(name) == "list";
    if (!listing) std::fprintf(stderr, "TERN_FUZZ_TARGET='%s' is not a target; the targets:\n", name ? name : "");
    for (const auto& t : tern::fuzz::targets()) std::fprintf(listing ? stdout : stderr, "  %-20s %s\n", t.name, t.input);
    std::exit(listing ? 0 : 2);
  }
  tern::set_process_memory_limit(tern::fuzz::kMemoryCap);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    g_target->run(data, size);
  } catch (const tern::Error& e) {
    if (g_print) std::fprintf(stderr, "tern::Error: %s\n", e.what());
  }
  return 0;
}
