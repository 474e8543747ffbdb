// The `tern` command line: one function per subcommand, each a thin layer over the library.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "passes/quantize.h"
#include "kernels/cpu/isa.h"
#include "llm/chat_template.h"
#include "llm/evaluate.h"
#include "llm/generator.h"
#include "llm/gguf_import.h"
#include "llm/llama2c.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"
#include "ops/op.h"
#include "runtime/machine.h"
#include "runtime/op_bench.h"
#include "runtime/device_executor.h"
#include "runtime/profile_compare.h"
#include "runtime/profile_report.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "runtime/test_data.h"

namespace {

const char* kUsage = R"(usage: tern <command> [options]

commands:
  run MODEL.onnx --input-dir DIR [--output-dir OUT] [--threads N] [--profile [--trace F.json] [--html F.html]]
      Runs the model on input_<i>.pb TensorProtos (the ONNX test layout) and writes output_<i>.pb.
      When DIR also holds output_<i>.pb, compares with them and exits 4 on a mismatch.
      --profile prints the run's per-op-type and per-node table (see profile).
  inspect MODEL.onnx [--fusions [--window W]] [--device opencl[:N]]
      Prints opsets, inputs/outputs with shapes, an op histogram and the ops tern cannot run.
      --device runs a short greedy generation there and lists the nodes that stayed on the CPU.
      --fusions loads the model as `generate --window W` would (W defaults to the model's context
      length) and lists each rewrite the fusion passes made, node by node, or why none matched.
  generate [--model PATH] [--prompt TEXT]... [--prompt-file F] [--ids "1,2,3;4,5"] [--max-new-tokens N]
           [--greedy | --temperature T --top-k K --top-p P --min-p P --seed S] [--repetition-penalty R]
           [--num-beams B [--length-penalty L] [--early-stopping]]
           [--chat [--system TEXT]] [--stop TEXT]... [--window W [--sinks S] [--kv-dtype fp32|fp16]] [--prefill-chunk N]
           [--weights fp32|fp16|bf16|int8|int4] [--activations auto|fp32|int8] [--device cpu|opencl[:N]] [--threads N]
           [--no-cache] [--json [--top-logits N]] [--stats]
      Generates text from a model folder (or .onnx file; default: tern's own models/default). Text
      streams to stdout; the last line on stderr gives prefill and decode tokens/s. Sampling follows
      the flags, else the folder's generation_config.json (do_sample, temperature, top_k, top_p,
      repetition_penalty), else greedy. --ids rows of unequal length are left-padded.
      --chat wraps each prompt as a user turn in the model's chat format (Llama-3, ChatML, Llama-2,
      Phi-3); --stop ends a sequence when its new text contains TEXT. The KV cache is tern's ring
      buffer whenever the model's attention allows: each layer's keys (before RoPE) in a window of W
      tokens (default: the model's context length; allocated as it fills) with S attention sinks
      (default 4) once it slides, stored as fp32 or fp16 (--kv-dtype), so generation can run past the
      model's context with bounded memory. --window 0, --no-cache and beam search use the graph's own
      cache. --weights converts the MatMul weights at load: fp16/bf16 halve the bytes a token streams,
      int8/int4 block-quantize them (block 32, asymmetric, as MatMulNBits) to a quarter / an eighth.
      --activations: decode steps of block-quantized products quantize their activations to int8 per
      block (integer dot products: faster, slightly less exact) where the model's MatMulNBits ask for it
      (accuracy_level 4, as ONNX Runtime does; GGUF imports do, as llama.cpp computes) — or always
      (int8), or never (fp32). Prefill stays fp32.
      --stats adds the bytes a decode step moves for weights and for the KV cache. --top-logits N adds
      each step's N highest logits per sequence to the JSON ([[token, logit], ...] per step), to tell a
      near-tie from a real difference where another runtime's greedy tokens part from tern's.
      --device opencl runs every node the OpenCL device can take there (weights, activations and the
      ring KV cache stay in device memory; greedy decoding moves one token id each way per step, top-k
      sampling k scores and ids back), the others on the CPU (bench and inspect --device list them).
  bench --model PATH [--prompt-tokens 128] [--new-tokens 64] [--threads N] [--window W] [--weights F]
        [--device cpu|opencl[:N]] [--json]
        (the KV cache as `generate` chooses it; --window 0 for the graph's own)
  bench --machine [--threads N]
      Prefill and decode speed on a synthetic prompt (greedy, no early stop), the weight bytes a decode
      step reads, the bandwidth that achieves against the machine's measured read bandwidth, load
      time and peak memory. --machine measures the machine's peak fp32 GFLOP/s and read bandwidth and
      caches them (~/.cache/tern/machine.json) for profile and bench-op's rooflines.
  profile --model PATH [--prompt-tokens 128] [--new-tokens 16] [--steps prefill|decode|both] [--threads N]
          [--weights F] [--window W] [--top N] [--trace FILE.json] [--html FILE.html] [--svg FILE.svg]
      Per op type and per node (the N slowest, default 10), for prefill and for decode: calls, time,
      share, GFLOP and GB moved (from shapes and dtypes), arithmetic intensity, achieved GFLOP/s and
      GB/s, and the share of this machine's roofline (bench --machine's peaks, measured on first use).
      --trace writes a Chrome trace (Perfetto) with ONNX Runtime's event fields plus kernel and phase;
      --html a self-contained report (roofline chart, time by op type, per-layer timelines); --svg the
      roofline chart alone. The profiler's own overhead is printed last.
  profile --compare A.json B.json
      Per-op-type time deltas between two traces: tern's (--trace) or ONNX Runtime profiles.
  bench-op OP --shape D1,D2,... [--dtype fp32|fp16] [--weights F] [--kv-dtype fp32|fp16] [--threads N]
           [--device cpu|opencl[:N]]
      One op alone at a shape, as a session runs it: median ms, GFLOP/s, GB/s, roofline %. OPs:
)";
// (bench-op's list: op_bench_usage())
const char* kUsageTail = R"(  eval --model PATH --text FILE [--context N] [--second-half] [--weights F] [--activations A] [--threads N]
      Perplexity of the text under the model, computed by tern: tokenized with the model's tokenizer
      (BOS first), cut into windows of N tokens (default: the model's context length), every
      next-token prediction scored. --second-half scores as llama.cpp's llama-perplexity does: whole
      windows only, the predictions of their second half.
  quantize --model PATH --out DIR [--bits 4|8] [--block 32]
      Writes DIR/model.onnx (+ model.onnx_data): every MatMul with a constant float weight becomes
      com.microsoft MatMulNBits (asymmetric, a scale and zero point per block) — ONNX Runtime runs it
      too. The folder's other files (config, tokenizer) are copied.
  convert llama2c MODEL.bin --tokenizer TOKENIZER.bin --out DIR
      Writes a llama2.c checkpoint as an ONNX model folder (Optimum layout, standard ops).
  chat MODEL_DIR [--system TEXT] [--max-new-tokens N] [--greedy | sampling flags as generate] [--window W] [--stats]
      An interactive conversation in the model's chat format. Each turn is prefilled on top of the KV
      cache the last one left (only the new turn is fed), the answer streams; Ctrl-C stops an answer,
      Ctrl-D quits, /stats toggles the speed line, /reset forgets the conversation.
  import-gguf FILE.gguf OUT_DIR
      Writes a llama.cpp GGUF (Llama family) as an ONNX model folder: the same graph, the weights' exact
      values (Q4_0/Q4_1/Q8_0 as MatMulNBits blocks, others as float32), config.json, tokenizer.json from
      the GGUF vocabulary and the chat template.
  devices
      Lists the OpenCL platforms and devices (opencl:N) with their memory, work-group size and fp16.
)";

