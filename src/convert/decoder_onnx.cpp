#include "convert/decoder_onnx.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "convert/onnx_builder.h"

namespace tern::convert {
namespace fs = std::filesystem;

void rope_tables(int64_t positions, int64_t rotary_dim, float theta, Tensor& cos, Tensor& sin) {
  const int64_t half = rotary_dim / 2;
  cos = Tensor(DType::Float32, {positions, half});
  sin = Tensor(DType::Float32, {positions, half});
  std::vector<float> freq(static_cast<size_t>(half));  // θ_i, the same float run.c computes at every position
  for (int64_t i = 0; i < half; ++i)
    freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float val = static_cast<float>(p) * freq[static_cast<size_t>(i)];
      cos.data<float>()[p * half + i] = std::cos(val);
      sin.data<float>()[p * half + i] = std::sin(val);
    }
}

namespace {

// x · W (+ bias) into `out`: MatMul over the float matrix, or MatMulNBits over the blocks; the initializers
// are named after `base` ("model.layers.0.self_attn.q_proj" → ….weight, ….bias).
void project(OnnxBuilder& b, const std::string& base, const Projection& w, const std::string& x, const std::string& out) {
  const std::string name = base + ".weight", product = w.bias.defined() ? out + ".matmul" : out;
  if (w.matrix.defined()) {
    b.initializer(name, w.matrix);
    b.node("MatMul", {x, name}, {product});
  } else {
    b.initializer(name + ".blocks", w.blocks);
    b.initializer(name + ".scales", w.scales);
    std::vector<std::string> inputs = {x, name + ".blocks", name + ".scales"};
    if (w.zero_points.defined()) {
      b.initializer(name + ".zero_points", w.zero_points);
      inputs.push_back(name + ".zero_points");
    }
    auto& n = b.node("MatMulNBits", inputs, {product}, "com.microsoft");
    OnnxBuilder::attr(n, "K", w.K);
    OnnxBuilder::attr(n, "N", w.N);
    OnnxBuilder::attr(n, "bits", w.bits);
    OnnxBuilder::attr(n, "block_size", w.block);
    if (w.accuracy_level) OnnxBuilder::attr(n, "accuracy_level", w.accuracy_level);
  }
  if (w.bias.defined()) {
    b.initializer(base + ".bias", w.bias);
    b.node("Add", {product, base + ".bias"}, {out});
  }
}

}  // namespace

