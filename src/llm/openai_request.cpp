// The OpenAI API's requests read field by field: completions, chat completions (messages, tools, response formats)
// and embeddings, each field checked against what OpenAI takes (a wrong one is a 400 naming it).
#include <algorithm>
#include <cmath>

#include "core/json.h"
#include "llm/openai_api.h"

namespace tern::openai {

namespace {
using json = nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& why) { throw ApiError(400, "'" + field + "' " + why, field); }

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

std::string shortest(double x) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", x);
  return s;
}

// The field, or null when absent (null means "default" in OpenAI's API).
const json& field(const json& body, const char* k) {
  static const json null;
  auto it = body.find(k);
  return it == body.end() ? null : *it;
}

std::optional<double> number(const json& body, const char* k, double lo, double hi, bool open_lo = false) {
  const json& v = field(body, k);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) bad(k, std::string("must be a number, not ") + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (open_lo && x == lo))
    bad(k, "must be " + std::string(open_lo ? "> " : "between ") + shortest(lo) + (open_lo ? " and <= " : " and ") + shortest(hi) +
               ", not " + v.dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* k, int64_t lo, int64_t hi) {
  const json& v = field(body, k);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number_integer()) bad(k, std::string("must be an integer, not ") + type_name(v));
  // (nlohmann reads a non-negative integer as unsigned: compared as such, it may pass INT64_MAX)
  const bool out = v.is_number_unsigned()
                       ? v.get<uint64_t>() > static_cast<uint64_t>(hi) || (lo > 0 && v.get<uint64_t>() < static_cast<uint64_t>(lo))
                       : v.get<int64_t>() < lo || v.get<int64_t>() > hi;
  if (out) bad(k, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", not " + v.dump());
  return v.get<int64_t>();
}

bool boolean(const json& body, const char* k) {
  const json& v = field(body, k);
  if (v.is_null()) return false;
  if (!v.is_boolean()) bad(k, std::string("must be a boolean, not ") + type_name(v));
  return v.get<bool>();
}

// A field tern does not implement: accepted only as its default (absent, null, false, 0, "", [] or {}).
void unsupported_unless_default(const json& body, const char* k) {
  const json& v = field(body, k);
  const bool is_default = v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0) ||
                          (v.is_string() && v.get<std::string>().empty()) || (v.is_array() && v.empty()) || (v.is_object() && v.empty());
  if (!is_default) bad(k, "is not supported by tern serve");
}

std::string text_content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(where, std::string("must be a string or an array of text parts, not ") + type_name(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || field(part, "type") != "text" || !field(part, "text").is_string())
      bad(at, "must be a text part, {type: text, text: ...} (tern serve takes text only)");
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls as the templates read them: [{id, type, function: {name, arguments}}] with the
// arguments an object (OpenAI sends their JSON text; transformers' templates write them with tojson). `in_order`: the
// same calls parsed keeping their keys' order, whose object arguments are taken as written.
nlohmann::ordered_json template_tool_calls(const json& calls, const nlohmann::ordered_json& in_order, const std::string& at) {
  if (!calls.is_array()) bad(at, std::string("must be an array of tool calls, not ") + type_name(calls));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string ci = at + "[" + std::to_string(i) + "]";
    const json& fn = calls[i].is_object() ? field(calls[i], "function") : json();
    if (!fn.is_object() || !field(fn, "name").is_string()) bad(ci, "must be {type: function, function: {name, arguments}}");
    const json& args = field(fn, "arguments");
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    if (args.is_string()) {
      arguments = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (arguments.is_discarded()) bad(ci + ".function.arguments", "is not JSON text");
    } else if (args.is_object()) {
      arguments = in_order.at(i).at("function").at("arguments");
    } else if (!args.is_null()) {
      bad(ci + ".function.arguments", std::string("must be a JSON string or an object, not ") + type_name(args));
    }
    nlohmann::ordered_json call = {{"type", "function"}, {"function", {{"name", fn["name"]}, {"arguments", std::move(arguments)}}}};
    if (const json& id = field(calls[i], "id"); id.is_string()) call["id"] = id;
    out.push_back(std::move(call));
  }
  return out;
}

