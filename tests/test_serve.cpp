// tern serve's OpenAI API layer (llm/openai_api.h): requests read and refused field by field
// (tests/serve/bad_requests.tsv, which tests/cli_serve.sh also sends over HTTP), stop strings over a
// stream, and the response shapes the openai client reads.
#include <doctest/doctest.h>

#include <fstream>

#include "llm/json_constraint.h"
#include "llm/openai_api.h"
#include "llm/tokenizer.h"

using namespace tern::openai;

TEST_CASE("tern serve: every malformed request of bad_requests.tsv is a 400 naming the field") {
  std::ifstream f(std::string(TERN_SOURCE_DIR) + "/tests/serve/bad_requests.tsv");
  REQUIRE(f);
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    REQUIRE(b != std::string::npos);
    const std::string endpoint = line.substr(0, a), body = line.substr(a + 1, b - a - 1), expected = line.substr(b + 1);
    CAPTURE(body);
    std::string error = "(accepted)";
    int status = 0;
    try {
      if (endpoint == "embeddings") parse_embedding_request(body);
      else parse_completion_request(body, endpoint == "chat");
    } catch (const ApiError& e) {
      error = e.what();
      status = e.status;
    }
    CHECK(status == 400);
    CHECK_MESSAGE(error.find(expected) != std::string::npos, error);
    ++n;
  }
  CHECK(n >= 20);
}

TEST_CASE("tern serve: a request's fields are read as OpenAI defines them") {
  const auto r = parse_completion_request(
      R"({"model": "m", "prompt": ["Once"], "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3, "seed": 9,
          "stop": "\n", "n": 2, "stream": true, "stream_options": {"include_usage": true}, "user": "ignored",
          "logprobs": null, "frequency_penalty": 0, "some_extension": [1, 2]})",
      false);
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0].text == "Once");
  CHECK(!r.ignore_eos);
  CHECK(parse_completion_request(R"({"prompt": "x", "ignore_eos": true})", false).ignore_eos);
  CHECK(!r.prompts[0].is_ids);
  // Prompts as token ids, and lists of texts and ids (each its n choices).
  const auto ids = parse_completion_request(R"({"prompt": [5, 6, 7]})", false);
  REQUIRE(ids.prompts.size() == 1);
  CHECK(ids.prompts[0].is_ids);
  CHECK(ids.prompts[0].ids == std::vector<int64_t>{5, 6, 7});
  const auto mixed = parse_completion_request(R"({"prompt": ["a", [1, 2], "b"], "n": 2})", false);
  REQUIRE(mixed.prompts.size() == 3);
  CHECK(mixed.prompts[1].ids == std::vector<int64_t>{1, 2});
  CHECK(mixed.prompts[2].text == "b");
  CHECK(r.max_tokens == 7);
  CHECK(r.sampling.greedy);  // temperature 0
  CHECK(r.sampling.top_p == 0.5f);
  CHECK(r.sampling.top_k == 3);
  CHECK(r.sampling.seed == 9);
  CHECK(r.stop == std::vector<std::string>{"\n"});
  CHECK(r.n == 2);
  CHECK(r.stream);
  CHECK(r.include_usage);
  const auto c = parse_completion_request(
      R"({"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
          "max_completion_tokens": 5, "temperature": 0.7})",
      true);
  REQUIRE(c.chat_messages.size() == 2);
  CHECK(c.chat_messages[0]["role"] == "system");
  CHECK(c.chat_messages[1]["content"] == "Hi there");
  CHECK(c.max_tokens == 5);
  CHECK(!c.sampling.greedy);
  CHECK(c.sampling.temperature == doctest::Approx(0.7f));
}

TEST_CASE("tern serve: JSON nested a million deep is refused or read, never a crash") {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  CHECK_THROWS_AS(parse_completion_request(deep, false), ApiError);
}

