// Block fusions (RMSNorm, SwiGLU, shared-input MatMuls): each rewrites what matches exactly, computes
// the hand-derived values, and leaves near misses alone (still correct).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "llm/generator.h"
#include "model_builder.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tern;
using namespace tern::test;
namespace fs = std::filesystem;

namespace {

int count_ops(const Session& s, const std::string& op) {
  int n = 0;
  for (const Node& node : s.graph().nodes) n += node.op_type == op;
  return n;
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
  b.node("MatMul", {"x", "wg"}, {"g"});
  b.node("MatMul", {"x", "wu"}, {"u"});
  b.node("MatMul", {"x", "wz"}, {"side"});
  b.node("Sigmoid", {"g"}, {"sg"});
  b.node("Mul", {"g", "sg"}, {"silu"});
  b.node("Mul", {"silu", "u"}, {"y"});
  Session s(b.save(d.path / "m.onnx"));
  CHECK(count_ops(s, "SwiGLU") == 1);
  CHECK(count_ops(s, "MatMul") == 1);  // g, u and side in one
  CHECK(count_ops(s, "Split") == 1);   // side is not read packed, so the three are split back
  const auto out = s.run({{"x", Tensor::from_vector<float>({0.5f, -2.0f}, {1, 2})}});
  const float g[3] = {0.5f, -2.0f, -4.5f}, u[3] = {-3.5f, 0.5f, 2.5f};
  for (int i = 0; i < 3; ++i) CHECK(out[0].data<float>()[i] == doctest::Approx(g[i] / (1 + std::exp(-g[i])) * u[i]).epsilon(1e-6));
  CHECK(out[1].data<float>()[0] == doctest::Approx(0.5f * 3 - 2.0f * 4));
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
  for (int64_t window : {0, 64}) {
    SessionOptions so;
    so.kv_window = window;
    Session s(dir + "/model.onnx", so);
    CHECK(count_ops(s, "RMSNormalization") == 5);
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
  so.last_position_output = "logits";
  Session last(dir + "/model.onnx", so);
  CHECK(sym_shape_str(*last.outputs()[0].shape) == "[batch_size,1,320]");
  const auto a = llm::Generator(all, cfg).generate(prompts, o);
  const auto b = llm::Generator(last, cfg).generate(prompts, o);
  CHECK(a.tokens == b.tokens);
  // One row goes through the GEMV, all rows through the GEMM: the same products summed in another
  // order, so equal to float rounding (1e-4 absolute, the fp32 logit tolerance of the ORT goldens).
  for (int64_t i = 0; i < a.prefill_logits.numel(); ++i)
    CHECK(std::abs(b.prefill_logits.data<float>()[i] - a.prefill_logits.data<float>()[i]) <= 1e-4f);
}