void write_decoder_onnx(const DecoderShape& s, const DecoderWeights& w, const std::string& out_dir, const std::string& graph_name) {
  const int64_t L = s.layers, H = s.heads, KV = s.kv_heads, V = s.vocab, head = s.head();
  OnnxBuilder b(23, graph_name);
  b.add_opset("com.microsoft", 1);
  const std::string batch = "batch_size", seq = "sequence_length", past = "past_sequence_length", total = "total_sequence_length";
  b.input("input_ids", DType::Int64, {batch, seq});
  b.input("attention_mask", DType::Int64, {batch, total});
  b.input("position_ids", DType::Int64, {batch, seq});
  for (int64_t l = 0; l < L; ++l)
    for (const char* kv : {"key", "value"})
      b.input("past_key_values." + std::to_string(l) + "." + kv, DType::Float32, {batch, KV, past, head});
  b.output("logits", DType::Float32, {batch, seq, V});
  for (int64_t l = 0; l < L; ++l)
    for (const char* kv : {"key", "value"})
      b.output(std::string("present.") + std::to_string(l) + "." + kv, DType::Float32, {batch, KV, total, head});

  b.initializer("model.embed_tokens.weight", w.embed);
  b.initializer("rope.cos", w.cos);
  b.initializer("rope.sin", w.sin);
  b.initializer("const.zero", Tensor::scalar<int64_t>(0));
  b.initializer("const.one", Tensor::scalar<int64_t>(1));
  b.initializer("const.axes0", Tensor::from_vector<int64_t>({0}, {1}));
  b.initializer("const.axes1", Tensor::from_vector<int64_t>({1}, {1}));
  b.initializer("const.axes12", Tensor::from_vector<int64_t>({1, 2}, {2}));
  b.initializer("const.allowed", Tensor::scalar<float>(0.0f));
  b.initializer("const.masked", Tensor::scalar<float>(-1e30f));  // finite: a fully padded row stays finite

  // Additive attention bias [batch, 1, seq, total]: query i (absolute position past+i) sees key j when
  // j <= past+i and attention_mask[b, j] is 1.
  b.node("Shape", {"attention_mask"}, {"mask.shape"});
  b.node("Gather", {"mask.shape", "const.one"}, {"mask.total"});
  b.node("Shape", {"input_ids"}, {"ids.shape"});
  b.node("Gather", {"ids.shape", "const.one"}, {"mask.seq"});
  b.node("Sub", {"mask.total", "mask.seq"}, {"mask.past"});
  b.node("Range", {"mask.past", "mask.total", "const.one"}, {"mask.rows"});
  b.node("Range", {"const.zero", "mask.total", "const.one"}, {"mask.cols"});
  b.node("Unsqueeze", {"mask.cols", "const.axes0"}, {"mask.cols2"});
  b.node("Unsqueeze", {"mask.rows", "const.axes1"}, {"mask.rows2"});
  b.node("LessOrEqual", {"mask.cols2", "mask.rows2"}, {"mask.causal"});
  OnnxBuilder::attr(b.node("Cast", {"attention_mask"}, {"mask.keep"}), "to", static_cast<int64_t>(DType::Bool));
  b.node("Unsqueeze", {"mask.keep", "const.axes12"}, {"mask.keep4"});
  b.node("And", {"mask.causal", "mask.keep4"}, {"mask.allowed"});
  b.node("Where", {"mask.allowed", "const.allowed", "const.masked"}, {"attn.bias"});

  b.node("Gather", {"model.embed_tokens.weight", "input_ids"}, {"h.0"});
  std::string h = "h.0";
  auto rope = [&](const std::string& x, const std::string& out, int64_t heads) {
    auto& r = b.node("RotaryEmbedding", {x, "rope.cos", "rope.sin", "position_ids"}, {out});
    OnnxBuilder::attr(r, "interleaved", int64_t{s.arch->rope == RopePairs::Interleaved ? 1 : 0});
    OnnxBuilder::attr(r, "num_heads", heads);
    if (s.rotary_dim && s.rotary_dim != head) OnnxBuilder::attr(r, "rotary_embedding_dim", s.rotary_dim);
  };
  // QK-norm: RMSNorm over each head's vector, so [batch, seq, heads · head] is viewed as [batch, seq, heads, head].
  if (!w.layers.empty() && w.layers[0].q_norm.defined()) {
    b.initializer("const.by_head", Tensor::from_vector<int64_t>({0, 0, -1, head}, {4}));
    b.initializer("const.flat", Tensor::from_vector<int64_t>({0, 0, -1}, {3}));
  }
  auto head_norm = [&](const std::string& x, const std::string& weight, const Tensor& scale) {
    if (!scale.defined()) return x;
    b.initializer(weight, scale);
    b.node("Reshape", {x, "const.by_head"}, {x + ".by_head"});
    OnnxBuilder::attr(b.node("RMSNormalization", {x + ".by_head", weight}, {x + ".normed"}), "epsilon", s.rms_eps);
    b.node("Reshape", {x + ".normed", "const.flat"}, {x + ".norm"});
    return x + ".norm";
  };
  for (int64_t l = 0; l < L; ++l) {
    const DecoderLayer& lw = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".", l_s = std::to_string(l);
    b.initializer(p + "input_layernorm.weight", lw.attn_norm);
    b.initializer(p + "post_attention_layernorm.weight", lw.ffn_norm);
    OnnxBuilder::attr(b.node("RMSNormalization", {h, p + "input_layernorm.weight"}, {p + "x"}), "epsilon", s.rms_eps);
    project(b, p + "self_attn.q_proj", lw.q, p + "x", p + "q");
    project(b, p + "self_attn.k_proj", lw.k, p + "x", p + "k");
    project(b, p + "self_attn.v_proj", lw.v, p + "x", p + "v");
    rope(head_norm(p + "q", p + "self_attn.q_norm.weight", lw.q_norm), p + "q_rot", H);
    rope(head_norm(p + "k", p + "self_attn.k_norm.weight", lw.k_norm), p + "k_rot", KV);
    auto& att =
        b.node("Attention",
               {p + "q_rot", p + "k_rot", p + "v", "attn.bias", "past_key_values." + l_s + ".key", "past_key_values." + l_s + ".value"},
               {p + "attn", "present." + l_s + ".key", "present." + l_s + ".value"});
    OnnxBuilder::attr(att, "q_num_heads", H);
    OnnxBuilder::attr(att, "kv_num_heads", KV);
    project(b, p + "self_attn.o_proj", lw.o, p + "attn", p + "o");
    b.node("Add", {h, p + "o"}, {p + "h_attn"});
    OnnxBuilder::attr(b.node("RMSNormalization", {p + "h_attn", p + "post_attention_layernorm.weight"}, {p + "x2"}), "epsilon", s.rms_eps);
    project(b, p + "mlp.gate_proj", lw.gate, p + "x2", p + "gate");
    project(b, p + "mlp.up_proj", lw.up, p + "x2", p + "up");
    b.node("Sigmoid", {p + "gate"}, {p + "gate_sig"});
    b.node("Mul", {p + "gate", p + "gate_sig"}, {p + "gate_silu"});
    b.node("Mul", {p + "gate_silu", p + "up"}, {p + "gate_up"});
    project(b, p + "mlp.down_proj", lw.down, p + "gate_up", p + "down");
    h = "h." + std::to_string(l + 1);
    b.node("Add", {p + "h_attn", p + "down"}, {h});
  }
  b.initializer("model.norm.weight", w.final_norm);
  OnnxBuilder::attr(b.node("RMSNormalization", {h, "model.norm.weight"}, {"h.final"}), "epsilon", s.rms_eps);
  if (w.tied) {
    OnnxBuilder::attr(b.node("Transpose", {"model.embed_tokens.weight"}, {"lm_head.weight"}), "perm", std::vector<int64_t>{1, 0});
    b.node("MatMul", {"h.final", "lm_head.weight"}, {"logits"});
  } else {
    project(b, "lm_head", w.lm_head, "h.final", "logits");
  }

  fs::create_directories(out_dir);
  b.save(fs::path(out_dir) / "model.onnx", "model.onnx.data");
}

}  // namespace tern::convert
