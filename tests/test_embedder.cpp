// Sentence embeddings (llm/embedder) against ONNX Runtime: the encoder fixtures (a random BERT exported by Optimum
// and by torch's dynamo exporter, tools/exporters/make_encoder_fixtures.py) and the real all-MiniLM-L6-v2 when
// scripts/get-models.sh and the fixture maker have put it in models/. Each golden is ONNX Runtime's
// last_hidden_state, mean-pooled over the attention mask and L2-normalized, as sentence-transformers does.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/embedder.h"

using namespace tern;
using namespace tern::llm;
namespace fs = std::filesystem;

namespace {

double max_difference(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// Ids and embeddings one text at a time and all texts as one padded batch, within 1e-4 of the golden.
void check_embeddings(const fs::path& dir, const fs::path& golden_file) {
  const Embedder e(dir.string());
  CHECK(e.pooling() == Pooling::Mean);
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
