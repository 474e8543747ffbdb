// Progress of long work — a GGUF import, a quantization, preparing a model's weights at load (and so a
// pack), an evaluation: `progress(done, total)` after each step, done reaching total at the end. The library
// never prints; the CLI draws a bar on a terminal (tools/cli/progress.h). Empty: nothing is reported.
#pragma once
#include <cstdint>
#include <functional>

namespace tern {

using Progress = std::function<void(int64_t done, int64_t total)>;

}  // namespace tern
