// Constrained decoding to a JSON object (llm/json_constraint.h), with or without a JSON Schema (llm/json_schema.h):
// the byte automaton against hand-checked documents, and sequences sampled from random logits through a real
// vocabulary's mask — every one a whole JSON object (nlohmann's parser is the judge) within its token budget, and
// under a schema one it takes (checked field by field here; tests/serve/openai_client.py has Python's jsonschema
// judge the server's).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "llm/json_constraint.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

using namespace tern::llm;

namespace {
// Feeds the text byte by byte: how many bytes it took, and whether the object is whole.
std::pair<size_t, bool> run(const std::string& text, const JsonSchema* schema = nullptr) {
  JsonGrammar g(schema);
  size_t n = 0;
  while (n < text.size() && g.feed(static_cast<unsigned char>(text[n]))) ++n;
  return {n, g.complete()};
}
}  // namespace

TEST_CASE("JsonGrammar: JSON objects byte by byte, what cannot continue one refused, the fewest closing bytes") {
  for (const char* whole : {"{}", "{ }", R"({"a": [1, -2.5e+3, 0, 0.25, 1E9, true, false, null, "x\u00e9\n\"", [], {}], "b": {"c": {}}})",
                            "{\n  \"k\": \"v\"\n}"}) {
    CAPTURE(whole);
    const auto [n, complete] = run(whole);
    CHECK(n == std::string(whole).size());
    CHECK(complete);
  }
  // What is refused: the byte where it stops.
  const std::vector<std::pair<std::string, size_t>> refused = {
      {"[]", 0},          // the top level is an object
      {"{\"a\" 1}", 5},   // a colon must follow a key
      {"{\"a\":01}", 6},  // no leading zeros
      {"{,}", 1},
      {"{\"a\":\"\x01\"}", 6},  // a control byte in a string
      {"{\"a\":\"\\x\"}", 7},   // an unknown escape
      {"{\"a\":nul1}", 8},
      {"{\"a\":1.}", 7},
      {"{\"a\":-}", 6},
      {"{\"a\":[1,]}", 8},
      {"{'a':1}", 1},
      {"{\"a\":1" + std::string(17, ' '), 22},  // (16 spaces in a row at most)
  };
  for (const auto& [text, at] : refused) {
    CAPTURE(text);
    const auto [n, complete] = run(text);
    CHECK(n == at);
    CHECK(!complete);
  }
  CHECK(run(std::string("{\"a\":tru")).first == 8);              // a prefix: taken whole, not complete
  CHECK(run("{\"a\":1}}") == std::pair<size_t, bool>{7, true});  // nothing after the object
  // Strings are well-formed UTF-8: whole characters, no overlong form, surrogate or lone continuation byte.
  CHECK(run("{\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\":0}").second);
  CHECK(run("{\"\xC0\x80").first == 2);
  CHECK(run("{\"\xE0\x80").first == 3);
  CHECK(run("{\"\xED\xA0\x80").first == 3);
  CHECK(run("{\"\x80").first == 2);
  CHECK(run("{\"\xE2\x82\"").first == 4);  // (a character cut by the closing quote)
  auto closing = [](const std::string& text) {
    JsonGrammar g;
    REQUIRE(g.feed(text));
    return g.closing_bytes();
  };
  CHECK(closing("") == 2);                   // {}
  CHECK(closing("{") == 1);                  // }
  CHECK(closing("{\"ab") == 4);              // ":0}
  CHECK(closing("{\"a\":[1,") == 3);         // 0]}
  CHECK(closing("{\"a\":[1") == 2);          // ]}
  CHECK(closing("{\"a\":\"\\u00") == 4);     // 00"}
  CHECK(closing("{\"a\":fal") == 3);         // se}
  CHECK(closing("{\"a\":1e") == 2);          // 0}
  CHECK(closing("{\"a\":{\"b\":1},") == 5);  // "":0}
  CHECK(closing("{\"a\":\"\xE2") == 4);      // two continuation bytes, "}
}

