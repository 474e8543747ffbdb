// Block fusions (RMSNorm, SwiGLU, shared-input MatMuls): each rewrites what matches exactly, computes
// the hand-derived values, and leaves near misses alone (still correct).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <random>
#include <set>

#include "convert/onnx_builder.h"
#include "graph/onnx_loader.h"
#include "llm/generator.h"
#include "model_builder.h"
#include "passes/canonicalize.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;
using tern::convert::OnnxBuilder;
namespace fs = std::filesystem;

namespace {

int count_ops(const Session& s, const std::string& op) {
  int n = 0;
  for (const Node& node : s.graph().nodes) n += node.op_type == op;
  return n;
}

// y = silu(x · wg) · (x · wu), as exporters write it: two MatMuls of x, Sigmoid, two Muls.
void gated_unit(ModelBuilder& b) {
  b.node("MatMul", {"x", "wg"}, {"g"});
  b.node("MatMul", {"x", "wu"}, {"u"});
  b.node("Sigmoid", {"g"}, {"sg"});
  b.node("Mul", {"g", "sg"}, {"silu"});
  b.node("Mul", {"silu", "u"}, {"y"});
}

// Pow → ReduceMean(axes) → Add ε → Sqrt → Div(1, ·) → Mul x → Mul w, on x [2, 4].
std::string rms_norm_model(const fs::path& dir, int64_t axis) {
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {2, 4}).output("y");
  b.initializer_f32("two", {}, {2.0f});
  b.initializer_f32("eps", {}, {1e-5f});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("w", {4}, {1.0f, 0.5f, 2.0f, -1.0f});
  b.node("Pow", {"x", "two"}, {"sq"});
  auto& mean = b.node("ReduceMean", {"sq"}, {"mean"});
  OnnxBuilder::attr(mean, "axes", std::vector<int64_t>{axis});
  b.node("Add", {"mean", "eps"}, {"var"});
  b.node("Sqrt", {"var"}, {"std"});
  b.node("Div", {"one", "std"}, {"inv"});
  b.node("Mul", {"x", "inv"}, {"normed"});
  b.node("Mul", {"normed", "w"}, {"y"});
  return b.save(dir / ("rms" + std::to_string(axis) + ".onnx"));
}

}  // namespace

TEST_CASE("decomposed RMSNorm becomes RMSNormalization with the same values; another axis is left alone") {
  TempDir d;
  const std::vector<float> x{1, 2, 3, 4, -1, 0, 1, 0};
  const Tensor xt = Tensor::from_vector<float>(x, {2, 4});
  Session fused(rms_norm_model(d.path, -1));
  CHECK(count_ops(fused, "RMSNormalization") == 1);
  CHECK(fused.graph().nodes.size() == 1);
  const Tensor y = fused.run({{"x", xt}})[0];
  const float w[4] = {1.0f, 0.5f, 2.0f, -1.0f};
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 4; ++i) ms += x[static_cast<size_t>(r * 4 + i)] * x[static_cast<size_t>(r * 4 + i)] / 4.0;
    for (int i = 0; i < 4; ++i)
      CHECK(y.data<float>()[r * 4 + i] == doctest::Approx(x[static_cast<size_t>(r * 4 + i)] / std::sqrt(ms + 1e-5) * w[i]).epsilon(1e-6));
  }
  Session rows(rms_norm_model(d.path, 0));  // a mean over rows is not an RMSNorm over the last axis
  CHECK(count_ops(rows, "RMSNormalization") == 0);
  const Tensor z = rows.run({{"x", xt}})[0];
  const double ms0 = (1 + 1) / 2.0;  // column 0: x = 1 and −1
  CHECK(z.data<float>()[0] == doctest::Approx(1 / std::sqrt(ms0 + 1e-5) * 1.0).epsilon(1e-6));
}

