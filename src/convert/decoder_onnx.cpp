#include "convert/decoder_onnx.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <vector>

#include "convert/onnx_builder.h"

namespace tern::convert {
namespace fs = std::filesystem;

std::vector<float> rope_frequencies(int64_t rotary_dim, float theta) {
  std::vector<float> freq(static_cast<size_t>(rotary_dim / 2));  // the same float run.c computes at every position
  for (size_t i = 0; i < freq.size(); ++i) freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  return freq;
}

void rope_tables(int64_t positions, const std::vector<float>& freq, float attention_factor, Tensor& cos, Tensor& sin) {
  const int64_t half = static_cast<int64_t>(freq.size());
  cos = Tensor(DType::Float32, {positions, half});
  sin = Tensor(DType::Float32, {positions, half});
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float val = static_cast<float>(p) * freq[static_cast<size_t>(i)];
      cos.data<float>()[p * half + i] = std::cos(val) * attention_factor;
      sin.data<float>()[p * half + i] = std::sin(val) * attention_factor;
    }
}

namespace {

// The initializers of W, named after `name` ("model.layers.0.self_attn.q_proj.weight"): the float matrix, or
// ….blocks, ….scales (and ….zero_points).
void write_weight(OnnxBuilder& b, const std::string& name, const Projection& w) {
  if (w.matrix.defined()) return b.initializer(name, w.matrix);
  b.initializer(name + ".blocks", w.blocks);
  b.initializer(name + ".scales", w.scales);
  if (w.zero_points.defined()) b.initializer(name + ".zero_points", w.zero_points);
}

// x · W into `out` over W's initializers `name` (write_weight's): MatMul, or MatMulNBits over the blocks.
void matmul(OnnxBuilder& b, const std::string& name, const Projection& w, const std::string& x, const std::string& out) {
  if (w.matrix.defined()) {
    b.node("MatMul", {x, name}, {out});
    return;
  }
  std::vector<std::string> inputs = {x, name + ".blocks", name + ".scales"};
  if (w.zero_points.defined()) inputs.push_back(name + ".zero_points");
  auto& n = b.node("MatMulNBits", inputs, {out}, "com.microsoft");
  OnnxBuilder::attr(n, "K", w.K);
  OnnxBuilder::attr(n, "N", w.N);
  OnnxBuilder::attr(n, "bits", w.bits);
  OnnxBuilder::attr(n, "block_size", w.block);
  if (w.accuracy_level) OnnxBuilder::attr(n, "accuracy_level", w.accuracy_level);
}

// x · W (+ bias) into `out`, W's initializers named after `base` ("model.layers.0.self_attn.q_proj" →
// ….weight, ….bias).
void project(OnnxBuilder& b, const std::string& base, const Projection& w, const std::string& x, const std::string& out) {
  write_weight(b, base + ".weight", w);
  matmul(b, base + ".weight", w, x, w.bias.defined() ? out + ".matmul" : out);
  if (w.bias.defined()) {
    b.initializer(base + ".bias", w.bias);
    b.node("Add", {out + ".matmul", base + ".bias"}, {out});
  }
}

// The token embeddings of input_ids into `out`: Gather over the float table, or GatherBlockQuantized over the
// blocks viewed as [vocab, hidden · bits/8] bytes and [vocab, hidden/block] scales and zero points (Reshape:
// no copy). Float zero points are tern's extension of GatherBlockQuantized: ONNX Runtime refuses them.
void embed(OnnxBuilder& b, const DecoderWeights& w, const std::string& name, const std::string& out) {
  if (w.embed.defined()) {
    b.initializer(name, w.embed);
    b.node("Gather", {name, "input_ids"}, {out});
    return;
  }
  const Projection& e = w.embed_blocks;
  write_weight(b, name, e);
  b.initializer(name + ".rows", Tensor::from_vector<int64_t>({e.N, e.K * e.bits / 8}, {2}));
  b.initializer(name + ".row_scales", Tensor::from_vector<int64_t>({e.N, e.K / e.block}, {2}));
  b.node("Reshape", {name + ".blocks", name + ".rows"}, {name + ".data"});
  b.node("Reshape", {name + ".scales", name + ".row_scales"}, {name + ".block_scales"});
  std::vector<std::string> inputs = {name + ".data", "input_ids", name + ".block_scales"};
  if (e.zero_points.defined()) {  // float zero points: tern's extension (ops/gather_block_quantized.cpp)
    b.node("Reshape", {name + ".zero_points", name + ".row_scales"}, {name + ".block_zero_points"});
    inputs.push_back(name + ".block_zero_points");
  }
  auto& g = b.node("GatherBlockQuantized", inputs, {out}, "com.microsoft");
  OnnxBuilder::attr(g, "gather_axis", int64_t{0});
  OnnxBuilder::attr(g, "quantize_axis", int64_t{1});
  OnnxBuilder::attr(g, "block_size", e.block);
  OnnxBuilder::attr(g, "bits", e.bits);
}

}  // namespace

