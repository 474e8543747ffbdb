#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "diagnostics/profile_compare.h"
#include "llm/generator.h"

namespace tern::cli {

int profile(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("profile"));
  if (f.has("compare")) {
    const std::string pair = f.get("compare");  // (its two values, a line each)
    const size_t cut = pair.find('\n');
    compare_profiles(read_profile_trace(pair.substr(0, cut)), read_profile_trace(pair.substr(cut + 1)), std::cout);
    return 0;
  }
  if (!f.has("model")) fail("tern profile needs a model: MODEL or --model PATH (or --compare A.json B.json)");
  const llm::ModelFiles files = model_files(f.get("model"), f.get("dtype"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  const int threads = f.has("threads") ? static_cast<int>(f.integer("threads", 1)) : static_cast<int>(std::thread::hardware_concurrency());
  const int64_t prompt_n = f.integer("prompt-tokens", 1), new_n = f.integer("new-tokens", 1);
  if (prompt_n < 1 || new_n < 2) fail("profile needs --prompt-tokens >= 1 and --new-tokens >= 2");
  const std::string steps = f.get("steps");
  if (steps != "prefill" && steps != "decode" && steps != "both") fail("--steps must be prefill, decode or both");
  const MachinePeaks machine = machine_peaks(threads);
  llm::ModelConfig cfg = llm::read_model_config(dir);
  SessionOptions so = llm::decoder_session_options(decoder_options(f), cfg, true);
  so.threads = threads;
  Profiler prof;
  prof.attach(so);
  Session session(model_path, with_load_progress(so));
  warn_if_graph_cache(session);
  llm::Generator gen(session, cfg);
  const std::vector<int64_t> prompt = synthetic_prompt(cfg, prompt_n);
  llm::GenerateOptions o;
  o.max_new_tokens = 2;
  gen.generate({{prompt.begin(), prompt.begin() + std::min<int64_t>(prompt_n, 4)}}, o);  // pages weights in, plans made
  prof.clear();
  o.max_new_tokens = steps == "prefill" ? 1 : new_n;
  auto phase = [&](const std::string& p) { return steps == "both" || steps == p ? p : std::string(); };
  prof.set_phase(phase("prefill"));
  auto mark = std::chrono::steady_clock::now();
  auto ms_since = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - mark).count(); };
  bool first = true;
  gen.generate({prompt}, o, [&](size_t, int64_t) {
    if (first) {  // the prefill run is over; every run from here decodes one token
      prof.add_step_time("prefill", ms_since());
      prof.set_phase(phase("decode"));
      mark = std::chrono::steady_clock::now();
      first = false;
    }
    return true;
  });
  if (steps != "prefill") prof.add_step_time("decode", ms_since());
  std::printf("%s: %lld prompt tokens, %lld decode steps, %d thread(s)\nmachine: %.1f GFLOP/s peak fp32, %.1f GB/s read (%s)\n",
              model_path.c_str(), static_cast<long long>(prompt_n), static_cast<long long>(o.max_new_tokens - 1), threads, machine.gflops,
              machine.gb_s, machine.source.c_str());
  if (session.device_transfers()) print_host_nodes(session, f.get("device"));
  write_profile(prof, machine, f,
                model_path + ": " + std::to_string(prompt_n) + " prompt tokens, " + std::to_string(o.max_new_tokens - 1) +
                    " decode steps, weights " + (f.has("weights") ? f.get("weights") : "as stored") + ", device " + f.get("device"));
  return 0;
}

}  // namespace tern::cli