TEST_CASE("gate and up projections sharing an input become one MatMul read packed by SwiGLU") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {1, 2}).output("y").output("side");
  b.initializer_f32("wg", {2, 3}, {1, 0, -1, 0, 1, 2});
  b.initializer_f32("wu", {2, 3}, {1, 1, 1, 2, 0, -1});
  b.initializer_f32("wz", {2, 1}, {3, 4});  // a third projection of x another node reads
  gated_unit(b);
  b.node("MatMul", {"x", "wz"}, {"side"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(count_ops(s, "SwiGLU") == 1);
  CHECK(count_ops(s, "MatMul") == 1);  // g, u and side in one
  CHECK(count_ops(s, "Split") == 1);   // side is not read packed, so the three are split back
  const auto out = s.run({{"x", Tensor::from_vector<float>({0.5f, -2.0f}, {1, 2})}});
  const float g[3] = {0.5f, -2.0f, -4.5f}, u[3] = {-3.5f, 0.5f, 2.5f};
  for (int i = 0; i < 3; ++i) CHECK(out[0].data<float>()[i] == doctest::Approx(g[i] / (1 + std::exp(-g[i])) * u[i]).epsilon(1e-6));
  CHECK(out[1].data<float>()[0] == doctest::Approx(0.5f * 3 - 2.0f * 4));
}

TEST_CASE("a fused gate|up is packed from its parts: the concatenation is never made, and a load fits a cap it would have passed") {
  // gate and up [K, N] mapped from their file: their concatenation would be 2·K·N floats owned beside its panels.
  const int64_t K = 512, N = 2048;  // (panels past 4 MiB: not copied into the arena of small ones)
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> wg(static_cast<size_t>(K * N)), wu(wg.size()), x(static_cast<size_t>(K));
  for (auto* v : {&wg, &wu, &x})
    for (float& e : *v) e = u(g);
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {1, K}).output("y");
  std::ofstream data(d.path / "weights.bin", std::ios::binary);  // external data (mapped), as the 1B-shape exports keep it
  int64_t offset = 0;
  for (auto [name, w] : {std::pair<const char*, const std::vector<float>*>{"wg", &wg}, {"wu", &wu}}) {
    const auto bytes = static_cast<int64_t>(w->size() * sizeof(float));
    data.write(reinterpret_cast<const char*>(w->data()), bytes);
    onnx::TensorProto& t = b.initializer_f32(name, {K, N}, {});
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair<const char*, std::string>{"location", "weights.bin"},
                              {"offset", std::to_string(offset)},
                              {"length", std::to_string(bytes)}}) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    offset += bytes;
  }
  data.close();
  gated_unit(b);
  const std::string path = b.save(d.path / "m.onnx");
  std::vector<double> want(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    double gs = 0, us = 0;
    for (int64_t k = 0; k < K; ++k) {
      gs += static_cast<double>(x[static_cast<size_t>(k)]) * wg[static_cast<size_t>(k * N + n)];
      us += static_cast<double>(x[static_cast<size_t>(k)]) * wu[static_cast<size_t>(k * N + n)];
    }
    want[static_cast<size_t>(n)] = gs / (1 + std::exp(-gs)) * us;
  }
  const size_t concatenation = static_cast<size_t>(2 * K * N) * sizeof(float);
  for (WeightFormat weights : {WeightFormat::AsStored, WeightFormat::Float16, WeightFormat::Int8, WeightFormat::Int4}) {
    CAPTURE(weight_format_name(weights));
    SessionOptions so;
    so.weights = weights;
    size_t held = 0;
    {
      Session s(path, so);
      CHECK(count_ops(s, "MatMul") == 1);
      for (const Value& v : s.graph().values) CHECK_FALSE(v.parts);
      held = s.memory_account()->held();
    }
    // Under a cap of what the loaded session holds plus half the concatenation: the whole never existed.
    so.max_memory = held + concatenation / 2;
    Session s(path, so);
    const Tensor y = s.run({{"x", Tensor::from_vector<float>(x, {1, K})}})[0];
    // (Within a share of the largest output: fp32 to rounding, fp16 weights' 2^-11 steps, int4's 1/16 of a block.)
    double largest = 0;
    for (double w : want) largest = std::max(largest, std::abs(w));
    const double tolerance = (weights == WeightFormat::Int4      ? 0.1
                              : weights == WeightFormat::Int8    ? 0.01
                              : weights == WeightFormat::Float16 ? 2e-3
                                                                 : 1e-5) *
                             largest;
    for (int64_t n = 0; n < N; ++n) CHECK(std::abs(y.data<float>()[n] - want[static_cast<size_t>(n)]) <= tolerance);
  }
}

