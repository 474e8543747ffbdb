#include "tools/cli/cli.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#ifndef TERN_MINIMAL
#include "diagnostics/profile_report.h"
#endif

namespace tern::cli {

llm::ModelFiles model_files(const std::string& path, const std::string& dtype) {
  if (std::filesystem::path(path).extension() != ".gguf" || !std::filesystem::is_regular_file(path)) {
    llm::ModelFiles files = llm::resolve_model(path, dtype);
    if (!files.dtype.empty()) {  // a repository's variant: say which, and what else --dtype could take
      std::string others;
      for (const llm::OnnxVariant& v : files.variants)
        if (v.dtype != files.dtype) others += (others.empty() ? "" : ", ") + v.dtype;
      std::cerr << "tern: " << files.onnx << " (--dtype " << files.dtype << (dtype.empty() ? ", the default" : "")
                << (others.empty() ? "" : "; also here: " + others) << ")\n";
    }
    return files;
  }
  if (!dtype.empty()) fail("--dtype picks a variant in a repository's onnx/ folder; '", path, "' is a GGUF file");
#ifdef TERN_MINIMAL
  fail("'", path,
       "' is a GGUF file, and this build (TERN_MINIMAL) has no importer: `tern import-gguf FILE.gguf DIR` with a full build makes the "
       "folder to run");
#else
  return llm::resolve_model(imported_gguf_folder(path));
#endif
}

llm::ModelFiles model_or_default(const Flags& f, const char* argv0) {
  return model_files(f.has("model") ? f.get("model") : llm::default_model_dir(executable_path(argv0)), f.get("dtype"));
}

llm::DecoderOptions decoder_options(const Flags& f) {
  llm::DecoderOptions o;
  o.device = f.get("device");
  o.weights = f.get("weights");
  o.activations = f.get("activations");
  o.kv_dtype = f.get("kv-dtype");
  if (f.has("window")) o.ring_capacity = f.integer("window");
  o.sinks = f.integer("sinks");
  if (f.has("threads")) o.threads = static_cast<int>(f.integer("threads", 1));
  apply_memory_cap(f);
  o.prefault = f.has("prefault");
  o.use_pack = !f.has("no-pack");
  return o;
}

DraftModelRun load_draft_model(const Flags& f, const llm::ModelFiles& target, const llm::ModelConfig& cfg, const llm::Tokenizer* tok) {
  DraftModelRun d;
  if (!f.has("draft-model")) return d;
  const llm::ModelFiles files = model_files(f.get("draft-model"));
  const llm::ModelConfig draft_cfg = llm::read_model_config(files.dir);
  const auto draft_tok = tok ? llm::load_tokenizer(files.dir) : nullptr;  // (says what is missing)
  llm::check_same_vocabulary(tok, draft_tok.get(), cfg, draft_cfg, target.dir, files.dir);
  d.session = std::make_unique<Session>(
      files.onnx, with_load_progress(llm::decoder_session_options(decoder_options(f), draft_cfg, true), "loading the draft"));
  d.model = std::make_unique<llm::DraftModel>(*d.session, draft_cfg, cfg.vocab_size);
  return d;
}

void apply_memory_cap(const Flags& f) {
  if (f.has("max-memory")) set_process_memory_limit(llm::parse_memory_size(f.get("max-memory")));
}

llm::SamplingChoices sampling_choices(const Flags& f) {
  llm::SamplingChoices c;
  c.greedy = f.has("greedy");
  if (f.has("temperature")) c.temperature = f.number("temperature");
  if (f.has("top-k")) c.top_k = static_cast<int>(f.integer("top-k", 0));
  if (f.has("top-p")) c.top_p = f.number("top-p");
  if (f.has("min-p")) c.min_p = f.number("min-p");
  if (f.has("repetition-penalty")) c.repetition_penalty = f.number("repetition-penalty");
  if (f.has("frequency-penalty")) c.frequency_penalty = f.number("frequency-penalty");
  if (f.has("presence-penalty")) c.presence_penalty = f.number("presence-penalty");
  c.seed = static_cast<uint64_t>(f.integer("seed", 0));
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
  prof.write_table(std::cout, machine, static_cast<int>(f.integer("top", 0)));
  if (f.has("trace")) {
    prof.write_chrome_trace(f.get("trace"));
    std::cout << "trace: " << f.get("trace") << " (Perfetto, chrome://tracing; ONNX Runtime's profile fields)\n";
  }
#ifdef TERN_MINIMAL
  if (f.has("html") || f.has("svg")) fail_unsupported("--html and --svg: this build (TERN_MINIMAL) has no profile reports");
#else
  if (f.has("html")) {
    write_html_report(prof, machine, title, f.get("html"));
    std::cout << "report: " << f.get("html") << "\n";
  }
  if (f.has("svg")) {
    write_roofline_svg(prof, machine, f.get("svg"));
    std::cout << "roofline: " << f.get("svg") << "\n";
  }
#endif
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