TEST_CASE("tern serve: response and chunk shapes") {
  CompletionRequest chat = parse_completion_request(R"({"messages": [{"role": "user", "content": "x"}]})", true);
  chat.model = "m";
  const auto full = completion_response(chat, "chatcmpl-1", 5, {{"Hi", "stop", nullptr, {}}}, {3, 1});
  CHECK(full["object"] == "chat.completion");
  CHECK(full["choices"][0]["message"]["content"] == "Hi");
  CHECK(full["choices"][0]["finish_reason"] == "stop");
  CHECK(full["usage"]["total_tokens"] == 4);
  const auto first = completion_chunk(chat, "chatcmpl-1", 5, 0, "", "", true);
  CHECK(first["choices"][0]["delta"]["role"] == "assistant");
  CHECK(first["choices"][0]["finish_reason"].is_null());
  const auto last = completion_chunk(chat, "chatcmpl-1", 5, 0, "", "length");
  CHECK(last["choices"][0]["delta"].empty());
  CHECK(last["choices"][0]["finish_reason"] == "length");
  // Text that is not UTF-8 (a character cut by a stop string) goes out replaced, not as an exception.
  CHECK(to_wire(completion_chunk(chat, "c", 5, 0, "a\xE2\x82", "")).find("a\xEF\xBF\xBD") != std::string::npos);
  // logprobs: chat's list of {token, logprob, bytes, top_logprobs}; completions' four parallel lists.
  chat.logprobs = 2;
  const std::vector<TokenLogprob> lps = {{"Hi", -0.25f, {{"Hi", -0.25f}, {"Ho", -1.5f}}}, {"\xE2", -2.0f, {}}};
  const auto lc = logprobs_json(chat, lps, 0);
  CHECK(lc["content"][0]["token"] == "Hi");
  CHECK(lc["content"][0]["logprob"] == -0.25f);
  CHECK(lc["content"][0]["bytes"] == nlohmann::json({72, 105}));
  CHECK(lc["content"][0]["top_logprobs"][1]["token"] == "Ho");
  CHECK(lc["content"][1]["bytes"] == nlohmann::json({0xE2}));  // (its token goes out as U+FFFD; bytes keep it)
  CompletionRequest completion = parse_completion_request(R"({"prompt": "x", "logprobs": 2})", false);
  CHECK(completion.logprobs == 2);
  const auto lt = logprobs_json(completion, lps, 5);
  CHECK(lt["tokens"] == nlohmann::json({"Hi", "\xE2"}));
  CHECK(lt["token_logprobs"][1] == -2.0f);
  CHECK(lt["top_logprobs"][0]["Ho"] == -1.5f);
  CHECK(lt["text_offset"] == nlohmann::json({5, 7}));
  CHECK(logprobs_json(parse_completion_request(R"({"prompt": "x"})", false), lps, 0).is_null());
  CHECK(parse_completion_request(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", true).logprobs == 0);
  const auto err = nlohmann::json::parse(error_body(ApiError(400, "'n' must be", "n")));
  CHECK(err["error"]["param"] == "n");
  CHECK(err["error"]["type"] == "invalid_request_error");
}

TEST_CASE("tern serve: tools — the request read, the template fed, calls read back out of the answer") {
  const std::string weather =
      R"({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city, now.", "parameters": )"
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";
  // auto: the tools offered in their key order, an assistant's call with its arguments as an object, a tool result.
  const CompletionRequest r = parse_completion_request(
      R"({"messages": [{"role": "user", "content": "Paris?"}, {"role": "assistant", "content": null, "tool_calls": [)"
      R"({"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},)"
      R"({"role": "tool", "tool_call_id": "call_1", "content": "21"}], "tools": [)" +
          weather + "]}",
      true);
  CHECK(r.calls_tools());
  CHECK(r.tool_choice == "auto");
  CHECK_FALSE(r.json_object);
  CHECK(r.tools[0]["function"].begin().key() == "name");  // (the request's order, which tojson prints)
  CHECK(r.chat_messages[1]["tool_calls"][0]["function"]["arguments"]["city"] == "Paris");
  CHECK(r.chat_messages[2]["tool_call_id"] == "call_1");
  // Arguments sent as an object keep the order they were written in (sorted, "city" would come first).
  const CompletionRequest as_object = parse_completion_request(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", )"
      R"("arguments": {"unit": "celsius", "city": "Paris"}}}]}]})",
      true);
  CHECK(as_object.chat_messages[0]["tool_calls"][0]["function"]["arguments"].begin().key() == "unit");
  // Calls read back: Hermes blocks (content kept around them), a Llama-3 object, unknown tools and prose left alone.
  std::string text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  auto calls = parse_tool_calls(r, text);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].name == "get_weather");
  CHECK(calls[0].arguments == R"({"city":"Oslo"})");
  CHECK(calls[0].id.rfind("call_", 0) == 0);
  CHECK(text == "Let me check.");
  text = R"( {"name": "get_weather", "parameters": {"city": "Rome"}} )";
  CHECK(parse_tool_calls(r, text).at(0).arguments == R"({"city":"Rome"})");
  CHECK(text.empty());
  for (std::string prose : {std::string(R"({"name": "launch_rockets", "arguments": {}})"), std::string("It is sunny."),
                            std::string("<tool_call>{not json</tool_call>")}) {
    const std::string before = prose;
    CHECK(parse_tool_calls(r, prose).empty());
    CHECK(prose == before);
  }
  // The response: content null, the calls, finish_reason tool_calls; streamed, one chunk of indexed calls.
  Choice c{"<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>", "stop", nullptr, {}};
  take_tool_calls(r, c);
  const auto full = completion_response(r, "chatcmpl-1", 5, {c}, {3, 1});
  const auto& m = full["choices"][0]["message"];
  CHECK(full["choices"][0]["finish_reason"] == "tool_calls");
  CHECK(m["content"].is_null());
  CHECK(m["tool_calls"][0]["type"] == "function");
  CHECK(m["tool_calls"][0]["function"]["arguments"] == R"({"city":"Oslo"})");
  CHECK(tool_calls_chunk(r, "chatcmpl-1", 5, 0, c.tool_calls)["choices"][0]["delta"]["tool_calls"][0]["index"] == 0);
  // A forced call: the answer is decoded as {"name", "arguments"} under the tool's parameters; "none" offers no tools.
  const CompletionRequest forced = parse_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "tools": [)" +
          weather + "]}",
      true);
  CHECK(forced.json_object);
  REQUIRE(forced.json_schema);
  std::string whole = R"({"name": "get_weather", "arguments": {"city": "Lima"}})";
  CHECK(parse_tool_calls(forced, whole).size() == 1);
  // auto: where the template writes calls in <tool_call> blocks, each call the model begins is decoded under the
  // tools' schemas (a constraint with that trigger, free text till then); elsewhere the calls are read as written.
  std::ifstream qf(std::string(TERN_SOURCE_DIR) + "/tests/fixtures/chat_templates/qwen3-0.6b.jinja");
  const auto hermes = tern::llm::ChatTemplate::from_source(std::string((std::istreambuf_iterator<char>(qf)), {}), "", "<|im_end|>");
  const auto plain = tern::llm::ChatTemplate::from_source("{% for m in messages %}{{ m.content }}{% endfor %}");
  const auto no_vocabulary = [] { return std::shared_ptr<const tern::llm::JsonVocabulary>(); };  // (never asked: no step runs)
  const auto on_call = choice_constraint(r, &hermes, no_vocabulary);
  REQUIRE(on_call);
  CHECK_FALSE(on_call->in_value());
  CHECK_FALSE(choice_constraint(r, &plain, no_vocabulary));
  // "required" over several tools: the name picks the tool whose parameters the arguments are decoded under.
  const std::string time =
      R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}}}})";
  const CompletionRequest required = parse_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required", "tools": [)" + weather + "," + time + "]}", true);
  REQUIRE(required.json_schema);
  auto decodes = [&](const std::string& text) {
    tern::llm::JsonGrammar g(required.json_schema.get());
    return g.feed(text) && g.complete();
  };
  CHECK(decodes(R"({"name": "get_time", "arguments": {"zone": 2}})"));
  CHECK(decodes(R"({"name": "get_weather", "arguments": {"city": "Lima"}})"));
  CHECK_FALSE(decodes(R"({"name": "get_time", "arguments": {"zone": "two"}})"));
  CHECK_FALSE(decodes(R"({"name": "get_weather", "arguments": {}})"));
  const CompletionRequest none = parse_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none", "tools": [)" + weather + "]}", true);
  CHECK_FALSE(none.calls_tools());
}