TEST_CASE("Gelu(tanh) of the gate times up (Gemma's GeGLU) becomes SwiGLU with activation gelu_tanh; exact Gelu is left alone") {
  TempDir d;
  for (const char* approximate : {"tanh", "none"}) {
    CAPTURE(approximate);
    ModelBuilder b(20);
    b.input("g", onnx::TensorProto::FLOAT, {2, 40}).input("u", onnx::TensorProto::FLOAT, {2, 40}).output("y");
    OnnxBuilder::attr(b.node("Gelu", {"g"}, {"ga"}), "approximate", std::string(approximate));
    b.node("Mul", {"ga", "u"}, {"y"});
    Session s(b.save(d.path / (std::string(approximate) + ".onnx")));
    CHECK(count_ops(s, "SwiGLU") == (std::string(approximate) == "tanh" ? 1 : 0));
    std::vector<float> g(80), u(80);
    for (int i = 0; i < 80; ++i)
      g[static_cast<size_t>(i)] = -6.0f + 0.15f * static_cast<float>(i), u[static_cast<size_t>(i)] = 1.0f - 0.02f * static_cast<float>(i);
    const auto out = s.run({{"g", Tensor::from_vector<float>(g, {2, 40})}, {"u", Tensor::from_vector<float>(u, {2, 40})}});
    for (size_t i = 0; i < 80; ++i) {  // the definitions, in double (vector body and scalar tail both)
      const double x = g[i], c = std::sqrt(2.0 / M_PI);
      const double want = std::string(approximate) == "tanh" ? 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)))
                                                             : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      CHECK(out[0].data<float>()[i] == doctest::Approx(want * u[i]).epsilon(2e-6));
    }
  }
}

TEST_CASE("a tied table the LM head repacked counts one row a token (the Gather's), with and without --prefault") {
  TempDir d;
  ModelBuilder b(17);
  b.input("ids", onnx::TensorProto::INT64, {1}).output("logits");
  std::vector<float> table(64 * 32);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 7) - 3.0f;
  b.initializer_f32("embed", {64, 32}, table);  // [vocab 64, hidden 32]
  b.node("Gather", {"embed", "ids"}, {"h"});
  OnnxBuilder::attr(b.node("Transpose", {"embed"}, {"head"}), "perm", std::vector<int64_t>{1, 0});
  b.node("MatMul", {"h", "head"}, {"logits"});
  const std::string path = b.save(d.path / "m.onnx");
  for (bool prefault : {false, true}) {
    SessionOptions so;
    so.prefault = prefault;
    Session s(path, so);
    // The head reads its panels (packed_weights); the table is read a row a token, by Gather alone.
    const MemoryUse use = s.memory_use();
    REQUIRE(use.packed_weights >= 64 * 32 * 4);
    CHECK(s.weights().bytes_per_token() == use.packed_weights + 32 * 4);
  }
}

TEST_CASE("MatMul of a transposed constant reads the weight as it lies: a tied LM head shares the Gather table") {
  TempDir d;
  ModelBuilder b(17);
  b.input("ids", onnx::TensorProto::INT64, {2}).output("logits").output("other");
  b.initializer_f32("embed", {3, 2}, {1, 2, 3, 4, 5, 6});  // [vocab 3, hidden 2]
  b.node("Gather", {"embed", "ids"}, {"h"});               // [2, 2]
  OnnxBuilder::attr(b.node("Transpose", {"embed"}, {"head"}), "perm", std::vector<int64_t>{1, 0});
  b.node("MatMul", {"h", "head"}, {"logits"});  // h · embedᵀ: [2, 3]
  b.initializer_f32("w", {2, 2}, {1, 0, 0, 1});
  b.node("Transpose", {"w"}, {"wt"});  // read by a non-MatMul too: left to folding
  b.node("Add", {"wt", "wt"}, {"other"});
  const std::string path = b.save(d.path / "m.onnx");
  Session s(path);
  CHECK(count_ops(s, "FusedMatMul") == 1);
  CHECK(count_ops(s, "Transpose") == 0);   // the head's bypassed, the other folded
  for (const Value& v : s.graph().values)  // no transposed copy of the table was made
    CHECK_FALSE((v.constant && v.constant->shape() == Shape{2, 3}));
  CHECK(s.graph().values[static_cast<size_t>(s.graph().find_value("embed"))].constant->raw() != nullptr);  // Gather reads it
  const auto out = s.run({{"ids", Tensor::from_vector<int64_t>({2, 0}, {2})}});
  const float expected[6] = {5 * 1 + 6 * 2, 5 * 3 + 6 * 4, 5 * 5 + 6 * 6, 1 * 1 + 2 * 2, 1 * 3 + 2 * 4, 1 * 5 + 2 * 6};
  for (int i = 0; i < 6; ++i) CHECK(out[0].data<float>()[i] == expected[i]);
  CHECK(out[1].data<float>()[1] == 0.0f);
  CHECK(out[1].data<float>()[3] == 2.0f);
  // Packed as int4 too (quantized from the transpose), and the graph's meaning without optimization is the same.
  SessionOptions plain;
  plain.optimize = false;
  Session reference(path, plain);
  const auto ref = reference.run({{"ids", Tensor::from_vector<int64_t>({2, 0}, {2})}});
  for (int i = 0; i < 6; ++i) CHECK(ref[0].data<float>()[i] == expected[i]);
  SessionOptions int4;
  int4.weights = WeightFormat::Int4;
  Session q(path, int4);
  const auto qo = q.run({{"ids", Tensor::from_vector<int64_t>({2, 0}, {2})}});
  for (int i = 0; i < 6; ++i) CHECK(qo[0].data<float>()[i] == doctest::Approx(expected[i]).epsilon(0.1));
}

