// libFuzzer entry point of tern_fuzz, one binary for every target: the environment's TERN_FUZZ_TARGET
// names which (scripts/fuzz.sh sets it). The fuzzer's bytes go to that target's parser; a tern::Error is
// the expected answer to bad input, anything else escapes and libFuzzer reports it as a crash.
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tern::fuzz::Target* target = [] {
    const char* name = std::getenv("TERN_FUZZ_TARGET");
    const tern::fuzz::Target* t = tern::fuzz::find_target(name ? name : "");
    if (!t) {
      std::fprintf(stderr, "TERN_FUZZ_TARGET='%s' is not a target; the targets:\n", name ? name : "");
      for (const auto& x : tern::fuzz::targets()) std::fprintf(stderr, "  %-20s %s\n", x.name, x.input);
      std::exit(2);
    }
    return t;
  }();
  try {
    target->run(data, size);
  } catch (const tern::Error&) {
  }
  return 0;
}
