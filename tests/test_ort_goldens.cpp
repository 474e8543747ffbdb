// Generation against ONNX Runtime on the onnxruntime-genai test models: greedy tokens for a left-padded
// batch of 3 prompts must equal ORT's, and the first run's last-position logits must agree within 1e-3
// (fp32) / 2e-2 (fp16). Goldens come from tools/ort/greedy_goldens.mjs (ONNX Runtime 1.30).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generator.h"

using namespace tern;
using namespace tern::llm;
namespace fs = std::filesystem;

namespace {

struct Case {
  const char* model;  // folder under tests/goldens, and under the model root
  const char* file;
  double tolerance;
  bool committed = false;     // model in tests/fixtures (else ../shared/models/ort-genai)
  int64_t ring_capacity = 0;  // > 0: tern keeps the cache in its ring buffer
};

void check_against_ort(const Case& c) {
  const fs::path model_dir = c.committed ? fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / c.model
                                         : fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / c.model;
  const fs::path golden = fs::path(TERN_SOURCE_DIR) / "tests" / "goldens" / c.model;
  if (!fs::exists(model_dir / c.file)) {
    MESSAGE("skipped: ", (model_dir / c.file).string(), " not found (shared data lives at ../shared)");
    return;
  }
  std::ifstream gf(golden / "greedy.json");
  const nlohmann::json g = nlohmann::json::parse(gf);
  const auto prompts = g["prompts"].get<std::vector<std::vector<int64_t>>>();
  const auto expected = g["tokens"].get<std::vector<std::vector<int64_t>>>();

  SessionOptions so;
  so.decoder.ring_capacity = c.ring_capacity;
  Session s((model_dir / c.file).string(), so);
  if (c.ring_capacity > 0) REQUIRE(s.passes().cached_layers > 0);  // the attention fused: the ring holds the cache
  ModelConfig cfg = read_model_config(model_dir.string());
  Generator gen(s, cfg);
  GenerateOptions o;
  o.max_new_tokens = g["max_new_tokens"].get<int64_t>();
  o.eos_token_ids = g["eos"].get<std::vector<int64_t>>();
  GenerateResult r = gen.generate(prompts, o);
  for (size_t b = 0; b < prompts.size(); ++b) {
    CAPTURE(b);
    CHECK(r.tokens[b] == expected[b]);
  }

  std::ifstream lf(golden / "prefill_logits.f32", std::ios::binary);
  std::vector<float> ort_logits(static_cast<size_t>(r.prefill_logits.numel()));
  lf.read(reinterpret_cast<char*>(ort_logits.data()), static_cast<std::streamsize>(ort_logits.size() * 4));
  REQUIRE(lf.gcount() == static_cast<std::streamsize>(ort_logits.size() * 4));
  double worst = 0;
  for (size_t i = 0; i < ort_logits.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(r.prefill_logits.data<float>()[i]) - ort_logits[i]));
  MESSAGE(std::string(c.model), ": max |tern − ORT| over prefill logits = ", worst);
  CHECK(worst <= c.tolerance);

  if (c.ring_capacity > 0) {  // the ring gives the plain graph's results: same tokens, logits within 1e-4
    Session plain_session((model_dir / c.file).string());
    GenerateResult plain = Generator(plain_session, cfg).generate(prompts, o);
    CHECK(plain.tokens == r.tokens);
    // fp16 logits: plus one fp16 rounding step (the ring rotates keys in fp32, the graph rounds its
    // RoPE output to fp16 first).
    bool fp16 = false;
    for (const auto& out : s.outputs()) fp16 |= out.name == "logits" && out.dtype == DType::Float16;
    double diff = 0, excess = 0;
    for (int64_t i = 0; i < plain.prefill_logits.numel(); ++i) {
      const double a = plain.prefill_logits.data<float>()[i], d = std::abs(a - r.prefill_logits.data<float>()[i]);
      const double ulp = fp16 && a != 0 ? std::ldexp(1.0, std::ilogb(a) - 10) : 0.0;
      diff = std::max(diff, d);
      excess = std::max(excess, d - 1e-4 - ulp);
    }
    MESSAGE(std::string(c.model), ": max |ring − plain graph| over prefill logits = ", diff);
    CHECK(excess <= 0);
  }
}

}  // namespace

TEST_CASE("tiny GPT-2 (contrib Attention, EmbedLayerNorm, SkipLayerNorm, FastGelu; past_N) matches ONNX Runtime") {
  check_against_ort({"tiny-random-gpt2-fp32", "past.onnx", 1e-3});
}

TEST_CASE("tiny Llama fp16 (MultiHeadAttention, contrib RotaryEmbedding, SkipSimplifiedLayerNorm) matches ONNX Runtime") {
  check_against_ort({"tiny-random-LlamaForCausalLM-fp16", "model.onnx", 2e-2});
}

// Our own fixtures (tools/make_llama_fixtures.py): one set of Llama GQA weights as a torch.onnx.export
// graph, as opset-23 RMSNormalization/RotaryEmbedding/Attention, and with int4 MatMulNBits weights.
TEST_CASE("Llama GQA exported by torch.onnx.export matches ONNX Runtime") {
  check_against_ort({"llama-gqa-torch", "model.onnx", 1e-3, true});
}

TEST_CASE("the same Llama in opset-23 RMSNormalization/RotaryEmbedding/Attention matches ONNX Runtime") {
  check_against_ort({"llama-gqa-opset23", "model.onnx", 1e-3, true});
}

TEST_CASE("the same Llama with int4 MatMulNBits weights matches ONNX Runtime") {
  check_against_ort({"llama-gqa-int4", "model.onnx", 1e-3, true});
}

// ONNX opset 24's static cache: fixed-size past buffers updated by TensorScatter, read by Attention
// with nonpad_kv_seqlen.
TEST_CASE("the same Llama with an opset-24 static cache (TensorScatter, Attention nonpad_kv_seqlen) matches ONNX Runtime") {
  check_against_ort({"llama-gqa-static24", "model.onnx", 1e-4, true});
}

TEST_CASE("the opset-24 static-cache Llama with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"llama-gqa-static24", "model.onnx", 1e-4, true, 128});
}

// onnxruntime-genai's layout: packed QKV into GroupQueryAttention with do_rotary. One prompt: ONNX
// Runtime's GroupQueryAttention takes left padding of a first prompt differently (it assumes right padding).
TEST_CASE("the same Llama as packed-QKV GroupQueryAttention (do_rotary) matches ONNX Runtime") {
  check_against_ort({"llama-gqa-msft", "model.onnx", 1e-4, true});
}

TEST_CASE("the GroupQueryAttention Llama with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"llama-gqa-msft", "model.onnx", 1e-4, true, 128});
}

// Ring-buffer cache (fuse_cached_attention) with a window as long as the context: same tokens, and
// logits within 1e-4 of ORT's own cache path.
TEST_CASE("the opset-23 Llama with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"llama-gqa-opset23", "model.onnx", 1e-4, true, 128});
}

TEST_CASE("the torch-exported Llama (decomposed attention) with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"llama-gqa-torch", "model.onnx", 1e-4, true, 128});
}

TEST_CASE("the int4 torch-exported Llama with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"llama-gqa-int4", "model.onnx", 1e-4, true, 128});
}

TEST_CASE("the genai Llama fp16 (MultiHeadAttention) with tern's ring-buffer cache still matches ONNX Runtime") {
  check_against_ort({"tiny-random-LlamaForCausalLM-fp16", "model.onnx", 2e-2, false, 128});
}
