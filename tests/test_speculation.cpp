// Speculative decoding by prompt lookup (llm/speculation.h, Generator::generate): the drafting rule by hand, the
// sampler's rejection rule against the distribution it must keep, and greedy tokens against plain decoding's and
// llama2.c's own.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "convert/llama2c.h"
#include "fixture_models.h"
#include "llm/draft_model.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "llm/speculation.h"
#include "llm/tokenizer.h"
#include "model_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;
using namespace tern::test;
namespace fs = std::filesystem;

namespace {

std::vector<int64_t> drafted(const std::vector<int64_t>& history, int64_t ngram, int64_t max_drafts) {
  std::vector<int64_t> d{99};  // (overwritten)
  ngram_draft(history, ngram, max_drafts, d);
  return d;
}

// One sequence's greedy tokens on `session`, with `drafts` a step (0: plain decoding) looked up by `ngram` tokens,
// or proposed by `draft`.
GenerateResult greedy_on(Session& session, const ModelConfig& cfg, const std::vector<int64_t>& prompt, int64_t n, int64_t drafts,
                         int64_t ngram = 3, DraftModel* draft = nullptr) {
  Generator g(session, cfg);
  GenerateOptions o;
  o.max_new_tokens = n;
  o.eos_token_ids = cfg.eos_token_ids;
  o.speculation.drafts = drafts;
  o.speculation.ngram = ngram;
  o.speculation.draft = draft;
  return g.generate({prompt}, o);
}

SessionOptions ring(int64_t window) {
  SessionOptions so;
  so.decoder.ring_capacity = window;
  so.decoder.last_position_output = "logits";
  return so;
}

}  // namespace

TEST_CASE("prompt lookup drafts what followed the earlier occurrence of the suffix whose match reaches furthest back") {
  // The last 3 tokens (7 8 9) occurred at 1..3: what followed them there.
  CHECK(drafted({5, 7, 8, 9, 4, 2, 6, 7, 8, 9}, 3, 3) == std::vector<int64_t>{4, 2, 6});
  CHECK(drafted({5, 7, 8, 9, 4, 2, 6, 7, 8, 9}, 3, 2) == std::vector<int64_t>{4, 2});
  // The newest occurrence wins: 1 2 → 3 at the start, → 4 later.
  CHECK(drafted({1, 2, 3, 1, 2, 4, 0, 1, 2}, 2, 4) == std::vector<int64_t>{4, 0, 1, 2});
  // Of two occurrences of 1 2 3, the older one's match runs a token further back (9 1 2 3): its continuation.
  CHECK(drafted({9, 1, 2, 3, 7, 5, 1, 2, 3, 8, 9, 1, 2, 3}, 3, 3) == std::vector<int64_t>{7, 5, 1});
  // Only the whole suffix counts: 5 alone occurred before, 1 5 did not.
  CHECK(drafted({5, 6, 7, 1, 5}, 2, 5).empty());
  CHECK(drafted({5, 6, 7, 1, 5}, 1, 5) == std::vector<int64_t>{6, 7, 1, 5});
  // A match that runs into the suffix itself (a repeated token) drafts up to the end.
  CHECK(drafted({3, 3, 3}, 2, 4) == std::vector<int64_t>{3});
  CHECK(drafted({1, 2, 3}, 3, 3).empty());  // nothing occurred before
  CHECK(drafted({4}, 3, 3).empty());
  CHECK(drafted({4, 4}, 3, 0).empty());

  CHECK(parse_speculation("").drafts == 0);
  CHECK(parse_speculation("off").drafts == 0);
  CHECK(parse_speculation("ngram").drafts == 3);
  CHECK(parse_speculation("ngram:7").drafts == 7);
  for (const char* bad : {"ngram:0", "ngram:17", "ngram:", "ngram:x", "draft", "draft:2", "ngram:-1", "lookahead"})
    CHECK(contains(error_of([&] { parse_speculation(bad); }), "--speculate"));
  CHECK(contains(error_of([&] { parse_speculation("draft"); }), "draft needs --draft-model DIR"));
}