std::string usage() { return std::string(kUsage) + tern::op_bench_usage() + kUsageTail; }

// --name value flags, plus bare boolean flags; repeated flags accumulate.
struct Flags {
  std::map<std::string, std::vector<std::string>> values;
  std::set<std::string> switches;
  bool has(const std::string& k) const { return values.count(k) || switches.count(k); }
  std::string get(const std::string& k, const std::string& dflt = "") const {
    auto it = values.find(k);
    return it == values.end() ? dflt : it->second.back();
  }
};

Flags parse(int argc, char** argv, int first, const std::set<std::string>& switches) {
  Flags f;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) tern::fail("unexpected argument '", a, "'");
    std::string k = a.substr(2);
    if (switches.count(k)) { f.switches.insert(k); continue; }
    if (i + 1 >= argc) tern::fail("flag ", a, " needs a value");
    f.values[k].push_back(argv[++i]);
  }
  return f;
}

std::string io_line(const tern::IOInfo& io) {
  return io.name + "  " + tern::dtype_name(io.dtype) + "  " + (io.shape ? tern::sym_shape_str(*io.shape) : "[?]");
}

// The profile's tables on stdout, then the files --trace / --html / --svg ask for.
void write_profile(const tern::Profiler& prof, const tern::MachinePeaks& machine, const Flags& f, const std::string& title) {
  prof.write_table(std::cout, machine, std::stoi(f.get("top", "10")));
  if (f.has("trace")) {
    prof.write_chrome_trace(f.get("trace"));
    std::cout << "trace: " << f.get("trace") << " (Perfetto, chrome://tracing; ONNX Runtime's profile fields)\n";
  }
  if (f.has("html")) {
    tern::write_html_report(prof, machine, title, f.get("html"));
    std::cout << "report: " << f.get("html") << "\n";
  }
  if (f.has("svg")) {
    tern::write_roofline_svg(prof, machine, f.get("svg"));
    std::cout << "roofline: " << f.get("svg") << "\n";
  }
}

int cmd_run(int argc, char** argv) {
  if (argc < 3) tern::fail("run needs a model path");
  Flags flags = parse(argc, argv, 3, {"profile"});
  if (!flags.has("input-dir")) tern::fail("run needs --input-dir DIR");
  tern::SessionOptions opt;
  if (flags.has("threads")) opt.threads = std::stoi(flags.get("threads"));
  tern::Profiler prof;
  if (flags.has("profile")) prof.attach(opt);
  tern::Session session(argv[2], opt);
  auto feeds = tern::read_input_dir(session, flags.get("input-dir"));
  const auto t0 = std::chrono::steady_clock::now();
  auto outputs = session.run(feeds);
  if (flags.has("profile")) {
    prof.add_step_time("run", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
    write_profile(prof, tern::machine_peaks(threads), flags, std::string(argv[2]) + " on " + flags.get("input-dir"));
  }
  for (const auto& [name, t] : outputs.items)
    std::cout << name << "  " << tern::dtype_name(t.dtype()) << "  " << tern::shape_str(t.shape()) << "\n";
  if (flags.has("output-dir")) tern::write_output_dir(outputs, flags.get("output-dir"));
  auto expected = tern::read_output_dir(flags.get("input-dir"));
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && i < outputs.size(); ++i) {
    std::string d = tern::compare_tensors(expected[i], outputs[i]);
    std::cout << "  " << outputs.items[i].first << ": " << (d.empty() ? "matches output_" + std::to_string(i) + ".pb" : d) << "\n";
    mismatches += !d.empty();
  }
  return mismatches ? 4 : 0;
}

// A folder (model.onnx, or the decoder genai_config.json names, or its only .onnx) or an .onnx file.
// tern's own trained model (models/default, tools/train_default_model.py): next to the working directory
// or to the source tree the binary was built in (build/tern → ../models/default).
std::string default_model(const char* argv0) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  for (const fs::path& p : {fs::path("models/default"), (ec ? fs::path(argv0) : exe).parent_path() / ".." / "models" / "default"})
    if (fs::exists(p / "model.onnx")) return p.lexically_normal().string();
  tern::fail("no --model given and no models/default found (run from the tern folder, or give --model PATH)");
}

