// A Jinja interpreter for chat templates: the subset of Jinja2 that Hugging Face's tokenizer_config.json
// `chat_template`s and GGUFs' `tokenizer.chat_template`s use, rendered as transformers' apply_chat_template
// renders them (jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; its
// `tojson` is json.dumps without ASCII escapes; `raise_exception` and `strftime_now` among the globals).
//
// Why our own: Debian 12 packages no Jinja engine for C++ (`apt-cache search jinja`: Python's only), and a
// chat template needs a few hundred lines of one — statements if/elif/else, for (loop variables, `else`,
// a filter, break/continue), set (names, namespace attributes, blocks), macro; Python's expressions with
// its string, list and dict methods; the filters and tests templates call. Anything else is refused with the
// template's line, never guessed. tests/test_jinja.cpp renders the real templates of SmolLM2, Gemma-3, Qwen3,
// Phi-3 and Llama-3 and compares with jinja2's text.
//
// Inside llm/jinja/: value (Python's values and how they print), lexer (pieces and tokens), parser (the tree),
// renderer (the walk), builtins (the methods, filters and tests).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace tern::llm::jinja {

struct Node;

struct RenderOptions {
  // strftime_now(format) in templates (Llama 3.x dates their system turn with it); default: today, local time.
  std::function<std::string(const std::string& format)> strftime_now;
  size_t max_output_bytes = size_t{16} << 20;  // a hostile template's output is refused past this
  int64_t max_steps = 10'000'000;              // and its work (a real chat template over a long chat: under 100,000)
};

// A parsed template: parse once, render per conversation. Errors (syntax, an unsupported construct, a
// runtime type error, raise_exception) are tern::Error naming `what` and the template's line.
class Template {
 public:
  explicit Template(const std::string& source, std::string what = "chat template");
  // `context`: a JSON object whose members are the template's variables (messages, tools, bos_token, ...), in
  // their order (a tool's schema prints as it was written: tojson keeps the order, as Python's dicts do).
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Node> root_;
  std::string what_;
};

}  // namespace tern::llm::jinja