namespace {
// Sequences sampled from random logits through each real vocabulary (models/default, and SmolLM2's when
// scripts/get-models.sh has fetched it) under the constraint — any JSON object, or `schema`'s — seq within
// budget(seq) tokens: no step leaves nothing to choose, a masked token is never chosen, each ends whole and
// parses, and `check` judges what it parsed. Prints the vocabulary table's time and a step's mask.
template <class Budget, class Check>
void sample_objects(std::shared_ptr<const JsonSchema> schema, unsigned rng_seed, int default_sequences, int smollm2_sequences,
                    Budget budget_of, Check check) {
  for (const char* model : {"default", "smollm2-135m-instruct"}) {
    const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/" + model;
    std::unique_ptr<Tokenizer> tok;
    try {
      tok = load_tokenizer(dir);
    } catch (const std::exception& e) {
      MESSAGE((std::string(model) + " skipped: " + e.what() + " (scripts/get-models.sh fetches it)"));
      continue;
    }
    CAPTURE(model);
    const auto t0 = std::chrono::steady_clock::now();
    auto vocab = std::make_shared<const JsonVocabulary>(*tok);
    const double table_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double mask_s = 0;
    int64_t masks = 0;
    const auto V = static_cast<int64_t>(vocab->bytes.size());
    std::mt19937 rng(rng_seed);
    std::uniform_real_distribution<float> noise(0.0f, 8.0f);
    std::vector<float> logits(static_cast<size_t>(V));
    const int sequences = std::string(model) == "default" ? default_sequences : smollm2_sequences;
    for (int seq = 0; seq < sequences; ++seq) {
      CAPTURE(seq);
      const int64_t budget = budget_of(seq);
      JsonConstraint c(vocab, schema);
      SamplingOptions so;
      so.greedy = false;
      so.seed = static_cast<uint64_t>(seq);
      Sampler sampler(so);
      std::vector<int64_t> ids;
      for (int64_t step = 0; step < budget && !c.complete(); ++step) {
        for (float& l : logits) l = noise(rng);
        const auto m0 = std::chrono::steady_clock::now();
        const int64_t left = c.mask(logits.data(), V, budget - step);
        mask_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count(), ++masks;
        if (left == 0) FAIL("no token can come after '", tok->decode(ids), "' with ", budget - step, " left");
        const int64_t t = sampler.next(logits.data(), V, ids);
        REQUIRE(std::isfinite(logits[static_cast<size_t>(t)]));  // (a masked token is never chosen)
        c.accept(t);
        ids.push_back(t);
      }
      CHECK(c.complete());
      const std::string text = tok->decode(ids);
      CAPTURE(text);
      nlohmann::json parsed;
      REQUIRE_NOTHROW(parsed = nlohmann::json::parse(text));
      check(parsed);
    }
    const std::string what = std::string(model) + (schema ? " under the schema" : "");
    MESSAGE(what, ": the vocabulary's table in ", table_s, " s; a step's mask ", 1000 * mask_s / static_cast<double>(masks), " ms");
  }
}
}  // namespace

TEST_CASE("JsonConstraint: sequences sampled from random logits through a real vocabulary are whole JSON objects within budget") {
  // (49,152 tokens a step for SmolLM2: fewer sequences)
  sample_objects(
      nullptr, 7, 24, 8, [](int seq) { return int64_t{6} + (seq * 7) % 40; },
      [](const nlohmann::json& parsed) { CHECK(parsed.is_object()); });
}

namespace {
// A schema as structured-output clients send one (Pydantic's shape: $defs, a nullable field, an enum).
const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "a name"},
    "age": {"type": "integer"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "pet": {"$ref": "#/$defs/Pet"},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}
  },
  "required": ["name", "age", "color"],
  "additionalProperties": false,
  "$defs": {"Pet": {"type": "object", "properties": {"kind": {"const": "cat"}, "legs": {"type": "number"}},
                    "required": ["kind"], "additionalProperties": false}}
})";

// What the schema above asks, checked by hand: the judge of the sampled objects.
void check_person(const nlohmann::json& p) {
  REQUIRE(p.is_object());
  for (const auto& [k, v] : p.items()) {
    CAPTURE(k);
    if (k == "name") CHECK(v.is_string());
    else if (k == "age") CHECK(v.is_number_integer());
    else if (k == "color") CHECK((v == "red" || v == "green" || v == "blue"));
    else if (k == "tags")
      CHECK((v.is_array() && v.size() <= 3 && std::all_of(v.begin(), v.end(), [](const auto& t) { return t.is_string(); })));
    else if (k == "pet")
      CHECK((v.is_object() && v.value("kind", "") == "cat" && (!v.contains("legs") || v["legs"].is_number()) && v.size() <= 2));
    else if (k == "note") CHECK((v.is_string() || v.is_null()));
    else FAIL("a key the schema does not have: ", k);
  }
  CHECK((p.contains("name") && p.contains("age") && p.contains("color")));
}
}  // namespace

