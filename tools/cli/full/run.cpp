#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "diagnostics/test_data.h"

namespace tern::cli {

int run(int argc, char** argv) {
  Flags flags = parse(argc, argv, *find_command("run"));
  const std::string model = flags.get("model");
  if (!flags.has("input-dir")) fail("run needs --input-dir DIR");
  apply_memory_cap(flags);
  SessionOptions opt;
  if (flags.has("threads")) opt.threads = static_cast<int>(flags.integer("threads", 1));
  Profiler prof;
  if (flags.has("profile")) prof.attach(opt);
  Session session(model, opt);
  auto feeds = read_input_dir(session, flags.get("input-dir"));
  const auto t0 = std::chrono::steady_clock::now();
  auto outputs = session.run(feeds);
  if (flags.has("profile")) {
    prof.add_step_time("run", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
    write_profile(prof, machine_peaks(threads), flags, model + " on " + flags.get("input-dir"));
  }
  for (const auto& [name, t] : outputs.items) std::cout << name << "  " << dtype_name(t.dtype()) << "  " << shape_str(t.shape()) << "\n";
  if (flags.has("output-dir")) write_output_dir(outputs, flags.get("output-dir"));
  auto expected = read_output_dir(flags.get("input-dir"));
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && i < outputs.size(); ++i) {
    std::string d = compare_tensors(expected[i], outputs[i]);
    std::cout << "  " << outputs.items[i].first << ": " << (d.empty() ? "matches output_" + std::to_string(i) + ".pb" : d) << "\n";
    mismatches += !d.empty();
  }
  return mismatches ? 4 : 0;
}

}  // namespace tern::cli
