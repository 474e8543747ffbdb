// Chat prompts for the common model families. tern does not run Jinja: it recognizes the family from
// the chat_template in tokenizer_config.json (or the model type) and formats messages the way that
// family's template does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llm/tokenizer.h"

namespace tern::llm {

enum class ChatFamily { None, Llama3, ChatML, Llama2, Phi3 };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The family of a model folder; None when nothing is recognized.
ChatFamily detect_chat_family(const std::string& model_dir);
const char* chat_family_name(ChatFamily f);
// The prompt text, ending with the assistant's turn opened (add_generation_prompt). The text includes
// the family's BOS marker where the template writes one, so encode it without adding special tokens.
std::string format_chat(ChatFamily family, const std::vector<ChatMessage>& messages);

// A conversation's token ids, as tern chat and tern serve feed them: format_chat's text, or with no
// template (a base model) one running text — BOS, the first message, then each user message on a line
// of its own and each assistant message continuing the line before it.
std::vector<int64_t> encode_chat(const Tokenizer& tok, ChatFamily family, const std::vector<ChatMessage>& messages,
                                 const CancelCheck& cancelled = {});

}  // namespace tern::llm