std::string resolve_model(const std::string& path, std::string* dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) tern::fail("model '", path, "' does not exist");
  if (!fs::is_directory(path)) {
    *dir = fs::path(path).parent_path().string();
    return path;
  }
  *dir = path;
  std::ifstream genai(fs::path(path) / "genai_config.json");
  if (genai) {
    auto j = nlohmann::json::parse(genai, nullptr, false);
    if (!j.is_discarded() && j.contains("model") && j["model"].contains("decoder") &&
        j["model"]["decoder"].contains("filename"))
      return (fs::path(path) / j["model"]["decoder"]["filename"].get<std::string>()).string();
  }
  if (fs::exists(fs::path(path) / "model.onnx")) return (fs::path(path) / "model.onnx").string();
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(path))
    if (e.path().extension() == ".onnx") found.push_back(e.path().string());
  if (found.size() == 1) return found[0];
  tern::fail("'", path, "' holds ", found.size(), " .onnx files and no model.onnx: name the file");
}

std::vector<std::vector<int64_t>> parse_ids(const std::string& text) {
  std::vector<std::vector<int64_t>> rows(1);
  std::string num;
  auto flush = [&] {
    if (num.empty()) return;
    try {
      rows.back().push_back(std::stoll(num));
    } catch (const std::exception&) {
      tern::fail("--ids: '", num, "' is not a token id");
    }
    num.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ') flush();
    else if (c == ';') { flush(); rows.emplace_back(); }
    else num += c;
  }
  flush();
  for (const auto& r : rows)
    if (r.empty()) tern::fail("--ids: empty row in '", text, "'");
  return rows;
}

// --weights, and the KV cache: tern's ring buffer unless the model's attention is not one it can take over (then the
// graph's own past/present), beam search or --no-cache is asked for, or --window 0. Without --window
// the window is the model's context length (4096 when unknown): the ring allocates as it fills.
void set_generation_options(const Flags& f, const tern::llm::ModelConfig& cfg, tern::SessionOptions& so, bool ring_possible) {
  so.last_position_output = "logits";  // the generator reads no other position
  so.device = tern::parse_device(f.get("device", "cpu"));
  so.weights = tern::parse_weight_format(f.get("weights", "fp32"));
  so.activations = tern::parse_activation_format(f.get("activations", "auto"));
  so.kv_sinks = std::stoll(f.get("sinks", "4"));
  const std::string kv = f.get("kv-dtype", "fp32");
  if (kv != "fp32" && kv != "fp16") tern::fail("--kv-dtype must be fp32 or fp16, got '", kv, "'");
  so.kv_dtype = kv == "fp16" ? tern::DType::Float16 : tern::DType::Float32;
  if (f.has("window")) {
    so.kv_window = std::stoll(f.get("window"));
    if (so.kv_window < 0 || so.kv_sinks < 0) tern::fail("--window and --sinks must not be negative");
    if (so.kv_window > 0 && !ring_possible) tern::fail("--window needs the KV cache and no beam search");
  } else if (ring_possible) {
    so.kv_window = cfg.context_length > 0 ? cfg.context_length : 4096;
    so.kv_window_required = false;
  }
}

// One warning when a decoder's attention missed the ring-buffer cache: what it costs, and per layer where
// matching stopped. Never a silent fallback.
void warn_if_graph_cache(const tern::Session& s) {
  if (s.fusion_misses().empty()) return;
  std::cerr << "tern: warning: the attention did not fuse into tern's ring-buffer KV cache; this model runs on the graph's "
               "own past/present cache instead: no sliding window (generation stops at the context length), keys and "
               "values copied by Concat every step. Where matching stopped:\n";
  for (const auto& miss : s.fusion_misses()) std::cerr << "  " << miss.str() << "\n";
}

int cmd_quantize(int argc, char** argv) {
  namespace fs = std::filesystem;
  Flags f = parse(argc, argv, 2, {});
  if (!f.has("model") || !f.has("out")) tern::fail("quantize needs --model PATH and --out DIR");
  std::string dir;
  const std::string model_path = resolve_model(f.get("model"), &dir);
  const fs::path out = f.get("out");
  if (fs::exists(out / "model.onnx")) tern::fail("'", (out / "model.onnx").string(), "' exists; choose another --out");
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir)) {  // config, tokenizer, …
    const std::string name = e.path().filename().string();
    const bool model_file = e.path().extension() == ".onnx" || name.find(".onnx_data") != std::string::npos ||
                            name.find(".onnx.data") != std::string::npos;
    if (e.is_regular_file() && !model_file) fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing);
  }
  const int n = tern::quantize_model(model_path, (out / "model.onnx").string(), std::stoll(f.get("bits", "4")),
                                     std::stoll(f.get("block", "32")));
  std::cout << "quantized " << n << " MatMul weight(s) to " << f.get("bits", "4") << " bits, block " << f.get("block", "32")
            << ": " << (out / "model.onnx").string() << "\n";
  return 0;
}

// bench's and profile's prompt: n valid token ids spread over the vocabulary (bench/vs_ort.sh feeds ONNX
// Runtime the same ones).
std::vector<int64_t> synthetic_prompt(const tern::llm::ModelConfig& cfg, int64_t n) {
  const int64_t vocab = cfg.vocab_size > 2 ? cfg.vocab_size : 2;
  std::vector<int64_t> prompt(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) prompt[static_cast<size_t>(i)] = 1 + (i * 7919) % (vocab - 1);
  return prompt;
}

// Which nodes a device session's last run left on the CPU (their op cannot run on the device, or not
// with these inputs), and why that matters.
void print_host_nodes(const tern::Session& session, const std::string& device) {
  const auto& nodes = session.host_nodes();
  std::cout << "device " << device << ": " << session.graph().nodes.size() - nodes.size() << " of " << session.graph().nodes.size()
            << " nodes on the device";
  if (nodes.empty()) std::cout << ", none on the CPU\n";
  else std::cout << "; on the CPU (inputs downloaded, outputs on the host):\n";
  for (const auto& n : nodes) std::cout << "  " << n << "\n";
}