TEST_CASE("MatMulNBits sharing an input and their quantization become one over concatenated rows, bit for bit") {
  // Three 4-bit products of x (block 32, packed zero points, accuracy_level 4: int8 activations in decode)
  // and a fourth with another block size that must stay apart.
  const int64_t K = 64, blocks = 2;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.01f, 0.1f);
  // q | k | v: 8 + 4 + 4 rows, concatenated whole; 32 + 16 + 16, grouped part by part (16-row groups) on x86.
  for (int64_t rows : {4, 16}) {
    CAPTURE(rows);
    OnnxBuilder b(21);
    b.add_opset("com.microsoft", 1);
    b.input("x", DType::Float32, {convert::DeclaredDim(std::string("m")), convert::DeclaredDim(K)});
    auto product = [&](const std::string& y, int64_t N, int64_t block) {
      const int64_t k_blocks = K / block;
      std::vector<uint8_t> q(static_cast<size_t>(N * K / 2)), zp(static_cast<size_t>(N * ((k_blocks + 1) / 2)));
      std::vector<float> sc(static_cast<size_t>(N * k_blocks));
      for (auto& v : q) v = static_cast<uint8_t>(byte(rng));
      for (auto& v : zp) v = static_cast<uint8_t>(byte(rng));
      for (auto& v : sc) v = scale(rng);
      b.initializer(y + "_B", Tensor::from_vector<uint8_t>(q, {N, k_blocks, block / 2}));
      b.initializer(y + "_scales", Tensor::from_vector<float>(sc, {N * k_blocks}));
      b.initializer(y + "_zp", Tensor::from_vector<uint8_t>(zp, {static_cast<int64_t>(zp.size())}));
      auto& n = b.node("MatMulNBits", {"x", y + "_B", y + "_scales", y + "_zp"}, {y}, "com.microsoft");
      OnnxBuilder::attr(n, "K", K);
      OnnxBuilder::attr(n, "N", N);
      OnnxBuilder::attr(n, "bits", int64_t{4});
      OnnxBuilder::attr(n, "block_size", block);
      OnnxBuilder::attr(n, "accuracy_level", int64_t{4});
      b.output(y);
    };
    product("q", 2 * rows, K / blocks);
    product("k", rows, K / blocks);
    product("v", rows, K / blocks);
    product("other", 4, K);
    SessionOptions plain;
    plain.optimize = false;
    Session fused(load_onnx(b.proto(), "nbits"), SessionOptions{}), apart(load_onnx(b.proto(), "nbits"), plain);
    CHECK(count_ops(fused, "MatMulNBits") == 2);  // q, k, v in one; `other` (block 64) alone
    CHECK(count_ops(fused, "Split") == 1);
    for (const Value& v : fused.graph().values) CHECK_FALSE(v.parts);  // (let go once prepared)
    for (int64_t M : {1, 3}) {                                         // a decode row (int8 activations) and prefill rows
      CAPTURE(M);
      std::vector<float> x(static_cast<size_t>(M * K));
      for (auto& v : x) v = scale(rng) * 20 - 1;
      const auto want = apart.run({{"x", Tensor::from_vector<float>(x, {M, K})}});
      const auto got = fused.run({{"x", Tensor::from_vector<float>(x, {M, K})}});
      REQUIRE(got.size() == want.size());
      for (size_t o = 0; o < got.size(); ++o)
        for (int64_t i = 0; i < want[o].numel(); ++i) CHECK(got[o].data<float>()[i] == want[o].data<float>()[i]);
    }
  }
}

