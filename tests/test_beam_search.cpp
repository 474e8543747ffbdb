// Beam search on a hand-made Markov "model": logits are a table row chosen by the last token, so every
// sequence probability is a product of table entries and the right answers can be worked out by hand.
// It also exercises models without a KV cache (the whole sequence is recomputed each step).
#include <doctest/doctest.h>

#include <cmath>

#include "llm/generator.h"
#include "model_builder.h"

using namespace tern;
using namespace tern::llm;
using namespace tern::test;

namespace {

// p[t][v]: probability of token v after token t; token 3 is EOS.
std::vector<std::vector<int64_t>> run(const std::vector<std::vector<double>>& p, int beams, int64_t max_new, float lp) {
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