TEST_CASE("JsonConstraint: a schema whose least value outgrows the budget gives the value's beginning, cut at the budget") {
  // 8 levels of required objects need 96 bytes at least; 12 tokens of the default model cannot close them. Every
  // step still offers a token that continues the value (an answer of "" came before: issue 79), so the text is
  // the value's first bytes, each a step towards it, and the sequence ends by length.
  std::string deep = R"({"type": "string"})";
  for (int level = 7; level >= 0; --level)
    deep = R"({"type": "object", "properties": {"level)" + std::to_string(level) + R"(": )" + deep +
           R"(}, "additionalProperties": false, "required": ["level)" + std::to_string(level) + R"("]})";
  const auto schema = std::make_shared<const JsonSchema>(nlohmann::json::parse(deep));
  CHECK(JsonGrammar(schema.get()).closing_bytes() >= 96);
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/default";
  const auto tok = load_tokenizer(dir);
  auto vocab = std::make_shared<const JsonVocabulary>(*tok);
  const auto V = static_cast<int64_t>(vocab->bytes.size());
  JsonConstraint c(vocab, schema);
  JsonGrammar follow(schema.get());
  std::vector<float> logits(static_cast<size_t>(V));
  std::string text;
  for (int64_t step = 0; step < 12; ++step) {
    for (size_t t = 0; t < logits.size(); ++t)  // a model that writes: the longest token first (whitespace never)
      logits[t] = vocab->bytes[t].find_first_of(" \t\n\r") == std::string::npos ? static_cast<float>(vocab->bytes[t].size()) : -1.0f;
    REQUIRE(c.mask(logits.data(), V, 12 - step) > 0);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    c.accept(best);
    text += vocab->bytes[static_cast<size_t>(best)];
  }
  CAPTURE(text);
  CHECK(follow.feed(text));  // the beginning of a value the schema takes
  CHECK_FALSE(c.complete());
  CHECK(text.rfind("{\"level0\"", 0) == 0);
}