TEST_CASE("block fusions keep the torch-exported Llama's logits, with and without the ring-buffer cache") {
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/tests/fixtures/llama-gqa-torch";
  llm::ModelConfig cfg = llm::read_model_config(dir);
  llm::GenerateOptions o;
  o.max_new_tokens = 12;
  const std::vector<std::vector<int64_t>> prompts{{1, 17, 93, 204, 5}, {1, 250, 8}};
  SessionOptions plain;
  plain.optimize = false;
  Session reference(dir + "/model.onnx", plain);
  const auto ref = llm::Generator(reference, cfg).generate(prompts, o);
  for (int64_t window : {0, 64, 9000}) {  // 9000: RoPE tables evaluated in three chunks
    CAPTURE(window);
    SessionOptions so;
    so.decoder.ring_capacity = window;
    Session s(dir + "/model.onnx", so);
    // five norms: the first reads the embedding; the four after a residual Add take it in (skip form)
    CHECK(count_ops(s, "RMSNormalization") == 1);
    CHECK(count_ops(s, "SkipSimplifiedLayerNormalization") == 4);
    CHECK(count_ops(s, "SwiGLU") == 2);
    const auto got = llm::Generator(s, cfg).generate(prompts, o);
    CHECK(got.tokens == ref.tokens);
    for (int64_t i = 0; i < ref.prefill_logits.numel(); ++i)
      CHECK(got.prefill_logits.data<float>()[i] == doctest::Approx(ref.prefill_logits.data<float>()[i]).epsilon(1e-5));
  }
}

TEST_CASE("logits of the last position only: the same generation, one row of vocabulary projection") {
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/tests/fixtures/llama-gqa-int4";  // MatMulNBits lm_head
  llm::ModelConfig cfg = llm::read_model_config(dir);
  llm::GenerateOptions o;
  o.max_new_tokens = 10;
  const std::vector<std::vector<int64_t>> prompts{{1, 17, 93, 204, 5}, {1, 250, 8}};
  Session all(dir + "/model.onnx");
  SessionOptions so;
  so.decoder.last_position_output = "logits";
  Session last(dir + "/model.onnx", so);
  CHECK(sym_shape_str(*last.outputs()[0].shape) == "[batch_size,logits_positions,320]");  // (the positions fed; [-1] if none)
  const auto a = llm::Generator(all, cfg).generate(prompts, o);
  const auto b = llm::Generator(last, cfg).generate(prompts, o);
  CHECK(a.tokens == b.tokens);
  // One row goes through the GEMV, all rows through the GEMM: the same products summed in another
  // order, so equal to float rounding (1e-4 absolute, the fp32 logit tolerance of the ORT goldens).
  for (int64_t i = 0; i < a.prefill_logits.numel(); ++i)
    CHECK(std::abs(b.prefill_logits.data<float>()[i] - a.prefill_logits.data<float>()[i]) <= 1e-4f);
}

TEST_CASE("a DynamicQuantizeMatMul LM head: codes from every position, the last one multiplied, the same logits bit for bit") {
  // x [1, S, K] → DynamicQuantizeMatMul(W int8, per-column scales, zero points and bias) → logits. One activation
  // scale for all of x: the sliced graph quantizes every row and multiplies the last (MatMulIntegerToFloat).
  const int64_t K = 40, N = 24;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<int8_t> w(static_cast<size_t>(K * N)), zp(static_cast<size_t>(N));
  std::vector<float> scales(static_cast<size_t>(N)), bias(static_cast<size_t>(N));
  for (auto& v : w) v = static_cast<int8_t>(byte(rng));
  for (auto& v : zp) v = static_cast<int8_t>(byte(rng) / 8);
  for (auto& v : scales) v = 0.01f + std::abs(u(rng)) * 0.01f;
  for (auto& v : bias) v = u(rng);
  OnnxBuilder b(17);
  b.add_opset("com.microsoft", 1);
  b.input("x", DType::Float32, {convert::DeclaredDim(int64_t{1}), convert::DeclaredDim(std::string("S")), convert::DeclaredDim(K)});
  b.initializer("W", Tensor::from_vector<int8_t>(w, {K, N}));
  b.initializer("scales", Tensor::from_vector<float>(scales, {N}));
  b.initializer("zp", Tensor::from_vector<int8_t>(zp, {N}));
  b.initializer("bias", Tensor::from_vector<float>(bias, {N}));
  b.node("DynamicQuantizeMatMul", {"x", "W", "scales", "zp", "bias"}, {"logits"}, "com.microsoft");
  b.output("logits");
  SessionOptions so;
  so.decoder.last_position_output = "logits";
  Session all(load_onnx(b.proto(), "dqmm"), SessionOptions{}), last(load_onnx(b.proto(), "dqmm"), so);
  CHECK(count_ops(last, "DynamicQuantizeLinear") == 1);
  CHECK(count_ops(last, "LastPosition") == 1);
  CHECK(count_ops(last, "MatMulIntegerToFloat") == 1);
  CHECK(count_ops(last, "DynamicQuantizeMatMul") == 0);
  for (int64_t S : {1, 5}) {
    CAPTURE(S);
    std::vector<float> x(static_cast<size_t>(S * K));
    for (auto& v : x) v = u(rng) * (1 + static_cast<float>(&v - x.data()) / 10);  // the rows' ranges differ
    const auto want = all.run({{"x", Tensor::from_vector<float>(x, {1, S, K})}});
    const auto got = last.run({{"x", Tensor::from_vector<float>(x, {1, S, K})}});
    REQUIRE(got[0].shape() == std::vector<int64_t>{1, 1, N});
    for (int64_t n = 0; n < N; ++n) CHECK(got[0].data<float>()[n] == want[0].data<float>()[(S - 1) * N + n]);
  }
}

