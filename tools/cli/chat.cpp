#include "tools/cli/cli.h"

#include <atomic>
#include <csignal>
#include <iostream>

#include "llm/chat_template.h"
#include "llm/generator.h"
#include "llm/tokenizer.h"

namespace tern::cli {

// Ctrl-C while an answer streams stops that answer; at the prompt it starts a new line.
namespace {
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }
}  // namespace

// An interactive conversation: each turn is prefilled on top of the cache the last one left (only the
// new text is fed when the conversation so far tokenizes as it was generated), the answer streams.
int chat(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("chat"));
  const llm::ModelFiles files = model_or_default(f, argv[0]);
  const std::string &model_path = files.onnx, &dir = files.dir;
  const llm::ModelConfig cfg = llm::read_model_config(dir);
  Session session(model_path, with_load_progress(llm::decoder_session_options(decoder_options(f), cfg, true)));
  warn_if_graph_cache(session);
  llm::Generator gen(session, cfg);
  const auto tok = llm::load_tokenizer(dir);
  const llm::ChatTemplate chat = llm::ChatTemplate::load(dir);
  llm::GenerateOptions opt;
  opt.max_new_tokens = f.integer("max-new-tokens");
  opt.eos_token_ids = llm::with_ends(cfg.eos_token_ids, chat.turn_end_tokens(*tok));
  opt.sampling = llm::sampling_options(sampling_choices(f), cfg, llm::SamplingUse::Conversation);
  opt.resume = true;
  bool stats = f.has("stats");
  std::vector<llm::ChatMessage> msgs;
  if (f.has("system")) msgs.push_back({"system", f.get("system")});
  const size_t first_turn = msgs.size();
  // Ctrl-C at the prompt must end the read (no SA_RESTART); during an answer it must not fail a write to the
  // terminal that it interrupts (EINTR would set stdout's error flag, and std::cout would print nothing after it:
  // CI's tmux once showed "[stopped]" and never the next prompt), so writes restart then.
  auto on_ctrl_c = [](bool restart_writes) {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = restart_writes ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, nullptr);
  };
  std::cerr << "chat with " << dir << " (chat template: " << (chat.empty() ? "none, one running text" : chat.origin())
            << "). Ctrl-C stops an answer, Ctrl-D quits; /stats toggles speed, /reset forgets the conversation.\n";
  for (;;) {
    on_ctrl_c(false);
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
    const std::vector<int64_t> ids = llm::encode_chat(*tok, chat, msgs);
    llm::TextStream out(*tok, ids);
    std::string answer;
    interrupted = false;
    on_ctrl_c(true);
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

}  // namespace tern::cli