TEST_CASE("JsonGrammar with a schema: types, keys, required, enums, array lengths and $refs, byte by byte") {
  const JsonSchema person(nlohmann::json::parse(kPersonSchema));
  auto takes = [&](const std::string& text) { return run(text, &person) == std::pair<size_t, bool>{text.size(), true}; };
  auto stops_at = [&](const std::string& text) { return run(text, &person).first; };
  CHECK(takes(R"({"name": "Ann", "age": 7, "color": "red"})"));
  CHECK(takes(R"({"color":"blue","age":-12,"name":"","tags":["a","b"],"pet":{"kind":"cat","legs":3.5},"note":null})"));
  CHECK(takes(R"({"name": "x", "age": 1, "color": "green", "note": "n"})"));
  CHECK(stops_at(R"({"nam": 1)") == 5);                                 // no key begins "nam" and ends there
  CHECK(stops_at(R"({"name": 5)") == 9);                                // name is a string
  CHECK(stops_at(R"({"name": "a", "age": 1.5)") == 22);                 // age is an integer: no '.'
  CHECK(stops_at(R"({"name": "a", "age": 1, "color": "rose")") == 35);  // "ro" matches no color
  CHECK(stops_at(R"({"name": "a", "age": 1})") == 22);                  // color is required: no '}'
  CHECK(stops_at(R"({"name": "a", "name")") == 16);                     // a key written twice ('n' may begin "note")
  CHECK(stops_at(R"({"extra": 1})") == 2);                              // additionalProperties false
  CHECK(stops_at(R"({"tags": ["a", "b", "c", "d"]})") == 23);           // maxItems 3: no ',' after the third
  CHECK(stops_at(R"({"pet": {"kind": "dog"})") == 18);                  // const "cat"
  CHECK(stops_at(R"({"note": true})") == 9);                            // a string or null
  CHECK(stops_at(R"({"color": "red")") == 15);                          // (the byte after is what fails; here the text ran out)
  // The fewest bytes to close count the required keys still missing.
  JsonGrammar g(&person);
  REQUIRE(g.feed("{"));
  CHECK(g.closing_bytes() >= static_cast<int>(std::string(R"("name":"","age":0,"color":"red"})").size()));
  REQUIRE(g.feed(R"("name":"","age":0,"color":"red")"));
  CHECK(g.closing_bytes() == 1);
  // Schemas outside the supported subset are refused, naming the keyword and its place.
  auto refusal = [](const char* schema) {
    try {
      JsonSchema s(nlohmann::json::parse(schema));
    } catch (const tern::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(refusal(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}})") ==
        "json_schema: keyword 'pattern' at '/properties/a' is not supported (tern constrains type, properties, required, "
        "additionalProperties, items, minItems, maxItems, enum, const, anyOf and $ref)");
  CHECK(refusal(R"({"type": "string"})") ==
        "json_schema: the top level must be an object or an array (type: object or array), as response formats ask");
  // Schemas no answer can meet: a required property that recurses into itself, a least value past 16 MiB.
  CHECK(refusal(R"({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}},
                "required": ["next"]}}})")
            .find("no finite value takes it") != std::string::npos);
  CHECK(refusal(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "minItems": 10000000}},
                "required": ["a"]})") == "json_schema: its least value is 30000009 bytes, more than an answer may hold (16777216)");
  CHECK(refusal(R"({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}})") ==
        "(accepted)");  // (optional recursion: {} ends it)
  CHECK(refusal(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}})") ==
        "json_schema: '$ref' at '/properties/a' names #/$defs/B: tern resolves #/$defs/NAME and #/definitions/NAME of the same schema");
  CHECK(refusal(R"({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"enum": ["x"]}]}}})").find("begin alike") !=
        std::string::npos);
  // A recursive schema: nesting bounded by the grammar's depth.
  const JsonSchema tree(nlohmann::json::parse(
      R"({"$ref": "#/$defs/T", "$defs": {"T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}, "additionalProperties": false}}})"));
  CHECK(run(R"({"kids": [{"kids": []}, {}]})", &tree) == std::pair<size_t, bool>{28, true});
  CHECK(run(R"({"kids": [{"kid": 1}]})", &tree).first == 15);
}

TEST_CASE("JsonConstraint with a schema: objects sampled from random logits through a real vocabulary take the schema") {
  sample_objects(
      std::make_shared<const JsonSchema>(nlohmann::json::parse(kPersonSchema)), 11, 24, 6,
      [](int seq) { return int64_t{60} + (seq * 13) % 80; }, check_person);
}

namespace {
// onnxruntime-genai's examples' tool-call guidance (examples/python/common.py, get_json_schema): an array of calls, each
// one of the tools — objects told apart by their "name" — with llguidance's formatting options beside it.
const char* kToolCallsSchema = R"({
  "x-guidance": {"whitespace_flexible": false, "key_separator": ": ", "item_separator": ", "},
  "type": "array", "minItems": 1,
  "items": {"anyOf": [
    {"description": "The weather", "type": "object", "additionalProperties": false, "required": ["name", "parameters"],
     "properties": {"name": {"const": "get_weather"},
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                                   "required": ["city", "unit"], "additionalProperties": false}}},
    {"description": "The time", "type": "object", "additionalProperties": false, "required": ["name", "parameters"],
     "properties": {"name": {"const": "get_time"},
                    "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}, "required": ["zone"],
                                   "additionalProperties": false}}},
    {"type": "object", "properties": {"name": {"const": "ping"}}, "required": ["name"], "additionalProperties": false}
  ]}
})";

// What the schema above asks, checked by hand.
void check_calls(const nlohmann::json& calls) {
  REQUIRE(calls.is_array());
  CHECK(!calls.empty());
  for (const auto& c : calls) {
    CAPTURE(c.dump());
    REQUIRE(c.is_object());
    const std::string name = c.value("name", "");
    if (name == "ping") {
      CHECK(c.size() == 1);
      continue;
    }
    REQUIRE((name == "get_weather" || name == "get_time"));
    CHECK(c.size() == 2);
    const auto& p = c.at("parameters");
    if (name == "get_weather") CHECK((p.size() == 2 && p.at("city").is_string() && (p.at("unit") == "c" || p.at("unit") == "f")));
    else  // (past int64, nlohmann reads an integer as a double)
      CHECK((p.size() == 1 &&
             (p.at("zone").is_number_integer() || (p.at("zone").is_number_float() && std::fabs(p.at("zone").get<double>()) >= 9.2e18))));
  }
}

