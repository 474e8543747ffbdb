// The OpenAI API's answers: a choice's constraint, tool calls read back out of text, the response bodies and
// stream chunks, errors and ids (the requests are openai_request.cpp's).
#include "llm/openai_api.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <sstream>

#include "core/json.h"

namespace tern::openai {

using json = nlohmann::json;

std::shared_ptr<llm::JsonConstraint> choice_constraint(const CompletionRequest& r, const llm::ChatTemplate* chat,
                                                       const std::function<std::shared_ptr<const llm::JsonVocabulary>()>& vocabulary) {
  if (r.json_object) return std::make_shared<llm::JsonConstraint>(vocabulary(), r.json_schema);
  static const std::string kHermesCall = "<tool_call>";
  if (r.call_schema && chat && chat->writes(kHermesCall))
    return std::make_shared<llm::JsonConstraint>(vocabulary(), r.call_schema, kHermesCall);
  return nullptr;
}

nlohmann::ordered_json tool_call_message(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", nlohmann::ordered_json::parse(call.arguments)}}}};
}

namespace {

json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::vector<int64_t> chat_prompt(const llm::Tokenizer& tok, const llm::ChatTemplate& chat, const CompletionRequest& r,
                                 const llm::CancelCheck& cancelled) {
  llm::ChatOptions o;
  o.tools = r.tools;
  return llm::encode_chat(tok, chat, r.chat_messages, o, cancelled);
}

void take_tool_calls(const CompletionRequest& r, Choice& c) {
  c.tool_calls = parse_tool_calls(r, c.text);
  if (!c.tool_calls.empty()) c.finish_reason = "tool_calls";
}

std::vector<ToolCall> parse_tool_calls(const CompletionRequest& r, std::string& text) {
  if (!r.calls_tools()) return {};
  return parse_tool_calls(r.tools, r.tool_choice != "auto", text);
}

std::vector<ToolCall> parse_tool_calls(const nlohmann::ordered_json& tools, bool forced, std::string& text) {
  std::vector<ToolCall> calls;
  const auto take = [&](const std::string& object_text) {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(trimmed(object_text), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    const std::string name = j["name"];
    if (std::none_of(tools.begin(), tools.end(), [&](const auto& t) { return t["function"]["name"] == name; })) return false;
    nlohmann::ordered_json args = j.contains("arguments")    ? j["arguments"]
                                  : j.contains("parameters") ? j["parameters"]
                                                             : nlohmann::ordered_json::object();
    if (args.is_string()) args = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
    if (!args.is_object()) return false;
    calls.push_back({random_id("call_"), name, args.dump()});
    return true;
  };
  if (forced) {  // a forced call: the whole text is its object
    if (take(text)) text.clear();
    return calls;
  }
  std::string rest;
  size_t pos = 0;
  for (size_t open; (open = text.find("<tool_call>", pos)) != std::string::npos;) {
    const size_t body = open + 11, close = text.find("</tool_call>", body);
    const size_t end = close == std::string::npos ? text.size() : close;
    if (!take(text.substr(body, end - body))) break;
    rest += text.substr(pos, open - pos);
    pos = close == std::string::npos ? text.size() : close + 12;
  }
  if (!calls.empty()) {
    text = trimmed(rest + text.substr(pos));
    return calls;
  }
  if (const std::string t = trimmed(text); !t.empty() && t[0] == '{' && take(t)) text.clear();
  return calls;
}

std::string error_body(const ApiError& e) {
  return to_wire({{"error",
                   {{"message", e.what()},
                    {"type", e.type},
                    {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                    {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

std::string to_wire(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json logprobs_json(const CompletionRequest& r, const std::vector<TokenLogprob>& tokens, size_t text_offset) {
  if (r.logprobs < 0) return nullptr;
  // (a token's text may be part of a character: `bytes` holds it exactly, `token` with U+FFFD in its place)
  auto bytes = [](const std::string& t) {
    json b = json::array();
    for (unsigned char c : t) b.push_back(c);
    return b;
  };
  if (r.chat) {
    json content = json::array();
    for (const auto& t : tokens) {
      json top = json::array();
      for (const auto& [text, lp] : t.top) top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes(text)}});
      content.push_back({{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes(t.text)}, {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    texts.push_back(t.text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [text, lp] : t.top) top.emplace(text, lp);  // (two tokens of one text: the likelier, listed first)
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.text.size();
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json completion_response(const CompletionRequest& r, const std::string& id, int64_t created, const std::vector<Choice>& choices,
                         const Usage& usage) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json c = {{"index", i}, {"finish_reason", choices[i].finish_reason}, {"logprobs", choices[i].logprobs}};
    if (r.chat) {
      c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
      if (!choices[i].tool_calls.empty()) {
        if (choices[i].text.empty()) c["message"]["content"] = nullptr;
        c["message"]["tool_calls"] = tool_calls_json(choices[i].tool_calls, false);
      }
    } else {
      c["text"] = choices[i].text;
    }
    cs.push_back(std::move(c));
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", cs},
          {"usage",
           {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
}

json completion_chunk(const CompletionRequest& r, const std::string& id, int64_t created, int index, const std::string& text,
                      const std::string& finish_reason, bool role, const json& logprobs) {
  json c = {{"index", index}, {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}, {"logprobs", logprobs}};
  if (r.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({c})}};
}

json tool_calls_chunk(const CompletionRequest& r, const std::string& id, int64_t created, int index, const std::vector<ToolCall>& calls) {
  json c = {{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr}, {"delta", {{"tool_calls", tool_calls_json(calls, true)}}}};
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", r.model}, {"choices", json::array({c})}};
}

std::vector<json> tool_call_chunks(const CompletionRequest& r, const std::string& id, int64_t created, int index, ChoiceText& c,
                                   bool opened) {
  Choice whole;
  whole.text = c.ready;
  take_tool_calls(r, whole);
  if (whole.tool_calls.empty()) return {};
  std::vector<json> chunks;
  if (!opened) chunks.push_back(completion_chunk(r, id, created, index, "", "", true));
  chunks.push_back(tool_calls_chunk(r, id, created, index, whole.tool_calls));
  c.ready = whole.text, c.finish_reason = whole.finish_reason;
  return chunks;
}

json usage_chunk(const CompletionRequest& r, const std::string& id, int64_t created, const Usage& usage) {
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array()},
          {"usage",
           {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
}

llm::SequenceRequest sequence_request(const CompletionRequest& r, size_t index, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                      const llm::ModelConfig& cfg, const std::vector<int64_t>& turn_ends) {
  llm::SequenceRequest s;
  s.prompt = std::move(prompt);
  s.max_new_tokens = max_new_tokens;
  s.sampling = llm::sampling_options(r.sampling, cfg, r.chat ? llm::SamplingUse::Conversation : llm::SamplingUse::Completion);
  s.sampling.seed += static_cast<uint64_t>(index);
  if (!r.ignore_eos) s.eos_token_ids = r.chat ? llm::with_ends(cfg.eos_token_ids, turn_ends) : cfg.eos_token_ids;
  if (r.logprobs >= 0) s.top_logprobs = r.logprobs;
  return s;
}

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  std::ostringstream s;
  s << prefix << std::hex << rng();
  return s.str();
}

TokenLogprob token_logprob(const llm::Tokenizer& tok, const llm::TokenLogprobs& lp) {
  TokenLogprob t{tok.decode({lp.token}), lp.logprob, {}};
  for (const auto& [id, p] : lp.top) t.top.emplace_back(tok.decode({id}), p);
  return t;
}

bool ChoiceText::push(int64_t token) {
  ++tokens;
  ready += stops.push(text->push(token));
  if (stops.stopped()) finish_reason = "stop";
  return !stops.stopped();
}

void ChoiceText::finish(llm::FinishReason why) {
  if (finish_reason.empty()) finish_reason = why == llm::FinishReason::Length ? "length" : "stop";
  if (!stops.stopped()) ready += stops.push(text->flush()) + stops.flush();
}

}  // namespace tern::openai