TEST_CASE("tern serve: a tool conversation over HTTP gives transformers' text and ids (Qwen3's template)") {
  // The goldens' Qwen3 "tool call and result" conversation, sent as the openai client sends it (arguments as JSON
  // text), rendered and encoded through chat_prompt's path (what usage.prompt_tokens counts): the same text and ids
  // transformers' apply_chat_template gave, through the Qwen3-kind tokenizer the goldens were made with.
  std::ifstream gf(std::string(TERN_SOURCE_DIR) + "/tests/goldens/chat_templates.json");
  const nlohmann::ordered_json goldens = nlohmann::ordered_json::parse(gf);
  std::ifstream tf(std::string(TERN_SOURCE_DIR) + "/tests/fixtures/chat_templates/qwen3-0.6b.jinja");
  const std::string source((std::istreambuf_iterator<char>(tf)), {});
  int checked = 0;
  for (const auto& c : goldens["cases"]) {
    if (c["template"] != "qwen3-0.6b" || c["case"] != "tool call and result") continue;
    nlohmann::ordered_json body = {{"messages", c["context"]["messages"]}, {"tools", c["context"]["tools"]}};
    for (auto& m : body["messages"])
      if (m.contains("tool_calls"))
        for (auto& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
    const CompletionRequest r = parse_completion_request(body.dump(), true);
    const auto chat = tern::llm::ChatTemplate::from_source(source, "", "<|im_end|>");
    tern::llm::ChatOptions o;
    o.tools = r.tools;
    CHECK(chat.render(r.chat_messages, o) == c["text"].get<std::string>());
    const auto tok = tern::llm::load_tokenizer(std::string(TERN_SOURCE_DIR) + "/" + c["tokenizer"].get<std::string>());
    CHECK(chat_prompt(*tok, chat, r, {}) == c["ids"].get<std::vector<int64_t>>());
    ++checked;
  }
  CHECK(checked == 1);
}
