#include "tools/cli/cli.h"

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "kernels/cpu/isa.h"
#include "llm/generator.h"

namespace tern::cli {

int bench(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("bench"));
  const int threads = f.has("threads") ? static_cast<int>(f.integer("threads", 1)) : static_cast<int>(std::thread::hardware_concurrency());
  if (f.has("machine")) {
#ifdef TERN_MINIMAL  // (the peaks are what profile and bench-op read; 9.8 KB of the static CLI's 3 MiB)
    fail_unsupported("--machine: this build (TERN_MINIMAL) has no profile or bench-op to read the peaks");
#endif
    const MachinePeaks m = machine_peaks(threads, true);
    std::cout << "peak fp32: " << m.gflops << " GFLOP/s; read bandwidth: " << m.gb_s << " GB/s; with " << threads
              << " thread(s) (cached for profile and bench-op)\n"
              << "kernels: ISA tier " << kernels::isa_name(kernels::default_isa()) << " (CPU: " << kernels::cpu_feature_list()
              << "; TERN_ISA=" << kernels::isa_tier_names("|") << " caps it)\n";
    return 0;
  }
  if (!f.has("model")) fail("tern bench needs a model: MODEL or --model PATH (or --machine)");
  // The bandwidth probe in a process forked now, while this one is small: its buffer never counts as the run's.
  std::optional<BandwidthProber> prober;
  if (!f.has("no-probe")) prober.emplace(threads);
  const double bandwidth_before = prober ? prober->measure() : 0;
  const llm::ModelFiles files = model_files(f.get("model"), f.get("dtype"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  const int64_t prompt_n = f.integer("prompt-tokens", 1), new_n = f.integer("new-tokens", 1);
  if (prompt_n < 1 || new_n < 2) fail("bench needs --prompt-tokens >= 1 and --new-tokens >= 2");
  llm::ModelConfig cfg = llm::read_model_config(dir);
  SessionOptions so = llm::decoder_session_options(decoder_options(f), cfg, true);
  so.threads = threads;
  const auto t0 = std::chrono::steady_clock::now();
  Session session(model_path, with_load_progress(so));
  warn_if_graph_cache(session);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double load_peak_gb = static_cast<double>(peak_rss_bytes()) / 1e9;  // the load's own peak: what a small device must hold first
  const std::vector<int64_t> prompt = synthetic_prompt(cfg, prompt_n);
  llm::Generator gen(session, cfg);
  llm::GenerateOptions o;
  o.max_new_tokens = new_n;  // no eos: always new_n tokens
  // The first run after load: its prefill is the cold time to first token (weight pages faulted in,
  // buffers allocated — unless --prefault took the faults at load); the measured run after it is warm.
  llm::GenerateOptions warm;
  warm.max_new_tokens = 1;
  // What the two generations below will take for activations, forecast before either runs.
  auto runs = gen.run_shapes(1, prompt_n, warm), measured = gen.run_shapes(1, prompt_n, o);
  runs.insert(runs.end(), measured.begin(), measured.end());
  const ActivationForecast::Result forecast = session.forecast_activations(runs);
  const double cold_prefill_ms = gen.generate({prompt}, warm).prefill_ms;
  // On a device: the bytes moved host↔device by the decode steps after the first (per token below).
  int64_t token = 0, up = 0, down = 0;
  const TransferStats* moved = session.device_transfers();
  const auto r = gen.generate({prompt}, o, [&](size_t, int64_t) {
    if (moved && ++token == 2) up = -moved->to_device, down = -moved->to_host;
    return true;
  });
  if (moved) up += moved->to_device, down += moved->to_host;
  const double per_step = r.decode_steps > 1 ? 1.0 / static_cast<double>(r.decode_steps - 1) : 0.0;
  const double rss_gb = static_cast<double>(peak_rss_bytes()) / 1e9;
  const MemoryUse mem = session.memory_use();
  const double owned_gb = static_cast<double>(owned_host_bytes()) / 1e9;
  const ResidentMemory resident = resident_memory();
  // A shared machine's bandwidth drifts: measured again after the run, the better of the two counts.
  const double bandwidth_after = prober ? prober->measure() : 0;
  const double bandwidth = std::max(bandwidth_before, bandwidth_after);
  const double probe_peak_gb = prober ? static_cast<double>(prober->finish()) / 1e9 : 0;
  const double prefill_tps = 1000.0 * static_cast<double>(prompt_n) / r.prefill_ms;
  const double decode_tps = 1000.0 * static_cast<double>(r.decode_steps) / r.decode_ms;
  const double gbps = static_cast<double>(r.weight_bytes_per_token + r.cache_bytes_per_token) * decode_tps / 1e9;
  if (f.has("json")) {
    nlohmann::json j{{"model", model_path},
                     {"threads", threads},
                     {"prompt_tokens", prompt_n},
                     {"new_tokens", new_n},
                     {"prefill_tok_s", prefill_tps},
                     {"decode_tok_s", decode_tps},
                     {"decode_ms_per_token", 1000.0 / decode_tps},
                     {"weight_bytes_per_token", r.weight_bytes_per_token},
                     {"cache_bytes_per_token", r.cache_bytes_per_token},
                     {"achieved_gb_s", gbps},
                     {"read_bandwidth_gb_s", bandwidth},
                     {"read_bandwidth_before_after_gb_s", {bandwidth_before, bandwidth_after}},
                     {"probe_peak_rss_gb", probe_peak_gb},
                     {"load_s", load_s},
                     {"peak_rss_gb", rss_gb},
                     {"load_peak_rss_gb", load_peak_gb},
                     {"first_prefill_ms", cold_prefill_ms},
                     {"prefill_ms", r.prefill_ms},
                     {"isa", kernels::isa_name(kernels::default_isa())},
                     {"memory_gb",
                      {{"resident_anon", resident.anon / 1e9},
                       {"resident_file", resident.file / 1e9},
                       {"owned", owned_gb},
                       {"packed_weights", mem.packed_weights / 1e9},
                       {"owned_constants", mem.owned_constants / 1e9},
                       {"mapped_constants", mem.mapped_constants / 1e9},
                       {"mapped_prepared", mem.mapped_prepared / 1e9},
                       {"kv_cache", mem.kv_cache / 1e9},
                       {"activations", mem.activations / 1e9},
                       {"activations_forecast", static_cast<double>(forecast.pool_growth) / 1e9},
                       {"other_owned", owned_gb - mem.owned() / 1e9}}}};
    if (session.weights().pack()) j["pack"] = session.weights().pack()->path();
    if (moved) {
      j["device"] = f.get("device");
      j["host_to_device_bytes_per_token"] = static_cast<double>(up) * per_step;
      j["device_to_host_bytes_per_token"] = static_cast<double>(down) * per_step;
      j["nodes_on_host"] = session.host_nodes();
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("model       %s (%d thread(s), %s)\n", model_path.c_str(), threads,
              session.passes().cached_layers ? "ring-buffer KV cache" : "the graph's KV cache");
  std::printf("prefill     %lld tokens: %.1f tok/s\n", static_cast<long long>(prompt_n), prefill_tps);
  std::printf("decode      %lld tokens: %.2f tok/s (%.1f ms/token)\n", static_cast<long long>(r.decode_steps), decode_tps,
              1000.0 / decode_tps);
  std::printf("per token   %.3f GB of weights + %.3f GB of KV cache read\n", r.weight_bytes_per_token / 1e9, r.cache_bytes_per_token / 1e9);
  if (prober)
    std::printf(
        "bandwidth   %.1f GB/s achieved = %.0f%% of the %.1f GB/s this machine reads (%.1f before, %.1f after; the probe's\n"
        "            process peaked at %.2f GB, apart from this run's)\n",
        gbps, 100.0 * gbps / bandwidth, bandwidth, bandwidth_before, bandwidth_after, probe_peak_gb);
  else std::printf("bandwidth   %.1f GB/s achieved (the machine's own not measured: --no-probe)\n", gbps);
  std::printf("load        %.2f s; peak RSS %.2f GB (%.2f GB by the end of the load)\n", load_s, rss_gb, load_peak_gb);
  std::printf("first run   prefill %.1f ms (cold: the first after load), then %.1f ms\n", cold_prefill_ms, r.prefill_ms);
  std::printf(
      "memory      resident now %.2f GB anonymous + %.2f GB file pages; tern owns %.2f GB: packed weights %.2f,\n"
      "            constants %.2f (and %.2f mapped from the model's files), KV cache %.3f, activations %.3f (forecast\n"
      "            before the first run: %.3f), other %.3f\n",
      resident.anon / 1e9, resident.file / 1e9, owned_gb, mem.packed_weights / 1e9, mem.owned_constants / 1e9, mem.mapped_constants / 1e9,
      mem.kv_cache / 1e9, mem.activations / 1e9, static_cast<double>(forecast.pool_growth) / 1e9, owned_gb - mem.owned() / 1e9);
  if (session.weights().pack())
    std::printf("pack        %s: %.2f GB of prepared weights %s\n", session.weights().pack()->path().c_str(),
                (session.weights().pack()->in_memory() ? mem.packed_weights : mem.mapped_prepared) / 1e9,
                session.weights().pack()->in_memory() ? "read into memory from it (--prefault)" : "mapped from it");
  if (moved) {
    std::printf("device      %s: per decode token %.0f bytes to the device, %.0f bytes back; %zu node(s) on the CPU\n",
                f.get("device").c_str(), static_cast<double>(up) * per_step, static_cast<double>(down) * per_step,
                session.host_nodes().size());
    for (const auto& n : session.host_nodes()) std::printf("            on the CPU: %s\n", n.c_str());
  }
  return 0;
}

}  // namespace tern::cli
