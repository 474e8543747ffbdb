#include "llm/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"

namespace tern::llm {
namespace fs = std::filesystem;

namespace {
std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
}  // namespace

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::Llama3: return "Llama-3";
    case ChatFamily::ChatML: return "ChatML";
    case ChatFamily::Llama2: return "Llama-2";
    case ChatFamily::Phi3: return "Phi-3";
    case ChatFamily::None: break;
  }
  return "none";
}

ChatFamily detect_chat_family(const std::string& model_dir) {
  std::string tmpl;
  if (folder_holds(model_dir, "tokenizer_config.json")) {
    const nlohmann::json j = read_json_file(confined_file(model_dir, "tokenizer_config.json", "the tokenizer config"));
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) tmpl = j["chat_template"];
  }
  if (tmpl.empty() && folder_holds(model_dir, "chat_template.jinja"))
    tmpl = read_file_bytes(confined_file(model_dir, "chat_template.jinja", "the chat template"), size_t{1} << 20,
                           "chat template");  // (real templates: under 50 KB)
  if (tmpl.find("<|start_header_id|>") != std::string::npos) return ChatFamily::Llama3;
  if (tmpl.find("<|im_start|>") != std::string::npos) return ChatFamily::ChatML;
  if (tmpl.find("<|user|>") != std::string::npos && tmpl.find("<|end|>") != std::string::npos) return ChatFamily::Phi3;
  if (tmpl.find("[INST]") != std::string::npos) return ChatFamily::Llama2;
  const std::string type = read_model_config(model_dir).model_type;
  if (type == "qwen2" || type == "qwen3") return ChatFamily::ChatML;
  if (type == "phi3") return ChatFamily::Phi3;
  return ChatFamily::None;
}

std::string format_chat(ChatFamily family, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (family) {
    case ChatFamily::Llama3:
      out = "<|begin_of_text|>";
      for (const auto& m : messages) out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::ChatML:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatFamily::Phi3:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      return out + "<|assistant|>\n";
    case ChatFamily::Llama2: {
      // A system message is folded into the first user turn inside <<SYS>> markers.
      std::string system;
      size_t first = 0;
      if (!messages.empty() && messages[0].role == "system") {
        system = messages[0].content;
        first = 1;
      }
      for (size_t i = first; i < messages.size(); ++i) {
        const auto& m = messages[i];
        std::string content = m.content;
        if (i == first && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        if (m.role == "user") out += "<s>[INST] " + trim(content) + " [/INST]";
        else if (m.role == "assistant") out += " " + trim(content) + " </s>";
        else fail("Llama-2 chat: unexpected role '", m.role, "'");
      }
      return out;
    }
    case ChatFamily::None: break;
  }
  fail_unsupported("this model has no chat template tern recognizes (Llama-3, ChatML, Llama-2, Phi-3); use --prompt as plain text");
}

std::vector<int64_t> encode_chat(const Tokenizer& tok, ChatFamily family, const std::vector<ChatMessage>& messages,
                                 const CancelCheck& cancelled) {
  if (family != ChatFamily::None) return tok.encode(format_chat(family, messages), false, cancelled);  // the template writes BOS
  std::vector<int64_t> ids;
  for (size_t i = 0; i < messages.size(); ++i) {
    const bool new_line = i > 0 && messages[i].role == "user";
    const auto part = tok.encode(new_line ? "\n" + messages[i].content : messages[i].content, i == 0, cancelled);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace tern::llm
