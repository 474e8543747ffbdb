// Progress bars for the long commands: on stderr, only when it is a terminal and --quiet was not given, so
// pipes, logs and scripts see none.
#include "tools/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace tern::cli {
namespace {

bool quiet_flag = false;  // (the process's command line: main.cpp takes --quiet off it)

}  // namespace

void set_quiet(bool quiet) { quiet_flag = quiet; }

Progress terminal_progress(const std::string& what) {
  if (quiet_flag || !isatty(STDERR_FILENO)) return {};
  struct Bar {
    std::string what;
    std::chrono::steady_clock::time_point last{};
    bool open = false;
  };
  auto bar = std::make_shared<Bar>(Bar{what});
  return [bar](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = done >= total;
    if (!last && bar->open && now - bar->last < std::chrono::milliseconds(100)) return;  // at most 10 redraws a second
    bar->last = now;
    bar->open = !last;
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * std::min(done, total) / total) : kWidth;
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %lld/%lld%s", bar->what.c_str(), filled, "##############################", kWidth - filled,
                 "", total > 0 ? static_cast<int>(100 * std::min(done, total) / total) : 100, static_cast<long long>(done),
                 static_cast<long long>(total), last ? "\n" : "");
    std::fflush(stderr);
  };
}

SessionOptions with_load_progress(SessionOptions so, const std::string& what) {
  so.on_load_progress = terminal_progress(what);
  return so;
}

}  // namespace tern::cli
