#include "tools/cli/cli.h"

#include <filesystem>
#include <iostream>

#include "runtime/profile_report.h"

namespace tern::cli {

Flags parse(int argc, char** argv, int first, const std::set<std::string>& switches) {
  Flags f;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) fail("unexpected argument '", a, "'");
    std::string k = a.substr(2);
    if (switches.count(k)) { f.switches.insert(k); continue; }
    if (i + 1 >= argc) fail("flag ", a, " needs a value");
    f.values[k].push_back(argv[++i]);
  }
  return f;
}

llm::DecoderOptions decoder_options(const Flags& f) {
  llm::DecoderOptions o;
  o.device = f.get("device", "cpu");
  o.weights = f.get("weights", "fp32");
  o.activations = f.get("activations", "auto");
  o.kv_dtype = f.get("kv-dtype", "fp32");
  if (f.has("window")) o.window = std::stoll(f.get("window"));
  o.sinks = std::stoll(f.get("sinks", "4"));
  if (f.has("threads")) o.threads = std::stoi(f.get("threads"));
  o.max_memory = f.get("max-memory", "");
  o.prefault = f.has("prefault");
  o.use_pack = !f.has("no-pack");
  return o;
}

llm::SamplingChoices sampling_choices(const Flags& f) {
  llm::SamplingChoices c;
  c.greedy = f.has("greedy");
  if (f.has("temperature")) c.temperature = std::stof(f.get("temperature"));
  if (f.has("top-k")) c.top_k = std::stoi(f.get("top-k"));
  if (f.has("top-p")) c.top_p = std::stof(f.get("top-p"));
  if (f.has("min-p")) c.min_p = std::stof(f.get("min-p"));
  if (f.has("repetition-penalty")) c.repetition_penalty = std::stof(f.get("repetition-penalty"));
  c.seed = std::stoull(f.get("seed", "0"));
  return c;
}

std::string executable_path(const char* argv0) {
  std::error_code ec;
  const auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  return ec ? std::string(argv0) : exe.string();
}

void warn_if_graph_cache(const Session& s) {
  if (const std::string w = llm::graph_cache_warning(s); !w.empty()) std::cerr << "tern: warning: " << w;
}

std::string io_line(const IOInfo& io) {
  return io.name + "  " + dtype_name(io.dtype) + "  " + (io.shape ? sym_shape_str(*io.shape) : "[?]");
}

void write_profile(const Profiler& prof, const MachinePeaks& machine, const Flags& f, const std::string& title) {
  prof.write_table(std::cout, machine, std::stoi(f.get("top", "10")));
  if (f.has("trace")) {
    prof.write_chrome_trace(f.get("trace"));
    std::cout << "trace: " << f.get("trace") << " (Perfetto, chrome://tracing; ONNX Runtime's profile fields)\n";
  }
  if (f.has("html")) {
    write_html_report(prof, machine, title, f.get("html"));
    std::cout << "report: " << f.get("html") << "\n";
  }
  if (f.has("svg")) {
    write_roofline_svg(prof, machine, f.get("svg"));
    std::cout << "roofline: " << f.get("svg") << "\n";
  }
}

std::vector<int64_t> synthetic_prompt(const llm::ModelConfig& cfg, int64_t n) {
  const int64_t vocab = cfg.vocab_size > 2 ? cfg.vocab_size : 2;
  std::vector<int64_t> prompt(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) prompt[static_cast<size_t>(i)] = 1 + (i * 7919) % (vocab - 1);
  return prompt;
}

void print_host_nodes(const Session& session, const std::string& device) {
  const auto& nodes = session.host_nodes();
  std::cout << "device " << device << ": " << session.graph().nodes.size() - nodes.size() << " of " << session.graph().nodes.size()
            << " nodes on the device";
  if (nodes.empty()) std::cout << ", none on the CPU\n";
  else std::cout << "; on the CPU (inputs downloaded, outputs on the host):\n";
  for (const auto& n : nodes) std::cout << "  " << n << "\n";
}

}  // namespace tern::cli