int cmd_profile(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "--compare") {
    if (argc != 5) tern::fail("usage: tern profile --compare A.json B.json");
    tern::compare_profiles(tern::read_profile_trace(argv[3]), tern::read_profile_trace(argv[4]), std::cout);
    return 0;
  }
  Flags f = parse(argc, argv, 2, {});
  if (!f.has("model")) tern::fail("profile needs --model PATH (or --compare A.json B.json)");
  std::string dir;
  const std::string model_path = resolve_model(f.get("model"), &dir);
  const int threads = f.has("threads") ? std::stoi(f.get("threads")) : static_cast<int>(std::thread::hardware_concurrency());
  const int64_t prompt_n = std::stoll(f.get("prompt-tokens", "128")), new_n = std::stoll(f.get("new-tokens", "16"));
  if (prompt_n < 1 || new_n < 2) tern::fail("profile needs --prompt-tokens >= 1 and --new-tokens >= 2");
  const std::string steps = f.get("steps", "both");
  if (steps != "prefill" && steps != "decode" && steps != "both") tern::fail("--steps must be prefill, decode or both");
  const tern::MachinePeaks machine = tern::machine_peaks(threads);
  tern::SessionOptions so;
  so.threads = threads;
  tern::llm::ModelConfig cfg = tern::llm::read_model_config(dir);
  set_generation_options(f, cfg, so, true);
  tern::Profiler prof;
  prof.attach(so);
  tern::Session session(model_path, so);
  warn_if_graph_cache(session);
  tern::llm::Generator gen(session, cfg);
  const std::vector<int64_t> prompt = synthetic_prompt(cfg, prompt_n);
  tern::llm::GenerateOptions o;
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
              model_path.c_str(), static_cast<long long>(prompt_n), static_cast<long long>(o.max_new_tokens - 1), threads,
              machine.gflops, machine.gb_s, machine.source.c_str());
  if (session.device_transfers()) print_host_nodes(session, f.get("device"));
  write_profile(prof, machine, f,
                model_path + ": " + std::to_string(prompt_n) + " prompt tokens, " + std::to_string(o.max_new_tokens - 1) +
                    " decode steps, weights " + f.get("weights", "as stored") + ", device " + f.get("device", "cpu"));
  return 0;
}

int cmd_bench_op(int argc, char** argv) {
  if (argc < 3 || argv[2][0] == '-') tern::fail("usage: tern bench-op OP --shape D1,D2,...; OPs:\n", tern::op_bench_usage());
  Flags f = parse(argc, argv, 3, {});
  tern::OpBenchSpec spec;
  spec.op = argv[2];
  std::stringstream dims(f.get("shape"));
  for (std::string d; std::getline(dims, d, ',');) {
    try {
      spec.shape.push_back(std::stoll(d));
    } catch (const std::exception&) {
      tern::fail("--shape: '", d, "' is not a dimension");
    }
  }
  const std::string dtype = f.get("dtype", "fp32"), kv = f.get("kv-dtype", "fp32");
  if ((dtype != "fp32" && dtype != "fp16") || (kv != "fp32" && kv != "fp16")) tern::fail("--dtype and --kv-dtype take fp32 or fp16");
  spec.dtype = dtype == "fp16" ? tern::DType::Float16 : tern::DType::Float32;
  spec.kv_dtype = kv == "fp16" ? tern::DType::Float16 : tern::DType::Float32;
  spec.weights = tern::parse_weight_format(f.get("weights", "fp32"));
  spec.activations = tern::parse_activation_format(f.get("activations", "auto"));
  spec.threads = f.has("threads") ? std::stoi(f.get("threads")) : static_cast<int>(std::thread::hardware_concurrency());
  spec.device = tern::parse_device(f.get("device", "cpu"));
  const tern::MachinePeaks machine = tern::machine_peaks(spec.threads);
  const tern::OpBenchResult r = tern::bench_op(spec);
  tern::Profiler::Row row;  // the achieved rates and roofline share, as the profile computes them
  row.ms = r.median_ms, row.flops = r.flops, row.bytes = r.bytes;
  std::printf("%s\nkernel   %s, %s, %lld runs\ntime     median %.4f ms, best %.4f ms\n", r.graph.c_str(),
              r.on_device ? "OpenCL" : r.kernel.empty() ? "(the op's own loop)" : r.kernel.c_str(),
              r.on_device ? f.get("device").c_str() : (std::to_string(spec.threads) + " thread(s)").c_str(), static_cast<long long>(r.runs),
              r.median_ms, r.min_ms);
  std::printf("work     %.4f GFLOP, %.4f GB moved, %.2f flop/byte\nachieved %.1f GFLOP/s, %.1f GB/s = %.0f%% of the roofline "
              "(%.1f GFLOP/s peak, %.1f GB/s; %s)\n",
              r.flops / 1e9, r.bytes / 1e9, row.intensity(), row.gflops_per_s(), row.gb_per_s(), row.roofline_pct(machine),
              machine.gflops, machine.gb_s, machine.source.c_str());
  return 0;
}