// From the grammar's state, one byte at a time, the byte that takes closing_bytes() down the most: how many steps
// it took to a whole value (-1: a state where no byte takes it down). The mask's promise — a text it lets through
// can still close within the tokens left — holds when that is never more than closing_bytes() was.
int shortest_close(JsonGrammar g) {
  for (int steps = 0; steps < 4096; ++steps) {
    if (g.complete()) return steps;
    JsonGrammar best = g;
    for (int b = 0; b < 256; ++b) {
      JsonGrammar next = g;
      if (next.feed(static_cast<unsigned char>(b)) && next.closing_bytes() < best.closing_bytes()) best = next;
    }
    if (best.closing_bytes() == g.closing_bytes()) return -1;
    g = best;
  }
  return -1;
}
}  // namespace

TEST_CASE("JsonGrammar with a union of objects: the first key's value picks the branch (tool calls, as genai asks)") {
  const JsonSchema calls(nlohmann::json::parse(kToolCallsSchema));
  auto takes = [&](const std::string& text) { return run(text, &calls) == std::pair<size_t, bool>{text.size(), true}; };
  auto stops_at = [&](const std::string& text) { return run(text, &calls).first; };
  CHECK(takes(R"([{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}])"));
  CHECK(takes(R"([{"name":"ping"},{"name":"get_time","parameters":{"zone":3}}])"));
  CHECK(stops_at("[]") == 1);                                                       // minItems 1
  CHECK(stops_at(R"([{"parameters": {}}])") == 3);                                  // the name comes first
  CHECK(stops_at(R"([{"name": "get_date"}])") == 15);                               // "get_d" is no tool's name
  CHECK(stops_at(R"([{"name": "get_time", "parameters": {"city": "x"}}])") == 38);  // get_time's parameters: zone
  CHECK(stops_at(R"([{"name": "get_weather"}])") == 23);                            // its parameters are required
  CHECK(stops_at(R"([{"name": "ping", "parameters": {}}])") == 16);                 // ping takes no other key
  CHECK(stops_at(R"({"name": "ping"})") == 0);                                      // the top level is the array
  // x-guidance's fixed separators: a space after ':' and ',' at most, no other whitespace.
  CHECK(stops_at(R"([{"name" : "ping"}])") == 8);
  CHECK(stops_at(R"([ {"name": "ping"}])") == 1);
  CHECK(stops_at(R"([{"name":  "ping"}])") == 10);
  CHECK(stops_at("[{\"name\":\n\"ping\"}]") == 9);
  // closing_bytes() holds through the branch's choice: from each prefix, a whole value within that many bytes.
  const std::string text = R"([{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}, {"name": "ping"}])";
  for (size_t cut = 0; cut < text.size(); ++cut) {
    CAPTURE(text.substr(0, cut));
    JsonGrammar g(&calls);
    REQUIRE(g.feed(text.substr(0, cut)));
    const int steps = shortest_close(g);
    CHECK(steps >= 0);
    CHECK(steps <= g.closing_bytes());
  }
  CHECK_THROWS_WITH_AS(JsonSchema(nlohmann::json::parse(R"({"type": "object", "x-guidance": {"lenient": true}})")),
                       doctest::Contains("'x-guidance' option 'lenient' is not supported"), tern::Error);
  // Objects that no key tells apart are refused, saying what tern needs.
  try {
    JsonSchema s(nlohmann::json::parse(R"({"type": "object", "properties": {"a": {"anyOf": [
        {"type": "object", "properties": {"x": {"type": "string"}}}, {"type": "object", "properties": {"y": {"type": "string"}}}]}}})"));
    FAIL("accepted");
  } catch (const tern::Error& e) {
    CHECK(std::string(e.what()).find("no required key whose const or enum values tell them apart") != std::string::npos);
  }
}

TEST_CASE("JsonConstraint with a union: arrays of tool calls sampled from random logits take each tool's schema") {
  sample_objects(
      std::make_shared<const JsonSchema>(nlohmann::json::parse(kToolCallsSchema)), 5, 24, 6,
      [](int seq) { return int64_t{30} + (seq * 11) % 70; }, check_calls);
}

