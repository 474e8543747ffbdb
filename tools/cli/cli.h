// What the `tern` commands share: the flags that become library options (their tables and parser: flags.h), and
// the printing several commands do. Each command is one file in tools/cli/ over library calls.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/draft_model.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "runtime/machine.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/cli/flags.h"

namespace tern::cli {

// The model a command was given: a folder or .onnx file as llm::resolve_model reads it (a repository's variant
// by --dtype, said on stderr), or a .gguf file, imported once into a folder under $XDG_CACHE_HOME/tern/gguf/ (full
// build; a minimal one says what to run).
llm::ModelFiles model_files(const std::string& path, const std::string& dtype = "");
// model_files of the command's model (MODEL or --model, and --dtype), else tern's own models/default.
llm::ModelFiles model_or_default(const Flags& f, const char* argv0);
// That folder for a GGUF (convert::gguf_model_folder), saying on stderr when this run imported it.
std::string imported_gguf_folder(const std::string& gguf);

// Progress bars (tools/cli/progress.cpp): "WHAT [#####     ]  45% 9/20" on stderr, redrawn in place, when
// stderr is a terminal and the command line had no --quiet (main.cpp calls set_quiet); else no output.
void set_quiet(bool quiet);
Progress terminal_progress(const std::string& what);
// `so` with its load's weight preparation drawn as such a bar.
SessionOptions with_load_progress(SessionOptions so, const std::string& what = "loading");

// --device, --weights, --activations, --kv-dtype, --window, --sinks, --threads.
llm::DecoderOptions decoder_options(const Flags& f);
// --draft-model (generate, chat): the draft's session (the same decoder flags) and its llm::DraftModel, its vocabulary
// checked against the model's (`tok`, when the command has one; else the configs' vocabulary sizes). Empty without
// the flag. Speculation takes model.get() (llm::parse_speculation).
struct DraftModelRun {
  std::unique_ptr<Session> session;
  std::unique_ptr<llm::DraftModel> model;
};
DraftModelRun load_draft_model(const Flags& f, const llm::ModelFiles& target, const llm::ModelConfig& cfg, const llm::Tokenizer* tok);
// --max-memory, when given, as the process's cap (every session, the tokenizer's and parsers' checks): set
// explicitly here, as no session sets it.
void apply_memory_cap(const Flags& f);
// --greedy, --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed.
llm::SamplingChoices sampling_choices(const Flags& f);
// The running executable's path (for models/default next to the source tree).
std::string executable_path(const char* argv0);
// llm::graph_cache_warning on stderr, when there is one.
void warn_if_graph_cache(const Session& s);

std::string io_line(const IOInfo& io);
// The profile's tables on stdout, then the files --trace / --html / --svg ask for.
void write_profile(const Profiler& prof, const MachinePeaks& machine, const Flags& f, const std::string& title);
// bench's and profile's prompt: n valid token ids spread over the vocabulary (bench/vs_ort.sh feeds ONNX
// Runtime the same ones).
std::vector<int64_t> synthetic_prompt(const llm::ModelConfig& cfg, int64_t n);
// Which nodes a device session's last run left on the CPU (their op cannot run on the device, or not
// with these inputs).
void print_host_nodes(const Session& session, const std::string& device);

// The commands (tools/cli/<command>.cpp).
int run(int argc, char** argv);
int inspect(int argc, char** argv);
int generate(int argc, char** argv);
int chat(int argc, char** argv);
int eval(int argc, char** argv);
int profile(int argc, char** argv);
int bench(int argc, char** argv);
int bench_op(int argc, char** argv);
int quantize(int argc, char** argv);
int convert(int argc, char** argv);
int import_gguf(int argc, char** argv);
int pack(int argc, char** argv);
int devices(int argc, char** argv);
int serve(int argc, char** argv);

}  // namespace tern::cli