TEST_CASE("the last position is taken before the position-wise nodes that feed the logits, not across one that mixes positions") {
  // x [1, S, 2] → MatMul w1 → CumSum over positions → MatMul w2 (`mid`) → Sigmoid → Add x → MatMul w3 → logits
  for (bool mid_is_output : {false, true}) {
    CAPTURE(mid_is_output);
    TempDir d;
    ModelBuilder b(17);
    b.input("x", onnx::TensorProto::FLOAT, {1, -1, 2}, {"S"}).output("logits");
    if (mid_is_output) b.output("mid");
    b.initializer_f32("w1", {2, 2}, {1, 2, -1, 0.5f});
    b.initializer_f32("w2", {2, 2}, {0.25f, -1, 2, 1});
    b.initializer_f32("w3", {2, 3}, {1, 0, -2, 3, 1, 0.5f});
    b.initializer_i64("axis", {}, {1});
    b.node("MatMul", {"x", "w1"}, {"h"});
    b.node("CumSum", {"h", "axis"}, {"c"});
    b.node("MatMul", {"c", "w2"}, {"mid"});
    b.node("Sigmoid", {"mid"}, {"s"});
    b.node("Add", {"s", "x"}, {"r"});
    b.node("MatMul", {"r", "w3"}, {"logits"});
    const std::string path = b.save(d.path / "m.onnx");
    SessionOptions so;
    so.decoder.last_position_output = "logits";
    Session last(path, so);
    std::multiset<std::string> sliced;  // what the LastPosition nodes read
    for (const Node& n : last.graph().nodes)
      if (n.op_type == "LastPosition") sliced.insert(last.graph().values[static_cast<size_t>(n.inputs[0])].name);
    // Up to CumSum, which sums over positions; with `mid` returned whole, up to `mid`.
    CHECK(sliced == std::multiset<std::string>{mid_is_output ? "mid" : "c", "x"});
    Session all(path);
    const Tensor x = Tensor::from_vector<float>({0.5f, -1, 2, 0.25f, -0.75f, 1.5f}, {1, 3, 2});
    const auto want = all.run({{"x", x}}), got = last.run({{"x", x}});
    REQUIRE(got[0].shape() == std::vector<int64_t>{1, 1, 3});
    for (int j = 0; j < 3; ++j) CHECK(got[0].data<float>()[j] == doctest::Approx(want[0].data<float>()[6 + j]).epsilon(1e-6));
    if (mid_is_output) CHECK(got[1].shape() == std::vector<int64_t>{1, 3, 2});
  }
}

