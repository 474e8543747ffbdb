// Constrained decoding to a JSON object (llm/json_constraint.h): the byte automaton against hand-checked documents,
// and sequences sampled from random logits through a real vocabulary's mask — every one a whole JSON object
// (nlohmann's parser is the judge) within its token budget.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "llm/json_constraint.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

using namespace tern::llm;

namespace {
// Feeds the text byte by byte: how many bytes it took, and whether the object is whole.
std::pair<size_t, bool> run(const std::string& text) {
  JsonGrammar g;
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

TEST_CASE("JsonConstraint: sequences sampled from random logits through a real vocabulary are whole JSON objects within budget") {
  for (const char* model : {"default", "smollm2-135m-instruct"}) {
    const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/" + model;
    std::unique_ptr<Tokenizer> tok;
    try {
      tok = load_tokenizer(dir);
    } catch (const std::exception& e) {
      MESSAGE(model, " skipped: ", e.what(), " (scripts/get-models.sh fetches it)");
      continue;
    }
    CAPTURE(model);
    const auto t0 = std::chrono::steady_clock::now();
    auto vocab = std::make_shared<const JsonVocabulary>(*tok);
    const double table_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double mask_s = 0;
    int64_t masks = 0;
    const auto V = static_cast<int64_t>(vocab->bytes.size());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> noise(0.0f, 8.0f);
    std::vector<float> logits(static_cast<size_t>(V));
    const int sequences = std::string(model) == "default" ? 24 : 8;  // (49,152 tokens a step: fewer)
    for (int seq = 0; seq < sequences; ++seq) {
      CAPTURE(seq);
      const int64_t budget = 6 + (seq * 7) % 40;
      JsonConstraint c(vocab);
      SamplingOptions so;
      so.greedy = false;
      so.seed = static_cast<uint64_t>(seq);
      Sampler sampler(so);
      std::vector<int64_t> ids;
      for (int64_t step = 0; step < budget && !c.complete(); ++step) {
        for (float& l : logits) l = noise(rng);
        const auto m0 = std::chrono::steady_clock::now();
        REQUIRE(c.mask(logits.data(), V, budget - step) > 0);
        mask_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count(), ++masks;
        const int64_t t = sampler.next(logits.data(), V, ids);
        REQUIRE(std::isfinite(logits[static_cast<size_t>(t)]));  // (a masked token is never chosen)
        c.accept(t);
        ids.push_back(t);
      }
      CHECK(c.complete());
      const std::string text = tok->decode(ids);
      CAPTURE(text);
      nlohmann::json parsed;
      CHECK_NOTHROW(parsed = nlohmann::json::parse(text));
      CHECK(parsed.is_object());
    }
    MESSAGE(std::string(model), ": the vocabulary's table in ", table_s, " s; a step's mask ", 1000 * mask_s / static_cast<double>(masks),
            " ms");
  }
}