// tools and tool_choice of a chat request (`in_order`: the body parsed keeping its keys' order). A forced call
// (required, or a named function) is decoded as the JSON object {"name", "arguments"} under the schema of the
// function's parameters — with several tools, the union of each one's (json_schema.h: the name picks its branch).
void read_tools(const nlohmann::ordered_json& in_order, const json& body, CompletionRequest& r) {
  const json& tools = field(body, "tools");
  const json& choice = field(body, "tool_choice");
  std::string mode = "auto", named;
  if (choice.is_string()) {
    mode = choice.get<std::string>();
    if (mode != "none" && mode != "auto" && mode != "required")
      bad("tool_choice", "must be none, auto, required or {type: function, function: {name}}");
  } else if (choice.is_object()) {
    const json& fn = field(choice, "function");
    if (!fn.is_object() || !field(fn, "name").is_string())
      bad("tool_choice", "must be none, auto, required or {type: function, function: {name}}");
    mode = "named", named = fn["name"].get<std::string>();
  } else if (!choice.is_null()) {
    bad("tool_choice", "must be none, auto, required or {type: function, function: {name}}");
  }
  if (tools.is_null()) {
    if (mode == "required" || mode == "named") bad("tool_choice", "asks for a tool call, and the request has no tools");
    return;
  }
  check_tools(tools);
  const auto forced = mode == "required" || mode == "named" ? tool_call_schema(tools, named) : nullptr;
  if (mode == "none") return;      // (the tools are not offered: the template renders none)
  r.tools = in_order.at("tools");  // (their schemas in the request's key order, which tojson prints)
  r.tool_choice = mode;
  r.json_schema = forced;
  r.json_object = forced != nullptr;
  if (mode == "auto") {
    try {
      r.call_schema = tool_call_schema(tools, "");
    } catch (const ApiError&) {  // (an auto call is read as written, never promised to parse)
    }
  }
}

}  // namespace

std::shared_ptr<const llm::JsonSchema> tool_call_schema(const json& tools, const std::string& named) {
  json calls = json::array();  // each forced tool's call, as a schema
  for (const json& tool : tools) {
    const json& fn = tool["function"];
    const json& params = field(fn, "parameters");
    const std::string& name = fn["name"].get_ref<const std::string&>();
    if (!named.empty() && name != named) continue;
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", name}}}, {"arguments", params.is_null() ? json{{"type", "object"}} : params}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
  }
  if (calls.empty()) bad("tool_choice", "names '" + named + "', which is not among the tools");
  try {
    return std::make_shared<const llm::JsonSchema>(calls.size() == 1 ? calls[0] : json{{"anyOf", calls}});
  } catch (const Error& e) {
    bad("tools", std::string("a forced call's parameters are not a schema tern can constrain to: ") + e.what());
  }
}

void check_tools(const json& tools) {
  if (!tools.is_array() || tools.empty() || tools.size() > 128)
    bad("tools", "must be an array of 1 to 128 {type: function, function: {name, parameters}}");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const json& fn = tools[i].is_object() ? field(tools[i], "function") : json();
    if (!tools[i].is_object() || field(tools[i], "type") != "function" || !fn.is_object() || !field(fn, "name").is_string() ||
        fn["name"].get<std::string>().empty())
      bad(at, "must be {type: function, function: {name, description, parameters}}");
    const json& params = field(fn, "parameters");
    if (!params.is_null() && !params.is_object()) bad(at + ".function.parameters", "must be a JSON schema object");
    const std::string& name = fn["name"].get_ref<const std::string&>();
    if (std::find(names.begin(), names.end(), name) != names.end()) bad(at + ".function.name", "repeats '" + name + "'");
    names.push_back(name);
  }
}

std::vector<PromptInput> read_prompts(const json& v, const std::string& name, size_t most) {
  const auto ids_of = [&](const json& a, const std::string& at) {
    PromptInput p;
    p.is_ids = true;
    if (a.empty()) bad(at, "must not be an empty list of token ids");
    for (const json& t : a) {
      if (!t.is_number_integer()) bad(at, std::string("must be a string or token ids (integers), not a list holding ") + type_name(t));
      if (t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad(at, "holds a token id past int64");
      p.ids.push_back(t.get<int64_t>());
    }
    return p;
  };
  std::vector<PromptInput> out;
  if (v.is_string()) {
    out.push_back({v.get<std::string>(), {}, false});
  } else if (v.is_array() && !v.empty() && v[0].is_number()) {
    out.push_back(ids_of(v, name));
  } else if (v.is_array() && !v.empty()) {
    if (v.size() > most) bad(name, "holds " + std::to_string(v.size()) + " prompts; at most " + std::to_string(most) + " a request");
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string at = name + "[" + std::to_string(i) + "]";
      if (v[i].is_string()) out.push_back({v[i].get<std::string>(), {}, false});
      else if (v[i].is_array()) out.push_back(ids_of(v[i], at));
      else bad(at, std::string("must be a string or a list of token ids, not ") + type_name(v[i]));
    }
  } else {
    bad(name, std::string("must be a string, token ids, or a list of either, not ") + (v.is_array() ? "an empty list" : type_name(v)));
  }
  return out;
}