TEST_CASE("canonicalization bypasses Identity, Dropout, one-input Concat, same-type Casts and exact round-trip Casts, nothing else") {
  TempDir d;
  ModelBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT16, {2, 3}).input("z", onnx::TensorProto::FLOAT, {2, 3}).output("y").output("lossy");
  b.node("Identity", {"x"}, {"a"});
  b.node("Dropout", {"a"}, {"b0"});
  OnnxBuilder::attr(b.node("Concat", {"b0"}, {"b"}), "axis", int64_t{1});  // TorchScript's cache, passed through
  auto& same = b.node("Cast", {"b"}, {"c"});
  OnnxBuilder::attr(same, "to", int64_t{onnx::TensorProto::FLOAT16});
  auto& up = b.node("Cast", {"c"}, {"wide"});  // f16 → f32 → f16: exact
  OnnxBuilder::attr(up, "to", int64_t{onnx::TensorProto::FLOAT});
  auto& down = b.node("Cast", {"wide"}, {"back"});
  OnnxBuilder::attr(down, "to", int64_t{onnx::TensorProto::FLOAT16});
  b.node("Neg", {"back"}, {"y"});
  auto& narrow = b.node("Cast", {"z"}, {"narrow"});  // f32 → f16 → f32 rounds: kept
  OnnxBuilder::attr(narrow, "to", int64_t{onnx::TensorProto::FLOAT16});
  auto& widen = b.node("Cast", {"narrow"}, {"lossy"});
  OnnxBuilder::attr(widen, "to", int64_t{onnx::TensorProto::FLOAT});
  Model m = load_onnx(b.save(d.path / "casts.onnx"));
  Graph& g = *m.graph;
  infer_and_fold(g, nullptr, false);
  CHECK(remove_no_op_nodes(g) == 4);  // Identity, Dropout, Concat of one, Cast f16 → f16
  CHECK(remove_round_trip_casts(g) == 1);
  remove_dead_nodes(g);
  // Left: Neg, reading x, and the f32 → f16 → f32 pair.
  REQUIRE(g.nodes.size() == 3);
  for (const Node& n : g.nodes) {
    if (n.op_type == "Neg") CHECK(n.inputs[0] == g.find_value("x"));
    else CHECK(n.op_type == "Cast");
  }
}

TEST_CASE("a decoder whose attention matches no pattern keeps its graph cache, and says where matching stopped") {
  const fs::path model = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "exports" / "llama-optimum" / "model.onnx";
  Model m = load_onnx(model.string());
  Graph& g = *m.graph;
  // An op tern's patterns do not know between layer 0's mask Add and its Softmax.
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (g.nodes[k].op_type == "Softmax" && g.nodes[k].name.find("layers.0") != std::string::npos) {
      Node odd;
      odd.name = "odd_op";
      odd.op_type = "Sigmoid";
      odd.inputs = {g.nodes[k].inputs[0]};
      odd.outputs = {g.add_value("odd_out")};
      g.nodes[k].inputs[0] = odd.outputs[0];
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(k), odd);
      break;
    }
  SessionOptions o;
  o.decoder.ring_capacity = 64;
  o.decoder.ring_required = false;
  Session s(std::move(m), o);
  CHECK(s.passes().cached_layers == 0);  // all layers or none
  REQUIRE(s.passes().misses.size() == 1);
  CHECK(s.passes().misses[0].str() ==
        "past_key_values.0.key, past_key_values.0.value: Sigmoid 'odd_op': expected Add(scores, mask bias) before Softmax");
  for (const auto& in : s.inputs()) CAPTURE(in.name);
  CHECK(s.inputs().size() == 7);  // the graph keeps its past inputs
}