void write_decoder_onnx(const DecoderShape& s, const DecoderWeights& w, const std::string& out_dir, const std::string& graph_name) {
  const int64_t L = s.layers, H = s.heads, KV = s.kv_heads, V = s.vocab, head = s.head();
  const bool gemma = s.arch->gemma;
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

  b.initializer("rope.cos", w.cos);
  b.initializer("rope.sin", w.sin);
  if (w.cos_local.defined()) {
    b.initializer("rope.local.cos", w.cos_local);
    b.initializer("rope.local.sin", w.sin_local);
  }
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
  // A sliding window of W keys also hides key j from query p when j <= p − W (Hugging Face's and llama.cpp's
  // rule): one bias per window size.
  std::set<int64_t> windows;
  auto window_bias = [&](int64_t window) {
    const std::string W = std::to_string(window), bias = "attn.bias.window" + W;
    if (!windows.insert(window).second) return bias;
    b.initializer("const.window" + W, Tensor::scalar<int64_t>(window));
    b.node("Add", {"mask.cols2", "const.window" + W}, {"mask.cols2.plus" + W});
    b.node("Greater", {"mask.cols2.plus" + W, "mask.rows2"}, {"mask.recent" + W});
    b.node("And", {"mask.allowed", "mask.recent" + W}, {"mask.allowed" + W});
    b.node("Where", {"mask.allowed" + W, "const.allowed", "const.masked"}, {bias});
    return bias;
  };

  embed(b, w, "model.embed_tokens.weight", "h.0");
  std::string h = "h.0";
  if (gemma) {  // embeddings × √hidden, the float Gemma's torch code multiplies by
    b.initializer("const.embed_scale", Tensor::scalar<float>(std::sqrt(static_cast<float>(s.hidden))));
    b.node("Mul", {"h.0", "const.embed_scale"}, {"h.0.scaled"});
    h = "h.0.scaled";
  }
  auto rope = [&](const std::string& x, const std::string& out, int64_t heads, const std::string& table) {
    auto& r = b.node("RotaryEmbedding", {x, table + ".cos", table + ".sin", "position_ids"}, {out});
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
  auto rms_norm = [&](const std::string& x, const std::string& weight, const Tensor& scale, const std::string& out) {
    b.initializer(weight, scale);
    OnnxBuilder::attr(b.node("RMSNormalization", {x, weight}, {out}), "epsilon", s.rms_eps);
    return out;
  };
  for (int64_t l = 0; l < L; ++l) {
    const DecoderLayer& lw = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".", l_s = std::to_string(l);
    const int64_t window = l < static_cast<int64_t>(s.local_window.size()) ? s.local_window[static_cast<size_t>(l)] : 0;
    const std::string table = window > 0 && w.cos_local.defined() ? "rope.local" : "rope";
    rms_norm(h, p + "input_layernorm.weight", lw.attn_norm, p + "x");
    project(b, p + "self_attn.q_proj", lw.q, p + "x", p + "q");
    project(b, p + "self_attn.k_proj", lw.k, p + "x", p + "k");
    project(b, p + "self_attn.v_proj", lw.v, p + "x", p + "v");
    rope(head_norm(p + "q", p + "self_attn.q_norm.weight", lw.q_norm), p + "q_rot", H, table);
    rope(head_norm(p + "k", p + "self_attn.k_norm.weight", lw.k_norm), p + "k_rot", KV, table);
    auto& att = b.node("Attention",
                       {p + "q_rot", p + "k_rot", p + "v", window > 0 ? window_bias(window) : "attn.bias",
                        "past_key_values." + l_s + ".key", "past_key_values." + l_s + ".value"},
                       {p + "attn", "present." + l_s + ".key", "present." + l_s + ".value"});
    OnnxBuilder::attr(att, "q_num_heads", H);
    OnnxBuilder::attr(att, "kv_num_heads", KV);
    if (s.attn_scale > 0) OnnxBuilder::attr(att, "scale", s.attn_scale);
    if (s.attn_softcap > 0) OnnxBuilder::attr(att, "softcap", s.attn_softcap);
    project(b, p + "self_attn.o_proj", lw.o, p + "attn", p + "o");
    std::string o = p + "o";
    if (lw.attn_post_norm.defined()) o = rms_norm(o, p + "post_attention_layernorm.weight", lw.attn_post_norm, p + "o.normed");
    b.node("Add", {h, o}, {p + "h_attn"});
    rms_norm(p + "h_attn", p + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"), lw.ffn_norm, p + "x2");
    project(b, p + "mlp.gate_proj", lw.gate, p + "x2", p + "gate");
    project(b, p + "mlp.up_proj", lw.up, p + "x2", p + "up");
    if (gemma) {  // GeGLU: Gelu (tanh approximation, as gelu_pytorch_tanh) of the gate
      OnnxBuilder::attr(b.node("Gelu", {p + "gate"}, {p + "gate_act"}), "approximate", std::string("tanh"));
    } else {  // SwiGLU: gate · sigmoid(gate)
      b.node("Sigmoid", {p + "gate"}, {p + "gate_sig"});
      b.node("Mul", {p + "gate", p + "gate_sig"}, {p + "gate_act"});
    }
    b.node("Mul", {p + "gate_act", p + "up"}, {p + "gate_up"});
    project(b, p + "mlp.down_proj", lw.down, p + "gate_up", p + "down");
    std::string down = p + "down";
    if (lw.ffn_post_norm.defined()) down = rms_norm(down, p + "post_feedforward_layernorm.weight", lw.ffn_post_norm, p + "down.normed");
    h = "h." + std::to_string(l + 1);
    b.node("Add", {p + "h_attn", down}, {h});
  }
  rms_norm(h, "model.norm.weight", w.final_norm, "h.final");
  const std::string logits = s.final_softcap > 0 ? "logits.uncapped" : "logits";
  if (w.tied && w.embed.defined()) {
    OnnxBuilder::attr(b.node("Transpose", {"model.embed_tokens.weight"}, {"lm_head.weight"}), "perm", std::vector<int64_t>{1, 0});
    b.node("MatMul", {"h.final", "lm_head.weight"}, {logits});
  } else if (w.tied) {
    matmul(b, "model.embed_tokens.weight", w.embed_blocks, "h.final", logits);
  } else {
    project(b, "lm_head", w.lm_head, "h.final", logits);
  }
  if (s.final_softcap > 0) {  // c · tanh(logits / c), as Gemma 2's torch code writes it
    b.initializer("const.final_softcap", Tensor::scalar<float>(s.final_softcap));
    b.node("Div", {logits, "const.final_softcap"}, {"logits.scaled"});
    b.node("Tanh", {"logits.scaled"}, {"logits.tanh"});
    b.node("Mul", {"logits.tanh", "const.final_softcap"}, {"logits"});
  }

  fs::create_directories(out_dir);
  b.save(fs::path(out_dir) / "model.onnx", "model.onnx.data");
}

}  // namespace tern::convert
