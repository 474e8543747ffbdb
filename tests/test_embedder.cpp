// Sentence embeddings (llm/embedder) against ONNX Runtime: the encoder fixtures (a random BERT exported by Optimum
// and by torch's dynamo exporter, tools/exporters/make_encoder_fixtures.py) and the real all-MiniLM-L6-v2 when
// scripts/get-models.sh and the fixture maker have put it in models/. Each golden is ONNX Runtime's
// last_hidden_state, mean-pooled over the attention mask and L2-normalized, as sentence-transformers does.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "llm/embedder.h"
#include "llm/model_folder.h"
#include "passes/pipeline.h"

using namespace tern;
using namespace tern::llm;
using tern::test::exports_dir;
using tern::test::positions_from_cache_length;
namespace fs = std::filesystem;

namespace {

double max_difference(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// Ids and embeddings one text at a time and all texts as one padded batch, within 1e-4 of the golden.
void check_embeddings(const fs::path& dir, const fs::path& golden_file, Pooling pooling = Pooling::Mean) {
  const Embedder e(dir.string());
  CHECK(e.pooling() == pooling);
  CHECK(e.normalizes());
  std::ifstream f(golden_file);
  const nlohmann::json golden = nlohmann::json::parse(f);
  std::vector<std::vector<int64_t>> rows;
  double worst = 0;
  for (const auto& c : golden["cases"]) {
    CAPTURE(c["text"].get<std::string>());
    rows.push_back(e.encode(c["text"]));
    CHECK(rows.back() == c["ids"].get<std::vector<int64_t>>());
    const auto one = e.embed({rows.back()});
    worst = std::max(worst, max_difference(one[0], c["embedding"].get<std::vector<double>>()));
  }
  const auto batch = e.embed(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& c = golden["cases"][i];
    worst = std::max(worst, max_difference(batch[i], c.value("batched", c["embedding"]).get<std::vector<double>>()));
  }
  MESSAGE(dir.filename().string(), ": largest difference from ONNX Runtime's ", worst);
  CHECK(worst < 1e-4);
  CHECK(e.dimensions() == static_cast<int64_t>(batch[0].size()));
}

}  // namespace

TEST_CASE("embeddings of a BERT exported by Optimum and by torch's dynamo exporter equal ONNX Runtime's, pooled") {
  for (const char* exporter : {"bert-optimum", "bert-dynamo"}) {
    CAPTURE(exporter);
    const fs::path dir = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "encoders" / exporter;
    check_embeddings(dir, dir / "embeddings.json");
  }
}

TEST_CASE("a decoder laid out as Qwen3-Embedding (Optimum's feature extraction, position_ids, last token) equals ONNX Runtime's") {
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "encoders" / "qwen3-optimum";
  check_embeddings(dir, dir / "embeddings.json", Pooling::LastToken);
}

TEST_CASE("all-MiniLM-L6-v2's embeddings equal ONNX Runtime's with sentence-transformers' pooling") {
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / "all-minilm-l6-v2";
  if (!fs::exists(dir / "model.onnx")) {
    MESSAGE("skipped: ", (dir / "model.onnx").string(), " not found (scripts/get-models.sh minilm, then ",
            "tools/exporters/make_encoder_fixtures.py --minilm ", dir.string(), ")");
    return;
  }
  check_embeddings(dir, fs::path(TERN_SOURCE_DIR) / "tests" / "goldens" / "embeddings-minilm.json");
  const Embedder e(dir.string());
  CHECK(e.dimensions() == 384);
  CHECK(e.max_tokens() == 256);  // sentence_bert_config.json's, not the 512 positions
}

TEST_CASE("an encoder refuses inputs it cannot take, naming them") {
  const Embedder e((fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "encoders" / "bert-optimum").string());
  CHECK_THROWS_WITH_AS(e.embed({{}}), "input 0 has no tokens", Error);
  CHECK_THROWS_WITH_AS(e.embed({{2, 5}, {2, 100000}}), "input 1: token id 100000 is outside the vocabulary of 222", Error);
  CHECK_THROWS_WITH_AS(e.embed({std::vector<int64_t>(49, 5)}), "input 0 has 49 tokens; this encoder takes at most 48", Error);
  // A decoder folder is no encoder: its past_key_values inputs are named.
  const fs::path decoder = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "exports" / "llama-optimum";
  if (fs::exists(decoder)) CHECK_THROWS_WITH_AS(Embedder(decoder.string()), doctest::Contains("is not one an encoder takes"), Error);
}

namespace {

// Pooled as sentence-transformers pools, from the golden's positions: the last one, or the mean; normalized.
std::vector<double> pooled(const std::vector<std::vector<double>>& hidden, bool last) {
  std::vector<double> v(hidden[0].size(), 0.0);
  for (size_t p = last ? hidden.size() - 1 : 0; p < hidden.size(); ++p)
    for (size_t k = 0; k < v.size(); ++k) v[k] += hidden[p][k] / (last ? 1.0 : static_cast<double>(hidden.size()));
  double sq = 0;
  for (double x : v) sq += x * x;
  for (double& x : v) x /= std::sqrt(sq);
  return v;
}

}  // namespace

TEST_CASE("decoder embeddings: every exporter cell's final hidden state equals transformers' own, pooled as asked") {
  std::ifstream f(exports_dir() / "hidden_states.json");
  const nlohmann::json file = nlohmann::json::parse(f), goldens = file["archs"], held = file["cells"];
  size_t cells = 0, compared_cells = 0;
  for (const auto& entry : fs::directory_iterator(exports_dir())) {
    const fs::path cell = entry.path();
    if (!fs::exists(cell / "greedy.json")) continue;
    std::ifstream g(cell / "greedy.json");
    const nlohmann::json greedy = nlohmann::json::parse(g);
    const std::string name = cell.filename().string(), arch = greedy["arch"];
    if (!goldens.contains(arch)) continue;
    CAPTURE(name);
    const ModelConfig cfg = read_model_config(cell.string());
    SessionOptions so = decoder_session_options({}, cfg, true);
    so.decoder.hidden_state_of = "logits";
    // The goldens hold for the cells whose logits are transformers' (make_hidden_goldens.py). In the others (4-bit
    // weights; the genai builder's Gemma and Phi-2 graphs) the hidden state is found and pooled, its values not
    // compared here: the logits it makes equal ONNX Runtime's in test_exports.cpp.
    const bool compared = held.contains(name);
    if (greedy.value("oracle", "") == "accuracy_level 0") so.activations = ActivationFormat::Float32;
    Session s((cell / "model.onnx").string(), so);
    const auto prompts = goldens[arch]["prompts"].get<std::vector<std::vector<int64_t>>>();
    // (Gemma-2's torchscript cell soft-caps attention scores as its eager attention does; its SDPA attention, which
    // Optimum and the dynamo exporter trace, does not: make_hidden_goldens.py keeps both.)
    const auto hidden =
        goldens[arch][compared ? held[name].get<std::string>() : "last_hidden_state"].get<std::vector<std::vector<std::vector<double>>>>();
    Generator gen(s, cfg);
    double worst = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {  // every position of each prompt run alone
      const Tensor& h = gen.prefill_output({prompts[i]}, kHiddenStateOutput);
      REQUIRE(h.shape() == std::vector<int64_t>{1, static_cast<int64_t>(prompts[i].size()), 32});
      for (size_t p = 0; p < prompts[i].size(); ++p)
        for (size_t k = 0; k < 32; ++k) {
          const double x = h.data<float>()[p * 32 + k];
          worst = std::max(worst, compared ? std::abs(x - hidden[i][p][k]) : std::isfinite(x) ? 0.0 : INFINITY);
        }
    }
    CHECK(worst <= 1e-4);
    // The embedder on the same session (as tern serve --embeddings runs it), both prompts as one left-padded batch.
    const auto tok = load_tokenizer(cell.string());
    for (const bool last : {true, false}) {
      const Embedder e(s, cfg, *tok, last ? Pooling::LastToken : Pooling::Mean);
      CHECK(e.dimensions() == 32);
      CHECK(e.max_tokens() == 256);
      const auto rows = positions_from_cache_length(name) ? std::vector<std::vector<int64_t>>{prompts[0]} : prompts;
      const auto vectors = e.embed(rows);
      REQUIRE(vectors.size() == rows.size());
      for (size_t i = 0; i < rows.size(); ++i)
        if (compared) CHECK(max_difference(vectors[i], pooled(hidden[i], last)) <= 1e-4);
    }
    ++cells;
    compared_cells += compared;
  }
  CHECK(cells >= 80);
  CHECK(compared_cells == held.size());
}

TEST_CASE("a hidden state is exposed only behind a projection: other outputs are refused naming where the walk stopped") {
  const fs::path bert = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "encoders" / "bert-optimum" / "model.onnx";
  const fs::path cell = exports_dir() / "llama-optimum";
  SessionOptions so;
  so.decoder.hidden_state_of = "present.0.key";  // made by a Concat, not by a product
  CHECK_THROWS_WITH_AS(Session((cell / "model.onnx").string(), so), doctest::Contains("not from a projection of the hidden state"), Error);
  so.decoder.hidden_state_of = "logits";
  CHECK_THROWS_WITH_AS(Session(bert.string(), so), doctest::Contains("no output 'logits'"), Error);
  // A decoder session without it cannot embed.
  Session plain((cell / "model.onnx").string(), decoder_session_options({}, read_model_config(cell.string()), true));
  CHECK_THROWS_WITH_AS(Embedder(plain, read_model_config(cell.string()), *load_tokenizer(cell.string()), Pooling::LastToken),
                       doctest::Contains("does not expose the hidden state"), Error);
  CHECK_THROWS_WITH_AS(parse_pooling("sum"), doctest::Contains("one of mean, cls, max, last"), Error);
}