namespace {

// One MatMulNBits over x [m, K]: 4-bit codes `q` [N, K] (column order), packed zero points `zp` [N, k_blocks] and
// scales [N, k_blocks], g_idx as an initializer (or, `g_idx_input`, a graph input).
OnnxBuilder nbits_with_g_idx(int64_t K, int64_t N, int64_t block, const std::vector<uint8_t>& q, const std::vector<uint8_t>& zp,
                             const std::vector<float>& scales, const std::vector<int32_t>& g_idx, bool g_idx_input = false) {
  const int64_t k_blocks = K / block;
  std::vector<uint8_t> packed(static_cast<size_t>(N * K / 2)), zp_packed(static_cast<size_t>(N * ((k_blocks + 1) / 2)), 0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; k += 2)
      packed[static_cast<size_t>((n * K + k) / 2)] =
          static_cast<uint8_t>(q[static_cast<size_t>(n * K + k)] | (q[static_cast<size_t>(n * K + k + 1)] << 4));
    for (int64_t b = 0; b < k_blocks; ++b)
      zp_packed[static_cast<size_t>(n * ((k_blocks + 1) / 2) + b / 2)] |=
          static_cast<uint8_t>(zp[static_cast<size_t>(n * k_blocks + b)] << (4 * (b % 2)));
  }
  OnnxBuilder b(21);
  b.add_opset("com.microsoft", 1);
  b.input("x", DType::Float32, {convert::DeclaredDim(std::string("m")), convert::DeclaredDim(K)});
  b.initializer("B", Tensor::from_vector<uint8_t>(packed, {N, k_blocks, block / 2}));
  b.initializer("scales", Tensor::from_vector<float>(scales, {N * k_blocks}));
  b.initializer("zp", Tensor::from_vector<uint8_t>(zp_packed, {static_cast<int64_t>(zp_packed.size())}));
  if (g_idx_input) b.input("g_idx", DType::Int32, {convert::DeclaredDim(K)});
  else b.initializer("g_idx", Tensor::from_vector<int32_t>(g_idx, {K}));
  auto& n = b.node("MatMulNBits", {"x", "B", "scales", "zp", "g_idx"}, {"y"}, "com.microsoft");
  OnnxBuilder::attr(n, "K", K);
  OnnxBuilder::attr(n, "N", N);
  OnnxBuilder::attr(n, "bits", int64_t{4});
  OnnxBuilder::attr(n, "block_size", block);
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("MatMulNBits with g_idx and zero points: each column takes its g_idx block's scale and zero point") {
  // (ONNX Runtime reads zero points as 8 whenever g_idx is given — its contrib cases have none; this is the
  // spec's rule, derived by hand.)
  const int64_t K = 64, N = 6, block = 16, k_blocks = K / block;
  std::mt19937 rng(3);
  std::vector<uint8_t> q(static_cast<size_t>(N * K)), zp(static_cast<size_t>(N * k_blocks));
  std::vector<float> scales(static_cast<size_t>(N * k_blocks));
  for (auto& v : q) v = static_cast<uint8_t>(rng() % 16);
  for (auto& v : zp) v = static_cast<uint8_t>(rng() % 16);
  for (auto& v : scales) v = 0.01f + static_cast<float>(rng() % 100) / 1000.0f;
  std::vector<int32_t> g_idx(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / block);
  std::shuffle(g_idx.begin(), g_idx.end(), rng);
  Session s(load_onnx(nbits_with_g_idx(K, N, block, q, zp, scales, g_idx).proto(), "g_idx"), SessionOptions{});
  for (int64_t M : {1, 6}) {  // a decode row (the GEMV) and prefill rows (the panel GEMM)
    CAPTURE(M);
    std::vector<float> x(static_cast<size_t>(M * K));
    for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 50.0f;
    const auto y = s.run({{"x", Tensor::from_vector<float>(x, {M, K})}});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) {
          const size_t at = static_cast<size_t>(n * k_blocks + g_idx[static_cast<size_t>(k)]);
          want += x[static_cast<size_t>(m * K + k)] * (q[static_cast<size_t>(n * K + k)] - double(zp[at])) * scales[at];
        }
        CHECK(y[0].data<float>()[m * N + n] == doctest::Approx(want).epsilon(1e-5));
      }
  }
  SUBCASE("a g_idx that does not give each block block_size columns, one out of range, or one computed: refused naming the node") {
    std::vector<int32_t> uneven = g_idx;
    uneven[0] = (uneven[0] + 1) % static_cast<int32_t>(k_blocks);
    CHECK_THROWS_WITH_AS(Session(load_onnx(nbits_with_g_idx(K, N, block, q, zp, scales, uneven).proto(), "g_idx"), SessionOptions{}),
                         doctest::Contains("tern takes act-order whose blocks hold block_size columns each"), UnsupportedError);
    std::vector<int32_t> outside = g_idx;
    outside[5] = 9;
    CHECK_THROWS_WITH_AS(Session(load_onnx(nbits_with_g_idx(K, N, block, q, zp, scales, outside).proto(), "g_idx"), SessionOptions{}),
                         doctest::Contains("g_idx[5] = 9 is not a block (4 blocks)"), Error);
    Session computed(load_onnx(nbits_with_g_idx(K, N, block, q, zp, scales, g_idx, true).proto(), "g_idx"), SessionOptions{});
    CHECK_THROWS_WITH_AS(computed.run({{"x", Tensor::from_vector<float>(std::vector<float>(K, 1.0f), {1, K})},
                                       {"g_idx", Tensor::from_vector<int32_t>(g_idx, {K})}}),
                         doctest::Contains("g_idx must be a constant initializer"), UnsupportedError);
  }
}
