// Every architecture the GGUF importer knows (convert/architecture.cpp), on a tiny random-weight model that
// transformers made from the family's config class and tools/exporters/make_gguf_arch_fixtures.py wrote as
// llama.cpp's converter writes that family: imported, every layer goes onto the ring, and the prompt's
// last-position logits equal transformers' own within 1e-4 and its greedy tokens equal transformers'.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convert/gguf_import.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "model_builder.h"

using namespace tern;
using namespace tern::llm;
namespace fs = std::filesystem;

TEST_CASE("each GGUF architecture imports to transformers' logits and greedy tokens") {
  for (const std::string arch :
       {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "llama-rope-linear", "llama-rope-llama3", "qwen2-rope-yarn"}) {
    CAPTURE(arch);
    const fs::path fixture = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "gguf_arch" / arch;
    std::ifstream in(fixture / "expected.json");
    REQUIRE(in);
    const nlohmann::json expected = nlohmann::json::parse(in);
    test::TempDir dir;
    convert::import_gguf((fixture / "model.gguf").string(), dir.path.string());

    const ModelConfig cfg = read_model_config(dir.path.string());
    const std::string family = arch == "mistral" ? "llama" : arch.substr(0, arch.find('-'));  // (…-rope-…: RoPE scaling)
    CHECK(cfg.model_type.rfind(family, 0) == 0);                                              // (Gemma 3's is "gemma3_text")
    DecoderOptions d;
    d.ring_capacity = 64;
    Session s((dir.path / "model.onnx").string(), decoder_session_options(d, cfg, true));
    const int layers = arch == "gemma3" ? 6 : 2;
    CHECK(s.passes().cached_layers == layers);  // every layer's attention on the ring
    // Gemma 3: five of six layers with their own sliding window of 8 keys (the fixture's prompt is 12 long);
    // Gemma 2: one of two; Mistral (a llama GGUF with attention.sliding_window): both.
    int windowed = 0;
    for (const Fusion& f : s.passes().fusions) windowed += f.pattern.find("sliding window of 8") != std::string::npos;
    CHECK(windowed == (arch == "gemma3" ? 5 : arch == "gemma2" ? 1 : arch == "mistral" ? 2 : 0));
    GenerateOptions o;
    o.max_new_tokens = 16;
    o.eos_token_ids = cfg.eos_token_ids;
    const std::vector<int64_t> prompt = expected["prompt"].get<std::vector<int64_t>>();
    const GenerateResult r = Generator(s, cfg).generate({prompt}, o);
    CHECK(r.tokens[0] == expected["tokens"].get<std::vector<int64_t>>());

    const std::vector<float> want = expected["last_logits"].get<std::vector<float>>();
    REQUIRE(r.prefill_logits.numel() == static_cast<int64_t>(want.size()));
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double(r.prefill_logits.data<float>()[i]) - want[i]));
    MESSAGE(arch, ": max |tern − transformers| over the prompt's last logits = ", worst);
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("a SentencePiece GGUF vocabulary imports as BPE with byte fallback: spaces as ▁, merges by score") {
  // The Gemma 3 fixture's vocabulary: control tokens, 256 <0xXX> byte tokens, "▁", "t", "▁t"; no space prefix.
  const fs::path fixture = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "gguf_arch" / "gemma3";
  test::TempDir dir;
  convert::import_gguf((fixture / "model.gguf").string(), dir.path.string());
  auto tok = load_tokenizer(dir.path.string());
  CHECK(tok->encode(" t t", false) == std::vector<int64_t>{262, 262});           // ▁t ▁t: the one merge
  CHECK(tok->encode("tx", false) == std::vector<int64_t>{261, 4 + 'x'});         // no piece "x": its byte token
  CHECK(tok->encode("é", true) == std::vector<int64_t>{2, 4 + 0xC3, 4 + 0xA9});  // BOS, then UTF-8 bytes
  CHECK(tok->decode({2, 262, 4 + 0xC3, 4 + 0xA9, 261}) == " tét");               // bytes fuse back; BOS vanishes
}
