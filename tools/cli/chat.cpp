#include "tools/cli/cli.h"

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>

#include "core/error.h"
#include "core/mapped_file.h"
#include "llm/chat_template.h"
#include "llm/generator.h"
#include "llm/openai_api.h"
#include "llm/tokenizer.h"

namespace tern::cli {

// Ctrl-C while an answer streams stops that answer; at the prompt it starts a new line.
namespace {
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// Tool calling (--tools, --tool-choice), left out of a minimal build: its JSON schemas and call parsing were 86 KB of
// the static CLI (3.57 MiB, past tests/minimal_build.sh's budget).
#ifndef TERN_MINIMAL
// --tools FILE: an OpenAI tools array, checked as tern serve checks a request's.
nlohmann::ordered_json read_tools(const std::string& path) {
  const auto tools = nlohmann::ordered_json::parse(read_file_bytes(path, 16 << 20, "--tools"), nullptr, false);
  if (tools.is_discarded()) fail("--tools ", path, ": not JSON text");
  try {
    openai::check_tools(tools);
  } catch (const std::exception& e) {
    fail("--tools ", path, ": ", e.what());
  }
  return tools;
}

// --tool-choice required (empty `named`) or a tool's name: what its calls are decoded under.
std::shared_ptr<const llm::JsonSchema> forced_call(const nlohmann::ordered_json& tools, const std::string& named) {
  try {
    return openai::tool_call_schema(tools, named);
  } catch (const std::exception& e) {
    fail("--tool-choice ", named.empty() ? "required" : named, ": ", e.what());
  }
}

// The calls in an answer, taken out of its text, each put in the assistant's message as templates read them.
std::vector<openai::ToolCall> take_calls(const nlohmann::ordered_json& tools, bool forced, std::string& answer,
                                         nlohmann::ordered_json& reply) {
  auto calls = openai::parse_tool_calls(tools, forced, answer);
  reply["content"] = answer;
  for (const auto& call : calls) reply["tool_calls"].push_back(openai::tool_call_message(call));
  return calls;
}
#else
nlohmann::ordered_json read_tools(const std::string&) { fail_unsupported("--tools: this build (TERN_MINIMAL) has no tool calling"); }
std::shared_ptr<const llm::JsonSchema> forced_call(const nlohmann::ordered_json&, const std::string&) { return nullptr; }
std::vector<openai::ToolCall> take_calls(const nlohmann::ordered_json&, bool, std::string&, nlohmann::ordered_json&) { return {}; }
#endif

nlohmann::ordered_json message(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }
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
  const DraftModelRun draft = load_draft_model(f, files, cfg, tok.get());
  opt.speculation = llm::parse_speculation(f.get("speculate"), draft.model.get());
  bool stats = f.has("stats");
  llm::ChatOptions turn;  // (the template offers the tools; a call in an answer asks for its result)
  if (f.has("tools")) {
    turn.tools = read_tools(f.get("tools"));
    const nlohmann::ordered_json probe = nlohmann::ordered_json::array({message("user", "?")});
    if (chat.empty() || chat.render(probe, turn) == chat.render(probe))
      std::cerr << "tern chat: " << (chat.empty() ? "no chat template" : "the chat template renders no tools")
                << ", so the model is not told of them (--tool-choice required still decodes its calls)\n";
  }
  // --tool-choice required or NAME: each user turn's first answer is a call, decoded under its tool's schema.
  const std::string choice = f.get("tool-choice");
  std::shared_ptr<const llm::JsonSchema> forced;
  std::shared_ptr<const llm::JsonVocabulary> vocabulary;
  if (choice != "auto") {
    if (turn.tools.is_null()) fail("--tool-choice ", choice, ": no --tools to call");
    forced = forced_call(turn.tools, choice == "required" ? "" : choice);
    vocabulary = std::make_shared<const llm::JsonVocabulary>(*tok);
  }
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (f.has("system")) msgs.push_back(message("system", f.get("system")));
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
            << (turn.tools.is_null() ? "" : "; " + std::to_string(turn.tools.size()) + " tools offered")
            << "). Ctrl-C stops an answer, Ctrl-D quits; /stats toggles speed, /reset forgets the conversation.\n";
  // An answer to the conversation so far, streamed; false when it ended at Ctrl-C.
  auto answer_turn = [&](std::string& answer, bool call) {
    const std::vector<int64_t> ids = llm::encode_chat(*tok, chat, msgs, turn);
    llm::TextStream out(*tok, ids);
    interrupted = false;
    on_ctrl_c(true);
    llm::GenerateOptions o = opt;
    std::optional<llm::JsonConstraint> constraint;
    if (call) o.constraint = &constraint.emplace(vocabulary, forced);
    const auto res = gen.generate({ids}, o, [&](size_t, int64_t t) {
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
    if (stats) {
      const double per_token = res.decode_tokens ? res.decode_ms / static_cast<double>(res.decode_tokens) : 0;
      std::cerr << "[prefilled " << res.prompt_tokens << " of " << ids.size() << " conversation tokens at "
                << static_cast<int64_t>(res.prefill_ms > 0 ? 1000.0 * static_cast<double>(res.prompt_tokens) / res.prefill_ms : 0)
                << " tok/s; " << res.decode_tokens << " new at " << (per_token > 0 ? static_cast<int64_t>(1000.0 / per_token) : 0)
                << " tok/s";
      if (opt.speculation.drafts > 0) std::cerr << "; " << res.accepted_tokens << " of " << res.drafted_tokens << " drafts accepted";
      std::cerr << "]\n";
    }
    return !interrupted.load();
  };
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
      msgs.erase(msgs.begin() + static_cast<std::ptrdiff_t>(first_turn), msgs.end());
      std::cerr << "conversation forgotten\n";
      continue;
    }
    msgs.push_back(message("user", line));
    // The answer; when it calls offered tools, each call's result is asked for and the model answers again.
    for (bool call = forced != nullptr;; call = false) {
      std::string answer;
      const bool whole = answer_turn(answer, call);
      nlohmann::ordered_json reply = message("assistant", answer);
      const auto calls = whole && !turn.tools.is_null() ? take_calls(turn.tools, call, answer, reply) : std::vector<openai::ToolCall>{};
      if (call && calls.empty() && whole)
        std::cerr << "[no whole call within --max-new-tokens " << opt.max_new_tokens << ": its arguments need more]\n";
      msgs.push_back(std::move(reply));
      if (calls.empty()) break;
      for (const auto& call : calls) {
        std::cout << "[" << call.name << " " << call.arguments << "] result> " << std::flush;
        std::string result;
        if (!std::getline(std::cin, result)) {
          std::cout << "\n";
          return 0;
        }
        msgs.push_back({{"role", "tool"}, {"tool_call_id", call.id}, {"name", call.name}, {"content", result}});
      }
    }
  }
}

}  // namespace tern::cli