int cmd_eval(int argc, char** argv) {
  Flags f = parse(argc, argv, 2, {"second-half"});
  if (!f.has("model") || !f.has("text")) tern::fail("eval needs --model PATH and --text FILE");
  std::string dir;
  const std::string model_path = resolve_model(f.get("model"), &dir);
  std::ifstream in(f.get("text"), std::ios::binary);
  if (!in) tern::fail("cannot read text file '", f.get("text"), "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const tern::llm::ModelConfig cfg = tern::llm::read_model_config(dir);
  const auto tokenizer = tern::llm::load_tokenizer(dir);  // says what is missing when there is none
  tern::SessionOptions so;
  if (f.has("threads")) so.threads = std::stoi(f.get("threads"));
  so.weights = tern::parse_weight_format(f.get("weights", "fp32"));
  so.activations = tern::parse_activation_format(f.get("activations", "auto"));
  tern::Session session(model_path, so);
  const int64_t context = std::stoll(f.get("context", std::to_string(cfg.context_length > 0 ? cfg.context_length : 512)));
  const auto ids = tokenizer->encode(text, true);
  const auto r = tern::llm::perplexity(session, ids, context, f.has("second-half"));
  std::cout << "tokens " << ids.size() << ", predictions " << r.predictions << ", mean NLL " << r.mean_nll
            << " nats, perplexity " << r.perplexity() << "\n";
  return 0;
}

// Flags win; what they leave open comes from generation_config.json (sampling only if it says do_sample).
tern::llm::SamplingOptions sampling_options(const Flags& f, const tern::llm::ModelConfig& cfg) {
  tern::llm::SamplingOptions s;
  const bool sampling_flags = f.has("temperature") || f.has("top-k") || f.has("top-p") || f.has("min-p");
  s.greedy = f.has("greedy") || (!sampling_flags && !cfg.do_sample);
  s.temperature = f.has("temperature") ? std::stof(f.get("temperature")) : cfg.temperature;
  s.top_k = f.has("top-k") ? std::stoi(f.get("top-k")) : cfg.top_k;
  s.top_p = f.has("top-p") ? std::stof(f.get("top-p")) : cfg.top_p;
  s.min_p = std::stof(f.get("min-p", "0"));
  s.repetition_penalty = f.has("repetition-penalty") ? std::stof(f.get("repetition-penalty")) : cfg.repetition_penalty;
  s.seed = std::stoull(f.get("seed", "0"));
  return s;
}

int cmd_generate(int argc, char** argv) {
  Flags f = parse(argc, argv, 2, {"greedy", "no-cache", "json", "chat", "early-stopping", "stats"});
  std::string dir;
  const std::string model_path = resolve_model(f.has("model") ? f.get("model") : default_model(argv[0]), &dir);
  tern::SessionOptions so;
  if (f.has("threads")) so.threads = std::stoi(f.get("threads"));
  tern::llm::ModelConfig cfg = tern::llm::read_model_config(dir);
  set_generation_options(f, cfg, so, !f.has("no-cache") && std::stoi(f.get("num-beams", "1")) <= 1);
  tern::Session session(model_path, so);
  warn_if_graph_cache(session);
  tern::llm::Generator gen(session, cfg);

  std::vector<std::string> prompts = f.values.count("prompt") ? f.values.at("prompt") : std::vector<std::string>{};
  if (f.has("prompt-file")) {
    std::ifstream pf(f.get("prompt-file"));
    if (!pf) tern::fail("cannot read --prompt-file '", f.get("prompt-file"), "'");
    prompts.emplace_back(std::string(std::istreambuf_iterator<char>(pf), {}));
  }
  std::unique_ptr<tern::llm::Tokenizer> tok;
  std::vector<std::vector<int64_t>> ids;
  if (f.has("ids")) {
    if (!prompts.empty()) tern::fail("give --ids or --prompt, not both");
    ids = parse_ids(f.get("ids"));
    try { tok = tern::llm::load_tokenizer(dir); } catch (const tern::Error&) {}  // text output is optional
  } else {
    tok = tern::llm::load_tokenizer(dir);  // says what is missing when there is no tokenizer
    if (prompts.empty()) prompts.emplace_back("");
    const auto family = f.has("chat") ? tern::llm::detect_chat_family(dir) : tern::llm::ChatFamily::None;
    if (f.has("chat")) std::cerr << "chat format: " << tern::llm::chat_family_name(family) << "\n";
    for (const auto& p : prompts) {
      if (!f.has("chat")) {
        ids.push_back(tok->encode(p, true));
        continue;
      }
      std::vector<tern::llm::ChatMessage> msgs;
      if (f.has("system")) msgs.push_back({"system", f.get("system")});
      msgs.push_back({"user", p});
      ids.push_back(tok->encode(tern::llm::format_chat(family, msgs), false));  // the template writes BOS
    }
  }
  tern::llm::GenerateOptions opt;
  opt.max_new_tokens = std::stoll(f.get("max-new-tokens", "128"));
  opt.use_cache = !f.has("no-cache");
  opt.prefill_chunk = std::stoll(f.get("prefill-chunk", "0"));
  opt.eos_token_ids = cfg.eos_token_ids;
  opt.sampling = sampling_options(f, cfg);
  opt.num_beams = std::stoi(f.get("num-beams", "1"));
  opt.length_penalty = std::stof(f.get("length-penalty", "1"));
  opt.early_stopping = f.has("early-stopping");
  if (opt.num_beams < 1) tern::fail("--num-beams must be at least 1");
  opt.top_logits = std::stoll(f.get("top-logits", "0"));
  if (opt.top_logits > 0 && (!f.has("json") || opt.num_beams > 1)) tern::fail("--top-logits needs --json and no beam search");

  const bool json = f.has("json"), stream = !json && ids.size() == 1 && tok && opt.num_beams == 1;
  std::unique_ptr<tern::llm::TextStream> out;
  if (stream) {  // the prompt as the tokenizer reads it back, then each new token's text
    out = std::make_unique<tern::llm::TextStream>(*tok);
    for (int64_t t : ids[0]) std::cout << out->push(t);
    std::cout << std::flush;
  }
  // New text per sequence, for --stop.
  const std::vector<std::string> stops = f.values.count("stop") ? f.values.at("stop") : std::vector<std::string>{};
  std::vector<std::unique_ptr<tern::llm::TextStream>> texts_so_far;
  std::vector<std::string> new_text(ids.size());
  if (tok && !stops.empty())
    for (size_t b = 0; b < ids.size(); ++b) texts_so_far.push_back(std::make_unique<tern::llm::TextStream>(*tok, ids[b]));
  auto res = gen.generate(ids, opt, [&](size_t b, int64_t t) {
    if (stream) std::cout << out->push(t) << std::flush;
    if (texts_so_far.empty()) return true;
    new_text[b] += texts_so_far[b]->push(t);
    for (const auto& s : stops)
      if (new_text[b].find(s) != std::string::npos) return false;
    return true;
  });
  if (stream) std::cout << out->flush() << std::endl;  // (flushed before the stderr stats line)
  std::vector<std::string> texts;
  for (const auto& t : res.tokens) texts.push_back(tok ? tok->decode(t) : "");
  if (!json && !stream)
    for (size_t b = 0; b < texts.size(); ++b) {
      if (tok) std::cout << texts[b] << "\n";
      else {
        for (int64_t t : res.tokens[b]) std::cout << t << " ";
        std::cout << "\n";
      }
    }
  const double prefill_tps = res.prefill_ms > 0 ? 1000.0 * static_cast<double>(res.prompt_tokens) / res.prefill_ms : 0;
  const double per_token = res.decode_steps ? res.decode_ms / static_cast<double>(res.decode_steps) : 0;
  if (json) {
    nlohmann::json j;
    j["tokens"] = res.tokens;
    j["text"] = texts;
    j["prefill_ms"] = res.prefill_ms;
    j["decode_ms_per_token"] = per_token;
    if (opt.top_logits > 0) j["top_logits"] = res.top_logits;  // [sequence][step] → [[token, logit], …]
    // Generated bytes need not be valid UTF-8 (byte tokens, random weights): replace, never fail.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (f.has("stats"))
    std::cerr << "per decode step: weights " << res.weight_bytes_per_token << " bytes read; KV cache "
              << res.cache_bytes_per_token << " bytes moved ("
              << (session.cached_layers() > 0 ? "ring buffer: held keys/values read, one slot written"
                                   : "graph cache: past read, copied into present, read by attention")
              << ")\n";
  std::cerr << "prefill: " << res.prompt_tokens << " tokens, " << static_cast<int64_t>(prefill_tps) << " tok/s; decode: "
            << res.decode_steps * static_cast<int64_t>(ids.size()) << " tokens, "
            << (per_token > 0 ? static_cast<int64_t>(1000.0 * static_cast<double>(ids.size()) / per_token) : 0) << " tok/s\n";
  return 0;
}

// Ctrl-C while an answer streams stops that answer; at the prompt it starts a new line.
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// An interactive conversation: each turn is prefilled on top of the cache the last one left (only the
// new text is fed when the conversation so far tokenizes as it was generated), the answer streams.
int cmd_chat(int argc, char** argv) {
  Flags f = parse(argc, argv, 3, {"greedy", "stats"});
  if (argc < 3 || argv[2][0] == '-') tern::fail("usage: tern chat MODEL_DIR [--system TEXT] [--max-new-tokens N] [sampling flags]");
  std::string dir;
  const std::string model_path = resolve_model(argv[2], &dir);
  tern::SessionOptions so;
  if (f.has("threads")) so.threads = std::stoi(f.get("threads"));
  const tern::llm::ModelConfig cfg = tern::llm::read_model_config(dir);
  set_generation_options(f, cfg, so, true);
  tern::Session session(model_path, so);
  warn_if_graph_cache(session);
  tern::llm::Generator gen(session, cfg);
  const auto tok = tern::llm::load_tokenizer(dir);
  const auto family = tern::llm::detect_chat_family(dir);
  tern::llm::GenerateOptions opt;
  opt.max_new_tokens = std::stoll(f.get("max-new-tokens", "512"));
  opt.eos_token_ids = cfg.eos_token_ids;
  opt.sampling = sampling_options(f, cfg);
  opt.resume = true;
  bool stats = f.has("stats");
  std::vector<tern::llm::ChatMessage> msgs;
  if (f.has("system")) msgs.push_back({"system", f.get("system")});
  const size_t first_turn = msgs.size();
  struct sigaction sa {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  sigaction(SIGINT, &sa, nullptr);
  std::cerr << "chat with " << dir << " (" << tern::llm::chat_family_name(family)
            << " format). Ctrl-C stops an answer, Ctrl-D quits; /stats toggles speed, /reset forgets the conversation.\n";
  for (;;) {
    std::cout << "> " << std::flush;
    std::string line;
    interrupted = false;
    if (!std::getline(std::cin, line)) {
      if (interrupted && !std::cin.eof()) {  // Ctrl-C at the prompt
        std::cin.clear();
        std::cout << "\n";
        continue;
      }
      std::cout << "\n";
      return 0;  // Ctrl-D
    }
    if (line.empty()) continue;
    if (line == "/stats") {
      stats = !stats;
      std::cerr << "speed after each answer: " << (stats ? "on" : "off") << "\n";
      continue;
    }
    if (line == "/reset") {
      msgs.resize(first_turn);
      std::cerr << "conversation forgotten\n";
      continue;
    }
    msgs.push_back({"user", line});
    std::vector<int64_t> ids;
    if (family == tern::llm::ChatFamily::None) {  // no template: one running text, each answer continuing its line
      for (size_t i = 0; i < msgs.size(); ++i) {
        const bool new_line = i > 0 && msgs[i].role == "user";
        const auto part = tok->encode(new_line ? "\n" + msgs[i].content : msgs[i].content, i == 0);
        ids.insert(ids.end(), part.begin(), part.end());
      }
    } else {
      ids = tok->encode(tern::llm::format_chat(family, msgs), false);  // the template writes BOS
    }
    tern::llm::TextStream out(*tok, ids);
    std::string answer;
    interrupted = false;
    const auto res = gen.generate({ids}, opt, [&](size_t, int64_t t) {
      const bool end = std::find(opt.eos_token_ids.begin(), opt.eos_token_ids.end(), t) != opt.eos_token_ids.end();
      if (!end) {
        const std::string piece = out.push(t);
        answer += piece;
        std::cout << piece << std::flush;
      }
      return !interrupted.load();
    });
    std::cout << out.flush() << "\n";
    if (interrupted) std::cerr << "[stopped]\n";
    msgs.push_back({"assistant", answer});
    if (stats) {
      const double per_token = res.decode_steps ? res.decode_ms / static_cast<double>(res.decode_steps) : 0;
      std::cerr << "[prefilled " << res.prompt_tokens << " of " << ids.size() << " conversation tokens at "
                << static_cast<int64_t>(res.prefill_ms > 0 ? 1000.0 * static_cast<double>(res.prompt_tokens) / res.prefill_ms : 0)
                << " tok/s; " << res.decode_steps << " new at " << (per_token > 0 ? static_cast<int64_t>(1000.0 / per_token) : 0)
                << " tok/s]\n";
    }
  }
}

int cmd_import_gguf(int argc, char** argv) {
  if (argc != 4) tern::fail("usage: tern import-gguf FILE.gguf OUT_DIR");
  const auto t0 = std::chrono::steady_clock::now();
  tern::llm::import_gguf(argv[2], argv[3]);
  std::cout << "wrote " << argv[3] << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}

int cmd_convert(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "llama2c") tern::fail("usage: tern convert llama2c MODEL.bin --tokenizer T.bin --out DIR");
  Flags f = parse(argc, argv, 4, {});
  if (!f.has("tokenizer") || !f.has("out")) tern::fail("convert llama2c needs --tokenizer and --out");
  tern::llm::convert_llama2c(argv[3], f.get("tokenizer"), f.get("out"));
  auto c = tern::llm::read_llama2c_config(argv[3]);
  std::cout << "wrote " << f.get("out") << ": " << c.n_layers << " layers, dim " << c.dim << ", " << c.n_heads
            << " heads (" << c.n_kv_heads << " kv), vocab " << c.vocab_size << ", context " << c.seq_len << "\n";
  return 0;
}

// What the fusion passes make of a model, as `generate --window` loads it.
void print_fusions(const std::string& path, const Flags& flags, size_t nodes_before) {
  const auto cfg = tern::llm::read_model_config(std::filesystem::path(path).parent_path().string());
  tern::SessionOptions o;
  set_generation_options(flags, cfg, o, true);
  std::cout << "\nfusions (--window " << o.kv_window << "):\n";
  tern::Session s(path, o);
  for (const auto& f : s.fusions()) std::cout << "  " << f.node << ": " << f.pattern << "\n";
  if (!s.fusion_misses().empty()) {
    std::cout << "ring-buffer KV cache: not used (every layer must match; the graph keeps its past/present). Where matching "
                 "stopped, per layer:\n";
    for (const auto& miss : s.fusion_misses()) std::cout << "  " << miss.str() << "\n";
  }
  const tern::PassStats& stats = s.pass_stats();
  std::cout << s.fusions().size() << " rewrite(s), " << stats.canonicalized << " no-op node(s) bypassed by canonicalization, "
            << stats.shape_values << " shape computation(s) resolved from the input dims, " << stats.merged_nodes
            << " duplicate node(s) merged; " << nodes_before << " nodes in the file, " << s.graph().nodes.size()
            << " after folding, fusion and dead-node removal.\n";
}

int cmd_bench(int argc, char** argv) {
  Flags f = parse(argc, argv, 2, {"machine", "json"});
  const int threads = f.has("threads") ? std::stoi(f.get("threads")) : static_cast<int>(std::thread::hardware_concurrency());
  if (f.has("machine")) {
    const tern::MachinePeaks m = tern::machine_peaks(threads, true);
    std::cout << "peak fp32: " << m.gflops << " GFLOP/s; read bandwidth: " << m.gb_s << " GB/s; with " << threads
              << " thread(s) (cached for profile and bench-op)\n"
              << "kernels: ISA tier " << tern::kernels::isa_name(tern::kernels::active_isa()) << " (CPU: "
              << tern::kernels::cpu_feature_list() << "; TERN_ISA=avx2|avxvnni|avx512|avx512vnni caps it)\n";
    return 0;
  }
  const double bandwidth_before = tern::measure_read_bandwidth(threads);
  tern::reset_peak_rss();  // the probe's buffer is not the model's memory
  if (!f.has("model")) tern::fail("bench needs --model PATH (or --machine)");
  std::string dir;
  const std::string model_path = resolve_model(f.get("model"), &dir);
  const int64_t prompt_n = std::stoll(f.get("prompt-tokens", "128")), new_n = std::stoll(f.get("new-tokens", "64"));
  if (prompt_n < 1 || new_n < 2) tern::fail("bench needs --prompt-tokens >= 1 and --new-tokens >= 2");
  tern::SessionOptions so;
  so.threads = threads;
  tern::llm::ModelConfig cfg = tern::llm::read_model_config(dir);
  set_generation_options(f, cfg, so, true);
  const auto t0 = std::chrono::steady_clock::now();
  tern::Session session(model_path, so);
  warn_if_graph_cache(session);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<int64_t> prompt = synthetic_prompt(cfg, prompt_n);
  tern::llm::Generator gen(session, cfg);
  tern::llm::GenerateOptions o;
  o.max_new_tokens = new_n;  // no eos: always new_n tokens
  tern::llm::GenerateOptions warm;
  warm.max_new_tokens = 2;
  gen.generate({{prompt.begin(), prompt.begin() + std::min<int64_t>(prompt_n, 4)}}, warm);  // pages weights in
  // On a device: the bytes moved host↔device by the decode steps after the first (per token below).
  int64_t token = 0, up = 0, down = 0;
  const tern::TransferStats* moved = session.device_transfers();
  const auto r = gen.generate({prompt}, o, [&](size_t, int64_t) {
    if (moved && ++token == 2) up = -moved->to_device, down = -moved->to_host;
    return true;
  });
  if (moved) up += moved->to_device, down += moved->to_host;
  const double per_step = r.decode_steps > 1 ? 1.0 / static_cast<double>(r.decode_steps - 1) : 0.0;
  const double rss_gb = static_cast<double>(tern::peak_rss_bytes()) / 1e9;  // before the second probe
  // A shared machine's bandwidth drifts: measured again after the run, the better of the two counts.
  const double bandwidth_after = tern::measure_read_bandwidth(threads);
  const double bandwidth = std::max(bandwidth_before, bandwidth_after);
  const double prefill_tps = 1000.0 * static_cast<double>(prompt_n) / r.prefill_ms;
  const double decode_tps = 1000.0 * static_cast<double>(r.decode_steps) / r.decode_ms;
  const double gbps = static_cast<double>(r.weight_bytes_per_token + r.cache_bytes_per_token) * decode_tps / 1e9;
  if (f.has("json")) {
    nlohmann::json j{{"model", model_path}, {"threads", threads}, {"prompt_tokens", prompt_n}, {"new_tokens", new_n},
                     {"prefill_tok_s", prefill_tps}, {"decode_tok_s", decode_tps}, {"decode_ms_per_token", 1000.0 / decode_tps},
                     {"weight_bytes_per_token", r.weight_bytes_per_token}, {"cache_bytes_per_token", r.cache_bytes_per_token},
                     {"achieved_gb_s", gbps}, {"read_bandwidth_gb_s", bandwidth},
                     {"read_bandwidth_before_after_gb_s", {bandwidth_before, bandwidth_after}}, {"load_s", load_s}, {"peak_rss_gb", rss_gb},
                     {"isa", tern::kernels::isa_name(tern::kernels::active_isa())}};
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
              session.cached_layers() ? "ring-buffer KV cache" : "the graph's KV cache");
  std::printf("prefill     %lld tokens: %.1f tok/s\n", static_cast<long long>(prompt_n), prefill_tps);
  std::printf("decode      %lld tokens: %.2f tok/s (%.1f ms/token)\n", static_cast<long long>(r.decode_steps), decode_tps,
              1000.0 / decode_tps);
  std::printf("per token   %.3f GB of weights + %.3f GB of KV cache read\n", r.weight_bytes_per_token / 1e9,
              r.cache_bytes_per_token / 1e9);
  std::printf("bandwidth   %.1f GB/s achieved = %.0f%% of the %.1f GB/s this machine reads (%.1f before, %.1f after)\n",
              gbps, 100.0 * gbps / bandwidth, bandwidth, bandwidth_before, bandwidth_after);
  std::printf("load        %.2f s; peak RSS %.2f GB\n", load_s, rss_gb);
  if (moved) {
    std::printf("device      %s: per decode token %.0f bytes to the device, %.0f bytes back; %zu node(s) on the CPU\n",
                f.get("device").c_str(), static_cast<double>(up) * per_step, static_cast<double>(down) * per_step,
                session.host_nodes().size());
    for (const auto& n : session.host_nodes()) std::printf("            on the CPU: %s\n", n.c_str());
  }
  return 0;
}

int cmd_devices() {
  const char* tier = tern::kernels::isa_name(tern::kernels::active_isa());  // fails on a bad TERN_ISA before printing
  std::cout << "cpu       " << std::thread::hardware_concurrency() << " thread(s), ISA tier " << tier << " ("
            << tern::kernels::cpu_feature_list() << ")\n";
  std::cout << tern::DeviceExecutor::describe_devices();
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  if (argc < 3) tern::fail("inspect needs a model path");
  Flags flags = parse(argc, argv, 3, {"fusions"});
  tern::Model m = tern::load_onnx(argv[2]);
  const tern::Graph& g = *m.graph;
  std::cout << "model:    " << m.path << "\nir:       " << m.ir_version << "\nproducer: " << m.producer << "\nopsets:  ";
  for (const auto& [d, v] : g.opsets) std::cout << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  std::cout << "\n\ninputs:\n";
  for (int id : g.inputs) {
    const tern::Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  std::cout << "outputs:\n";
  for (int id : g.outputs) {
    const tern::Value& v = g.values[static_cast<size_t>(id)];
    std::cout << "  " << io_line({v.name, v.dtype, v.shape}) << "\n";
  }
  size_t n_init = 0, init_bytes = 0;
  for (const auto& v : g.values)
    if (v.constant) { ++n_init; init_bytes += v.constant->nbytes(); }
  std::cout << "initializers: " << n_init << " (" << init_bytes << " bytes)\n\nops (" << g.nodes.size() << " nodes):\n";
  std::map<std::string, int> hist;
  std::set<std::string> missing;
  const auto& reg = tern::OpRegistry::instance();
  for (const auto& n : g.nodes) {
    std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    ++hist[key];
    if (!reg.has(n.domain, n.op_type)) missing.insert(key);
  }
  for (const auto& [k, c] : hist) std::cout << "  " << c << "\t" << k << (missing.count(k) ? "   (not supported)" : "") << "\n";
  if (missing.empty()) std::cout << "\ntern can run every op in this model.\n";
  else {
    std::cout << "\ntern cannot run " << missing.size() << " op type(s):";
    for (const auto& k : missing) std::cout << " " << k;
    std::cout << "\n";
  }
  if (flags.has("fusions")) print_fusions(argv[2], flags, g.nodes.size());
  if (flags.has("device")) {  // which nodes run where: decided per run, so one short greedy generation tells
    const auto cfg = tern::llm::read_model_config(std::filesystem::path(argv[2]).parent_path().string());
    tern::SessionOptions o;
    set_generation_options(flags, cfg, o, true);
    tern::Session s(argv[2], o);
    tern::llm::Generator gen(s, cfg);
    tern::llm::GenerateOptions go;
    go.max_new_tokens = 2;
    gen.generate({synthetic_prompt(cfg, 4)}, go);
    std::cout << "\n";
    print_host_nodes(s, flags.get("device"));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << usage();
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  for (int i = 2; i < argc; ++i)  // `tern generate --help` and the like: the usage names every command's flags
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << usage();
      return 0;
    }
  try {
    if (cmd == "run") return cmd_run(argc, argv);
    if (cmd == "inspect") return cmd_inspect(argc, argv);
    if (cmd == "generate") return cmd_generate(argc, argv);
    if (cmd == "eval") return cmd_eval(argc, argv);
    if (cmd == "profile") return cmd_profile(argc, argv);
    if (cmd == "quantize") return cmd_quantize(argc, argv);
    if (cmd == "convert") return cmd_convert(argc, argv);
    if (cmd == "import-gguf") return cmd_import_gguf(argc, argv);
    if (cmd == "chat") return cmd_chat(argc, argv);
    if (cmd == "bench") return cmd_bench(argc, argv);
    if (cmd == "bench-op") return cmd_bench_op(argc, argv);
    if (cmd == "devices") return cmd_devices();
    std::cerr << "tern: unknown command '" << cmd << "'\n" << usage();
    return 2;
  } catch (const tern::UnsupportedError& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 1;
  }
}
