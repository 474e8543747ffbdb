// Decoding strategies on a hand-made Markov "model": logits are a table row chosen by the last token,
// so every sequence probability is a product of table entries and the right answers can be worked out
// by hand. It also exercises models without a KV cache (the whole sequence is recomputed each step).
#include <doctest/doctest.h>

#include <cmath>

#include "llm/generator.h"
#include "model_builder.h"
#include "test_util.h"

using namespace tern;
using namespace tern::llm;
using namespace tern::test;

namespace {

// p[t][v]: probability of token v after token t; token 3 is EOS.
std::vector<std::vector<int64_t>> run(const std::vector<std::vector<double>>& p, int beams, int64_t max_new, float lp,
                                      const SamplingOptions& sampling = {}) {
  TempDir d;
  ModelBuilder b;
  b.input("input_ids", onnx::TensorProto::INT64, {-1, -1}, {"batch", "seq"}).output("logits");
  std::vector<float> table;
  for (const auto& row : p)
    for (double x : row) table.push_back(static_cast<float>(std::log(x)));
  b.initializer_f32("table", {4, 4}, table);
  b.node("Gather", {"table", "input_ids"}, {"logits"});
  Session s(b.save(d.path / "m.onnx"));
  ModelConfig cfg;
  cfg.vocab_size = 4;
  cfg.eos_token_ids = {3};
  Generator g(s, cfg);
  GenerateOptions o;
  o.max_new_tokens = max_new;
  o.num_beams = beams;
  o.length_penalty = lp;
  o.sampling = sampling;
  o.eos_token_ids = {3};
  return g.generate({{0}}, o).tokens;
}

}  // namespace

TEST_CASE("beam search finds the likelier sequence greedy decoding misses") {
  // After 0: 1 (0.5) or 2 (0.4). After 1 everything is ~1/3; after 2, token 0 has 0.9.
  // Greedy: 0→1→0 has probability 0.5·0.33 = 0.165; beams find 0→2→0 with 0.4·0.9 = 0.36.
  const std::vector<std::vector<double>> p{
      {0.001, 0.5, 0.4, 0.099}, {0.33, 0.33, 0.33, 0.01}, {0.9, 0.05, 0.04, 0.01}, {0.25, 0.25, 0.25, 0.25}};
  CHECK(run(p, 1, 2, 1.0f)[0] == std::vector<int64_t>{0, 1, 0});
  CHECK(run(p, 2, 2, 1.0f)[0] == std::vector<int64_t>{0, 2, 0});
}

TEST_CASE("length_penalty decides between an early EOS and a longer beam") {
  // After 0: EOS 0.45, 1 0.30, 2 0.25; after 2, token 0 has 0.9. Candidates at the end:
  //   [EOS]  log 0.45 = −0.799 (length 1)     [2, 0]  log(0.25·0.9) = −1.492 (length 2)
  // length_penalty 1: −0.799 vs −0.746 → [2, 0];   length_penalty 0: −0.799 vs −1.492 → [EOS].
  const std::vector<std::vector<double>> p{
      {0.0001, 0.3, 0.25, 0.4499}, {0.33, 0.33, 0.33, 0.01}, {0.9, 0.05, 0.04, 0.01}, {0.25, 0.25, 0.25, 0.25}};
  CHECK(run(p, 2, 2, 1.0f)[0] == std::vector<int64_t>{0, 2, 0});
  CHECK(run(p, 2, 2, 0.0f)[0] == std::vector<int64_t>{0, 3});
}

TEST_CASE("sampling: seeded, reduces to greedy at the limits, follows the distribution") {
  const std::vector<std::vector<double>> p{
      {0.001, 0.5, 0.4, 0.099}, {0.33, 0.33, 0.33, 0.01}, {0.9, 0.05, 0.04, 0.01}, {0.25, 0.25, 0.25, 0.25}};
  const auto greedy = run(p, 1, 3, 1.0f);
  SamplingOptions s;
  s.greedy = false;
  s.seed = 7;
  CHECK(run(p, 1, 3, 1.0f, s) == run(p, 1, 3, 1.0f, s));  // same seed, same tokens
  SamplingOptions k1 = s;
  k1.top_k = 1;
  CHECK(run(p, 1, 3, 1.0f, k1) == greedy);
  SamplingOptions p_small = s;
  p_small.top_p = 0.1f;  // only the top token reaches 10% mass
  CHECK(run(p, 1, 3, 1.0f, p_small) == greedy);
  SamplingOptions cold = s;
  cold.temperature = 0.0f;
  CHECK(run(p, 1, 3, 1.0f, cold) == greedy);

  // First token after 0 over 2000 seeds: 1 with 0.5, 2 with 0.4, EOS with 0.099.
  int counts[4] = {0, 0, 0, 0};
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    SamplingOptions t = s;
    t.seed = seed;
    ++counts[run(p, 1, 1, 1.0f, t)[0][1]];
  }
  CHECK(counts[1] == doctest::Approx(1000).epsilon(0.08));
  CHECK(counts[2] == doctest::Approx(800).epsilon(0.08));
  CHECK(counts[3] == doctest::Approx(198).epsilon(0.25));
  // min_p 0.5: tokens below half the top probability (2: 0.4/0.5 = 0.8 stays; EOS 0.2 goes) never appear.
  SamplingOptions mp = s;
  mp.min_p = 0.5f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    mp.seed = seed;
    CHECK(run(p, 1, 1, 1.0f, mp)[0][1] != 3);
  }
}

TEST_CASE("repetition penalty steers greedy decoding away from repeats") {
  // After 1 the likeliest next token is 1 again (0.4 vs 0.35): greedy repeats, a penalty of 2 does not.
  const std::vector<std::vector<double>> p{
      {0.001, 0.9, 0.05, 0.049}, {0.2, 0.4, 0.35, 0.05}, {0.9, 0.05, 0.04, 0.01}, {0.25, 0.25, 0.25, 0.25}};
  CHECK(run(p, 1, 2, 1.0f)[0] == std::vector<int64_t>{0, 1, 1});
  SamplingOptions pen;
  pen.repetition_penalty = 2.0f;
  CHECK(run(p, 1, 2, 1.0f, pen)[0] == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("frequency and presence penalties: a token's logit less F times its count, less P once, as OpenAI's") {
  // Equal logits: the penalties alone decide. History: 1 twice, 2 once.
  const std::vector<float> logits = {0.0f, 0.5f, 0.5f, 0.45f};
  const std::vector<int64_t> history = {1, 2, 1};
  SamplingOptions o;                                       // greedy
  CHECK(Sampler(o).next(logits.data(), 4, history) == 1);  // (the first of the two best)
  o.frequency_penalty = 0.04f;                             // 1: 0.5 - 0.08, 2: 0.5 - 0.04, 3: 0.45
  CHECK(Sampler(o).next(logits.data(), 4, history) == 2);
  o.frequency_penalty = 0.0f;
  o.presence_penalty = 0.06f;  // 1 and 2: 0.44 each, 3: 0.45
  CHECK(Sampler(o).next(logits.data(), 4, history) == 3);
  o.presence_penalty = -2.0f;  // negative: encourages what is there
  CHECK(Sampler(o).next(logits.data(), 4, history) == 1);
  o.presence_penalty = 2.5f;
  CHECK(tern::test::contains(tern::test::error_of([&] { Sampler s(o); }), "--presence-penalty 2.5: must be in [-2, 2]"));
}
