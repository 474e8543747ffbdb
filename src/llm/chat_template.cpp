#include "llm/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "llm/model_config.h"

namespace tern::llm {

namespace {

// The families' published templates, for folders that carry none (Hugging Face's own, as their tokenizer_config.json
// holds them: Gemma-3's, which Gemma-2's folds a system turn into as well; Qwen's ChatML without a default system
// prompt; Phi-3.5's).
const char* const kGemmaTemplate = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%})";

const char* const kChatMLTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char* const kPhi3Template =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == "
    "'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

// A special token as tokenizer_config.json writes it: a string, or an AddedToken's {"content": ...}.
std::string token_text(const nlohmann::json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::from_source(const std::string& source, std::string bos_token, std::string eos_token) {
  ChatTemplate t;
  t.templates_["default"] = std::make_shared<const jinja::Template>(source, "chat template");
  t.sources_ = source;
  t.origin_ = "a template's text";
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& model_dir) {
  ChatTemplate t;
  nlohmann::json cfg;
  if (folder_holds(model_dir, "tokenizer_config.json")) {
    cfg = read_json_file(confined_file(model_dir, "tokenizer_config.json", "the tokenizer config"));
    t.bos_token_ = token_text(cfg, "bos_token");
    t.eos_token_ = token_text(cfg, "eos_token");
  }
  const auto add = [&](const std::string& name, const std::string& source, const std::string& what) {
    t.templates_[name] = std::make_shared<const jinja::Template>(source, what);
    t.sources_ += source;
  };
  if (cfg.is_object() && cfg.contains("chat_template")) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) add("default", ct.get<std::string>(), "tokenizer_config.json's chat_template");
    else if (ct.is_array())  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
      for (const auto& e : ct)
        if (e.is_object() && e.contains("name") && e["name"].is_string() && e.contains("template") && e["template"].is_string())
          add(e["name"].get<std::string>(), e["template"].get<std::string>(),
              "tokenizer_config.json's chat_template '" + e["name"].get<std::string>() + "'");
    if (!t.templates_.empty()) t.origin_ = "tokenizer_config.json";
  }
  if (t.templates_.empty() && folder_holds(model_dir, "chat_template.jinja")) {
    add("default",
        read_file_bytes(confined_file(model_dir, "chat_template.jinja", "the chat template"), size_t{1} << 20,
                        "chat template"),  // (real templates: under 50 KB)
        "chat_template.jinja");
    t.origin_ = "chat_template.jinja";
  }
  if (!t.templates_.empty()) return t;
  const std::string type = read_model_config(model_dir).model_type;
  const char* fallback = nullptr;
  if (type.rfind("gemma", 0) == 0) fallback = kGemmaTemplate, t.origin_ = "the Gemma-3 template";
  else if (type.rfind("qwen2", 0) == 0 || type.rfind("qwen3", 0) == 0) fallback = kChatMLTemplate, t.origin_ = "the ChatML template";
  else if (type == "phi3") fallback = kPhi3Template, t.origin_ = "the Phi-3.5 template";
  if (!fallback) return t;
  add("default", fallback, t.origin_);
  t.origin_ += " (the folder carries none; model_type " + type + ")";
  t.fallback_ = true;
  return t;
}

std::vector<int64_t> ChatTemplate::turn_end_tokens(const Tokenizer& tok) const {
  std::vector<int64_t> ids;
  for (const char* piece : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"})
    if (sources_.find(piece) != std::string::npos)
      if (const int64_t id = tok.piece_id(piece); id >= 0) ids.push_back(id);
  return ids;
}

std::vector<int64_t> with_ends(std::vector<int64_t> ends, const std::vector<int64_t>& more) {
  for (int64_t t : more)
    if (std::find(ends.begin(), ends.end(), t) == ends.end()) ends.push_back(t);
  return ends;
}

nlohmann::ordered_json chat_messages_json(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
  return j;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatOptions& options) const {
  if (templates_.empty())
    fail_unsupported("this model has no chat template (tokenizer_config.json or chat_template.jinja); use --prompt as plain text");
  // As transformers: the "tool_use" template when tools are given and the file has one, else "default".
  auto it = !options.tools.is_null() && templates_.count("tool_use") ? templates_.find("tool_use") : templates_.find("default");
  if (it == templates_.end()) it = templates_.begin();
  nlohmann::ordered_json context = {
      {"messages", messages}, {"tools", options.tools}, {"documents", nullptr}, {"add_generation_prompt", options.add_generation_prompt}};
  if (!bos_token_.empty()) context["bos_token"] = bos_token_;
  if (!eos_token_.empty()) context["eos_token"] = eos_token_;
  for (const auto& [k, v] : options.variables.items()) context[k] = v;
  return it->second->render(context);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  return render(chat_messages_json(messages), options);
}

std::vector<int64_t> encode_chat(const Tokenizer& tok, const ChatTemplate& chat, const nlohmann::ordered_json& messages,
                                 const ChatOptions& options, const CancelCheck& cancelled) {
  if (!chat.empty()) return tok.encode(chat.render(messages, options), false, cancelled);
  std::vector<ChatMessage> plain;
  for (const auto& m : messages)
    plain.push_back({m.value("role", ""), m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : ""});
  return encode_chat(tok, chat, plain, cancelled);
}

std::vector<int64_t> encode_chat(const Tokenizer& tok, const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                                 const CancelCheck& cancelled) {
  if (!chat.empty()) return tok.encode(chat.render(messages), false, cancelled);  // the template writes BOS
  std::vector<int64_t> ids;
  for (size_t i = 0; i < messages.size(); ++i) {
    const bool new_line = i > 0 && messages[i].role == "user";
    const auto part = tok.encode(new_line ? "\n" + messages[i].content : messages[i].content, i == 0, cancelled);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace tern::llm