TEST_CASE("a drafted token is taken with its probability, else one from the rest: the distribution stays p") {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingOptions so;
  so.greedy = false;
  so.seed = 11;
  for (int64_t draft : {0, 2, 3}) {
    CAPTURE(draft);
    Sampler s(so);
    int counts[4] = {0, 0, 0, 0};
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[s.next(logits.data(), 4, {}, draft)];
    for (int t = 0; t < 4; ++t) CHECK(counts[t] / static_cast<double>(n) == doctest::Approx(std::exp(logits[t])).epsilon(0.06));
  }
  // A draft top-k cuts has probability 0: never taken. Greedy ignores drafts.
  SamplingOptions k2 = so;
  k2.top_k = 2;
  Sampler s(k2);
  for (int i = 0; i < 2000; ++i) CHECK(s.next(logits.data(), 4, {}, 3) < 2);
  Sampler g(SamplingOptions{});
  CHECK(g.next(logits.data(), 4, {}, 2) == 0);
}

TEST_CASE("stories260K on the ring with speculation (prompt lookup, a draft model) reproduces llama2.c's greedy texts") {
  const fs::path stories = fs::path(TERN_SHARED_DIR) / "models" / "stories260K";
  if (!fs::exists(stories / "stories260K.bin")) {
    MESSAGE("skipped: ", stories.string(), " not found (shared data lives at ../shared)");
    return;
  }
  TempDir d;
  convert::convert_llama2c((stories / "stories260K.bin").string(), (stories / "tok512.bin").string(), d.path.string());
  const auto tok = load_tokenizer(d.path.string());
  const ModelConfig cfg = read_model_config(d.path.string());
  Session s((d.path / "model.onnx").string(), ring(512));
  for (int64_t drafts : {3, 8}) {
    CAPTURE(drafts);
    // llama2.c `run -t 0 -n N` makes N forward passes: N − prompt_tokens + 1 new tokens.
    auto r = greedy_on(s, cfg, tok->encode("", true), 200, drafts);
    CHECK(tok->decode(r.tokens[0]) == read_text(stories / "expected_greedy_empty_prompt_n200.txt"));
    CHECK(r.accepted_tokens > 0);
    CHECK(r.decode_tokens == 199);
    CHECK(r.decode_steps < r.decode_tokens);  // several tokens a run
    r = greedy_on(s, cfg, tok->encode("Zoo", true), 57, drafts);
    CHECK(tok->decode(r.tokens[0]) == read_text(stories / "expected_greedy_prompt_Zoo_n60.txt"));
  }
  // A window of 96 slides during the 200 tokens: drafting pauses where a run would slide it, and the tokens stay
  // plain decoding's on the same window.
  Session small((d.path / "model.onnx").string(), ring(96));
  const auto plain = greedy_on(small, cfg, tok->encode("", true), 200, 0);
  const auto spec = greedy_on(small, cfg, tok->encode("", true), 200, 3);
  CHECK(spec.tokens == plain.tokens);
  CHECK(spec.accepted_tokens > 0);
  // A draft model, the model's own int4 copy: llama2.c's texts again.
  SessionOptions so = ring(512);
  so.weights = WeightFormat::Int4;
  Session int4((d.path / "model.onnx").string(), so);
  DraftModel draft(int4, cfg, cfg.vocab_size);
  auto r = greedy_on(s, cfg, tok->encode("", true), 200, 4, 3, &draft);
  CHECK(tok->decode(r.tokens[0]) == read_text(stories / "expected_greedy_empty_prompt_n200.txt"));
  CHECK(r.accepted_tokens > r.drafted_tokens / 2);
  r = greedy_on(s, cfg, tok->encode("Zoo", true), 57, 4, 3, &draft);
  CHECK(tok->decode(r.tokens[0]) == read_text(stories / "expected_greedy_prompt_Zoo_n60.txt"));
  CHECK(greedy_on(small, cfg, tok->encode("", true), 200, 3, 3, &draft).tokens == plain.tokens);  // (on the window of 96)
  // The vocabularies' check: another tokenizer is refused naming both folders and the sizes.
  const auto other = load_tokenizer((fs::path(TERN_SOURCE_DIR) / "models" / "default").string());
  CHECK(contains(error_of([&] { check_same_vocabulary(tok.get(), other.get(), cfg, cfg, "T", "D"); }),
                 "--draft-model 'D': its tokenizer has 1024 tokens, the model's ('T') 512"));
  check_same_vocabulary(tok.get(), load_tokenizer(d.path.string()).get(), cfg, cfg, "T", "D");
}