namespace {
json request_object(std::string_view body_text) {
  json body;
  try {
    body = parse_json(body_text, "the request body");
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  if (!body.is_object()) throw ApiError(400, std::string("the request body must be a JSON object, not ") + type_name(body));
  return body;
}

std::string model_field(const json& body) {
  const json& m = field(body, "model");
  if (m.is_null()) return "";
  if (!m.is_string()) bad("model", std::string("must be a string, not ") + type_name(m));
  return m.get<std::string>();
}
}  // namespace

EmbeddingRequest parse_embedding_request(std::string_view body_text) {
  const json body = request_object(body_text);
  EmbeddingRequest r;
  r.model = model_field(body);
  const json& in = field(body, "input");
  if (in.is_null()) bad("input", "is required");
  r.inputs = read_prompts(in, "input", 2048);
  if (const json& f = field(body, "encoding_format"); !f.is_null()) {
    if (f != "float" && f != "base64") bad("encoding_format", "must be float or base64, not " + f.dump());
    r.base64 = f == "base64";
  }
  r.dimensions = integer(body, "dimensions", 1, 1 << 20);
  return r;
}

json embedding_response(const EmbeddingRequest& r, const std::string& model, const std::vector<std::vector<float>>& vectors,
                        int64_t prompt_tokens) {
  static const char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json embedding;
    if (r.base64) {  // (x86-64 and AArch64 Linux are little-endian: the floats' bytes as they lie)
      const auto* bytes = reinterpret_cast<const unsigned char*>(vectors[i].data());
      const size_t n = vectors[i].size() * sizeof(float);
      std::string text;
      for (size_t k = 0; k < n; k += 3) {
        const uint32_t v = uint32_t{bytes[k]} << 16 | (k + 1 < n ? uint32_t{bytes[k + 1]} << 8 : 0) | (k + 2 < n ? bytes[k + 2] : 0);
        text += kBase64[v >> 18 & 63];
        text += kBase64[v >> 12 & 63];
        text += k + 1 < n ? kBase64[v >> 6 & 63] : '=';
        text += k + 2 < n ? kBase64[v & 63] : '=';
      }
      embedding = std::move(text);
    } else {
      embedding = vectors[i];
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

CompletionRequest parse_completion_request(std::string_view body_text, bool chat) {
  const json body = request_object(body_text);
  CompletionRequest r;
  r.chat = chat;
  r.model = model_field(body);
  if (chat) {
    const json& ms = field(body, "messages");
    if (!ms.is_array() || ms.empty()) bad("messages", "must be a non-empty array of {role, content}");
    r.chat_messages = nlohmann::ordered_json::array();
    // Tools and tool calls are rendered in the order their keys were written (Python's dicts keep it): the body
    // parsed once more keeping it, when it has either.
    const bool ordered = !field(body, "tools").is_null() ||
                         std::any_of(ms.begin(), ms.end(), [](const json& m) { return m.is_object() && m.contains("tool_calls"); });
    const nlohmann::ordered_json in_order = ordered ? nlohmann::ordered_json::parse(body_text) : nlohmann::ordered_json::object();
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      const json& m = ms[i];
      if (!m.is_object()) bad(at, std::string("must be an object, not ") + type_name(m));
      const json& role = field(m, "role");
      if (!role.is_string()) bad(at + ".role", "must be a string");
      std::string rs = role.get<std::string>();
      if (rs == "developer") rs = "system";  // OpenAI's newer name for it
      if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool")
        bad(at + ".role", "must be system, developer, user, assistant or tool, not '" + role.get<std::string>() + "'");
      const json& calls = field(m, "tool_calls");
      const bool calling = rs == "assistant" && !calls.is_null();
      const json& content = field(m, "content");
      const std::string text = calling && content.is_null() ? "" : text_content(content, at + ".content");
      nlohmann::ordered_json cm = {{"role", rs}, {"content", text}};
      if (calling) cm["tool_calls"] = template_tool_calls(calls, in_order.at("messages").at(i).at("tool_calls"), at + ".tool_calls");
      if (rs == "tool")
        for (const char* k : {"tool_call_id", "name"})
          if (const json& v = field(m, k); v.is_string()) cm[k] = v;
      r.chat_messages.push_back(std::move(cm));
    }
    read_tools(in_order, body, r);
  } else {
    r.prompts = read_prompts(field(body, "prompt"), "prompt", 64);
    r.echo = boolean(body, "echo");
    unsupported_unless_default(body, "suffix");
    unsupported_unless_default(body, "best_of");
  }
  r.ignore_eos = boolean(body, "ignore_eos");  // (vLLM's and llama-server's extension: benchmarks run to max_tokens)
  // max_completion_tokens is the newer name; either may be given.
  r.max_tokens = integer(body, "max_tokens", 0, int64_t{1} << 40);
  if (auto m = integer(body, "max_completion_tokens", 0, int64_t{1} << 40)) r.max_tokens = m;
  if (auto t = number(body, "temperature", 0, 2)) {
    if (*t == 0) r.sampling.greedy = true;
    else r.sampling.temperature = static_cast<float>(*t);
  }
  if (auto p = number(body, "top_p", 0, 1, true)) r.sampling.top_p = static_cast<float>(*p);
  if (auto k = integer(body, "top_k", 0, 1 << 20)) r.sampling.top_k = static_cast<int>(*k);
  if (auto m = number(body, "min_p", 0, 1)) r.sampling.min_p = static_cast<float>(*m);
  if (auto p = number(body, "repetition_penalty", 0, 100, true)) r.sampling.repetition_penalty = static_cast<float>(*p);
  // A given seed repeats its text exactly; without one every request samples from a fresh random seed (as the
  // OpenAI API and llama-server do), not the same fixed one.
  if (auto s = integer(body, "seed", INT64_MIN, INT64_MAX)) r.sampling.seed = static_cast<uint64_t>(*s);
  else r.sampling.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (auto p = number(body, "frequency_penalty", -2, 2)) r.sampling.frequency_penalty = static_cast<float>(*p);
  if (auto p = number(body, "presence_penalty", -2, 2)) r.sampling.presence_penalty = static_cast<float>(*p);
  if (const json& s = field(body, "stop"); !s.is_null()) {
    if (s.is_string()) r.stop.push_back(s.get<std::string>());
    else if (s.is_array() && s.size() <= 4) {
      for (const json& x : s) {
        if (!x.is_string()) bad("stop", "must be a string or an array of up to 4 strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or an array of up to 4 strings");
    }
    for (const auto& x : r.stop)
      if (x.empty()) bad("stop", "must not hold an empty string");
  }
  r.n = static_cast<int>(integer(body, "n", 1, 16).value_or(1));
  if (r.prompts.size() * static_cast<size_t>(r.n) > 64)
    bad("n", std::to_string(r.n) + " choices of each of " + std::to_string(r.prompts.size()) + " prompts are more than 64 a request");
  r.stream = boolean(body, "stream");
  if (const json& so = field(body, "stream_options"); !so.is_null()) {
    if (!so.is_object()) bad("stream_options", std::string("must be an object, not ") + type_name(so));
    if (!r.stream) bad("stream_options", "is only allowed with stream: true");
    r.include_usage = boolean(so, "include_usage");
  }
  // logprobs: chat asks with a boolean and top_logprobs (0-20), completions with the number of alternatives (0-5 at
  // OpenAI; 20 here, as chat's).
  if (chat) {
    if (boolean(body, "logprobs")) r.logprobs = integer(body, "top_logprobs", 0, 20).value_or(0);
    else if (!field(body, "top_logprobs").is_null()) bad("top_logprobs", "needs logprobs: true");
  } else if (auto n = integer(body, "logprobs", 0, 20)) {
    r.logprobs = *n;
  }
  for (const char* k : {"logit_bias", "functions", "function_call"}) unsupported_unless_default(body, k);
  if (!chat)
    for (const char* k : {"tools", "tool_choice"}) unsupported_unless_default(body, k);
  if (const json& rf = field(body, "response_format"); !rf.is_null()) {
    if (!r.tool_choice.empty() && r.tool_choice != "auto" && rf != json{{"type", "text"}})
      bad("response_format", "cannot be combined with a tool_choice that forces a call");
    const json& type = rf.is_object() ? field(rf, "type") : rf;
    if (!rf.is_object() || !type.is_string())
      bad("response_format", "must be an object {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
    if (type != "text" && type != "json_object" && type != "json_schema")
      bad("response_format.type", "must be text, json_object or json_schema, not '" + type.get<std::string>() + "'");
    r.json_object = type != "text";
    if (type == "json_schema") {  // {"json_schema": {"name", "schema", "strict", "description"}}: the schema compiled here
      const json& js = field(rf, "json_schema");
      if (!js.is_object()) bad("response_format.json_schema", std::string("must be an object with a schema, not ") + type_name(js));
      if (const json& schema = field(js, "schema"); !schema.is_null()) {
        try {
          r.json_schema = std::make_shared<const llm::JsonSchema>(schema);
        } catch (const Error& e) {
          bad("response_format.json_schema.schema", std::string("is not one tern can constrain to: ") + e.what());
        }
      }
    }
  }
  return r;
}

}  // namespace tern::openai