TEST_CASE("JsonConstraint with a trigger: free text, then each call the model begins is decoded under the schema") {
  // tern serve's tool_choice auto on a template that writes <tool_call> blocks: the text is the model's own until it
  // writes the marker, then a call under the tools' union (the name picks the arguments' schema), then text again.
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = load_tokenizer(std::string(TERN_SOURCE_DIR) + "/models/default");
  } catch (const std::exception& e) {
    MESSAGE((std::string("skipped: ") + e.what()));
    return;
  }
  const auto vocab = std::make_shared<const JsonVocabulary>(*tok);
  const auto schema = std::make_shared<const JsonSchema>(nlohmann::json::parse(R"({"anyOf": [
      {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object",
       "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
       "required": ["name", "arguments"], "additionalProperties": false},
      {"type": "object", "properties": {"name": {"const": "get_time"}, "arguments": {"type": "object",
       "properties": {"zone": {"type": "integer"}}, "required": ["zone"], "additionalProperties": false}},
       "required": ["name", "arguments"], "additionalProperties": false}]})"));
  const auto V = static_cast<int64_t>(vocab->bytes.size());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> noise(0.0f, 8.0f);
  std::vector<float> logits(static_cast<size_t>(V));
  for (int call = 0; call < 8; ++call) {
    CAPTURE(call);
    JsonConstraint c(vocab, schema, "<tool_call>");
    CHECK(c.mask(logits.data(), V, 200) == V);  // free text: nothing masked
    for (int64_t t : tok->encode("Let me look that up. <tool_call>\n", false)) c.accept(t);
    REQUIRE(c.in_value());
    std::string value;
    for (int step = 0; step < 200 && c.in_value(); ++step) {
      for (float& l : logits) l = noise(rng);
      REQUIRE(c.mask(logits.data(), V, 200 - step) > 0);
      const auto next = static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      value += vocab->bytes[static_cast<size_t>(next)];
      c.accept(next);
    }
    CAPTURE(value);
    REQUIRE_FALSE(c.in_value());  // the call whole: text is free again, and the sequence goes on to its end token
    CHECK_FALSE(c.complete());
    std::fill(logits.begin(), logits.end(), 0.0f);
    CHECK(c.mask(logits.data(), V, 10) == V);
    const auto j = nlohmann::json::parse(value);
    const std::string name = j.at("name");
    REQUIRE((name == "get_weather" || name == "get_time"));
    CHECK(j.at("arguments").size() == 1);
    CHECK((name == "get_weather" ? j["arguments"].at("city").is_string() : j["arguments"].at("zone").is_number()));
  }
}

TEST_CASE("JsonConstraint: a token that closes a string is never taken as text inside it (budget and schema kept)") {
  // tern serve, a forced tool call at temperature 1 on SmolLM2: inside the string value "aev-amember" with 4 tokens
  // left, the token `","` (closing the value, a comma, a new key's quote) was let through as plain text, the budget
  // unchecked; the key it opened could not be closed in the 3 tokens after it, and the call ended cut short.
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/smollm2-135m-instruct";
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = load_tokenizer(dir);
  } catch (const std::exception& e) {
    MESSAGE((std::string("skipped: ") + e.what() + " (scripts/get-models.sh fetches it)"));
    return;
  }
  const auto vocab = std::make_shared<const JsonVocabulary>(*tok);
  for (size_t id = 0; id < vocab->bytes.size(); ++id)
    if (vocab->bytes[id].find('"') != std::string::npos) REQUIRE_FALSE(vocab->plain[id]);
  const auto schema = std::make_shared<const JsonSchema>(
      nlohmann::json::parse(R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]})"));
  JsonConstraint c(vocab, schema);
  for (int64_t t : tok->encode("{\"zone\":\"aev-amember", false)) c.accept(t);
  std::vector<float> logits(vocab->bytes.size(), 0.0f);
  REQUIRE(c.mask(logits.data(), static_cast<int64_t>(logits.size()), 4) > 0);
  int checked = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    CAPTURE(vocab->bytes[id]);
    if (vocab->bytes[id] == "\",\"") {  // a new key: 5 closing bytes, 3 tokens after it
      CHECK(logits[id] < 0);
      ++checked;
    }
    if (vocab->bytes[id] == "\"}") {  // the object whole
      CHECK(logits[id] == 0.0f);
      ++checked;
    }
  }
  CHECK(checked == 2);
}