TEST_CASE("models/default: speculation's greedy tokens are plain decoding's, fp32 and int4 weights, 3 and 8 drafts") {
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / "default";
  const auto tok = load_tokenizer(dir.string());
  const ModelConfig cfg = read_model_config(dir.string());
  const auto prompt = tok->encode("And God said, Let there be light: and there was light. And God said, Let there be", true);
  for (WeightFormat w : {WeightFormat::AsStored, WeightFormat::Int4}) {  // int4: decode rows on int8 activations
    CAPTURE(weight_format_name(w));
    SessionOptions so = ring(256);
    so.weights = w;
    Session s((dir / "model.onnx").string(), so);
    const auto plain = greedy_on(s, cfg, prompt, 48, 0);
    for (int64_t drafts : {3, 8}) {
      CAPTURE(drafts);
      const auto spec = greedy_on(s, cfg, prompt, 48, drafts);
      CHECK(spec.tokens == plain.tokens);
      CHECK(spec.drafted_tokens > 0);
    }
  }
  // A q4_0 ring reads its newest tokens exact (KvRingBuffer::exact_from), its copies outliving a step's roll back:
  // the greedy tokens stay plain decoding's on that ring too, past the exact lines' moves at 65 and 97 tokens.
  {
    SessionOptions so = ring(256);
    so.decoder.kv_dtype = kernels::KvStorage::Q4_0;
    Session s((dir / "model.onnx").string(), so);
    const auto plain = greedy_on(s, cfg, prompt, 100, 0);
    const auto spec = greedy_on(s, cfg, prompt, 100, 8);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.drafted_tokens > spec.accepted_tokens);  // (drafts were rolled back)
  }
  // Speculation rolls drafts back on the ring: a graph's own cache is refused, naming why.
  Session graph_cache((dir / "model.onnx").string());
  CHECK(contains(error_of([&] { greedy_on(graph_cache, cfg, prompt, 4, 3); }), "needs the ring-buffer KV cache"));
}

// As `tern generate` runs it: decode rows on int8 activations, where SmolLM2's residual (~750 from layer 4) turns a
// rounding upstream into a whole step of a code — a verification run's logits must be a decode step's bit for bit.
TEST_CASE("SmolLM2: speculation's greedy tokens (prompt lookup, a draft model) are plain decoding's on the llama.cpp golden prompts") {
  const std::string dir = smollm2_dir();
  if (dir.empty()) return;
  const ModelConfig cfg = read_model_config(dir);
  llm::DecoderOptions d;
  d.ring_capacity = 256;
  Session s(dir + "/model.onnx", llm::decoder_session_options(d, cfg, true));
  // The model drafting for itself (its own sequence on the session): nearly every draft accepted — not all, as the
  // draft's cache comes from runs of other lengths (its prompt short of the last token, a rolled-back stretch fed
  // with the next token), whose int8 products round apart where the model's own were near a tie.
  DraftModel self(s, cfg, cfg.vocab_size);
  int64_t accepted = 0, self_drafted = 0, self_accepted = 0;
  for (const auto& [line, prompt, want] : smollm2_llama_cpp_greedy()) {
    CAPTURE(line);
    const auto plain = greedy_on(s, cfg, prompt, 32, 0);
    const auto spec = greedy_on(s, cfg, prompt, 32, 3, 1);  // (1-token lookups: many drafts, most of them rolled back)
    CHECK(spec.tokens == plain.tokens);
    accepted += spec.accepted_tokens;
    const auto drafted = greedy_on(s, cfg, prompt, 32, 3, 3, &self);
    CHECK(drafted.tokens == plain.tokens);
    self_drafted += drafted.drafted_tokens;
    self_accepted += drafted.accepted_tokens;
  }
  CHECK(accepted > 0);
  CHECK(self_accepted * 10 >= self_drafted * 9);
}

TEST_CASE("a draft model's greedy drafts: plain decoding's tokens; its ring rolled back to the text kept") {
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / "default";
  const auto tok = load_tokenizer(dir.string());
  const ModelConfig cfg = read_model_config(dir.string());
  const auto prompt = tok->encode("And God said, Let there be light: and there was light. And God said, Let there be", true);
  Session target((dir / "model.onnx").string(), ring(256));
  const auto plain = greedy_on(target, cfg, prompt, 48, 0);
  SUBCASE("the model itself drafts: nearly every draft is accepted (its runs of other lengths may round apart)") {
    DraftModel self(target, cfg, cfg.vocab_size);  // (its own sequence on the same session)
    const auto spec = greedy_on(target, cfg, prompt, 48, 3, 3, &self);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.drafted_tokens > 0);
    CHECK(spec.accepted_tokens * 10 >= spec.drafted_tokens * 9);
    CHECK(spec.decode_steps < spec.decode_tokens / 3);
    // The options' parse: a draft model's drafts, 3 or N; prompt lookup beside it is refused (one source).
    CHECK(parse_speculation("", &self).draft == &self);
    CHECK(parse_speculation("", &self).drafts == 3);
    CHECK(parse_speculation("draft:5", &self).drafts == 5);
    CHECK(parse_speculation("off", &self).drafts == 0);
    CHECK(contains(error_of([&] { parse_speculation("ngram", &self); }), "a --draft-model is given"));
    CHECK(contains(error_of([&] { parse_speculation("draft:17", &self); }), "from 1 to 16"));
  }
  SUBCASE("a quantized copy drafts (int4 weights): some drafts rejected, the tokens the model's") {
    SessionOptions so = ring(256);
    so.weights = WeightFormat::Int4;
    Session int4((dir / "model.onnx").string(), so);
    DraftModel quantized(int4, cfg, cfg.vocab_size);
    for (int64_t drafts : {3, 8}) {
      CAPTURE(drafts);
      const auto spec = greedy_on(target, cfg, prompt, 48, drafts, 3, &quantized);
      CHECK(spec.tokens == plain.tokens);
      CHECK(spec.accepted_tokens > 0);
    }
  }
  SUBCASE("a draft of another model (random weights, another architecture) is mostly rejected, never followed") {
    const fs::path llama = exports_dir() / "llama-optimum", qwen = exports_dir() / "qwen2-optimum";
    const ModelConfig llama_cfg = read_model_config(llama.string()), qwen_cfg = read_model_config(qwen.string());
    Session model((llama / "model.onnx").string(), ring(256)), other((qwen / "model.onnx").string(), ring(256));
    DraftModel stranger(other, qwen_cfg, llama_cfg.vocab_size);
    const std::vector<int64_t> ids{1, 17, 200, 33, 5};
    const auto spec = greedy_on(model, llama_cfg, ids, 32, 3, 3, &stranger);
    CHECK(spec.tokens == greedy_on(model, llama_cfg, ids, 32, 0).tokens);
    CHECK(spec.drafted_tokens > spec.accepted_tokens);
    // This model's text (ids up to 1023) cannot be read by a draft of 256 tokens: it proposes nothing.
    DraftModel small_vocabulary(other, qwen_cfg, cfg.vocab_size);
    CHECK(greedy_on(target, cfg, prompt, 8, 3, 3, &small_vocabulary).drafted_tokens == 0);
  }
  SUBCASE("a draft whose ring is shorter than the text pauses before it would slide") {
    Session short_ring((dir / "model.onnx").string(), ring(40));
    DraftModel drafter(short_ring, cfg, cfg.vocab_size);
    const auto spec = greedy_on(target, cfg, prompt, 48, 3, 3, &drafter);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.drafted_tokens > 0);
    CHECK(spec.drafted_tokens < 40 - static_cast<int64_t>(prompt.size()));
  }
  SUBCASE("after a rejection its ring drafts as a fresh one given the same text does") {
    DraftModel used(target, cfg, cfg.vocab_size), fresh(target, cfg, cfg.vocab_size);
    std::vector<int64_t> a = prompt, b = prompt, da, db;
    a.insert(a.end(), {5, 6, 7});
    b.insert(b.end(), {5, 9});
    used.propose(a, 4, da);
    CHECK(da.size() == 4);
    used.propose(b, 4, da);  // (keeps prompt + 5, feeds 9)
    fresh.propose(b, 4, db);
    CHECK(da == db);
    used.propose(prompt, 2, da);  // a prefix of what it holds
    fresh.propose(prompt, 2, db);
    CHECK(da == db);
  }
  // Its sessions must keep the ring: a graph's own cache is refused naming why.
  Session graph_cache((dir / "model.onnx").string());
  CHECK(contains(error_of([&] { DraftModel(graph_cache, cfg, cfg.vocab_size); }), "ring-buffer KV cache"));
}
