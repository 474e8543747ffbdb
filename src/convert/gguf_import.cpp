#include "convert/gguf_import.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "convert/architecture.h"
#include "convert/decoder_onnx.h"
#include "convert/gguf.h"
#include "core/output_files.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"

namespace tern::convert {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The float values of a GGUF tensor, as ggml decodes them.
Tensor dequantize(const GgufFile& f, const GgufTensor& t) {
  Tensor out(DType::Float32, {t.elements});
  try {
    dequantize_blocks(t.type, t.data, t.elements, out.data<float>());
  } catch (const Error& e) {
    fail_unsupported("'", f.path(), "': tensor '", t.name, "': ", e.what());
  }
  return out;
}

const GgufTensor& tensor_of(const GgufFile& f, const std::string& name, const std::vector<int64_t>& dims) {
  const GgufTensor* t = f.tensor(name);
  if (!t) fail("'", f.path(), "' has no tensor '", name, "'");
  if (t->dims != dims) {
    auto str = [](const std::vector<int64_t>& v) {
      std::string s;
      for (int64_t d : v) {
        if (!s.empty()) s += ',';
        s += std::to_string(d);
      }
      return s;
    };
    fail("'", f.path(), "': tensor '", name, "' is {", str(t->dims), "}, the metadata make it {", str(dims), "}");
  }
  return *t;
}

// A [N rows, K] GGUF matrix (K contiguous) as the float W [K, N] of x · W.
Projection float_projection(const GgufFile& f, const GgufTensor& t, int64_t K, int64_t N) {
  const Tensor rows = dequantize(f, t);
  Projection w;
  w.K = K, w.N = N;
  w.matrix = Tensor(DType::Float32, {K, N});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w.matrix.data<float>()[k * N + n] = rows.data<float>()[n * K + k];
  return w;
}

// A [N rows, K] GGUF matrix as x · W: its blocks as they are for Q4_0 / Q4_1 / Q8_0, else floats.
Projection projection(const GgufFile& f, const std::string& name, int64_t K, int64_t N) {
  const GgufTensor& t = tensor_of(f, name, {K, N});
  const bool q4 = t.type == GgmlType::Q4_0 || t.type == GgmlType::Q4_1, q8 = t.type == GgmlType::Q8_0;
  if (!q4 && !q8) return float_projection(f, t, K, N);
  Projection w;
  w.K = K, w.N = N;
  // MatMulNBits: N rows of K/32 blocks; a 4-bit block packs element 2i in the low nibble of byte i and 2i+1
  // in the high one (ggml: element i low, i + 16 high); 8-bit blocks hold q + 128 (zero point 128).
  const int64_t blocks = N * (K / 32), blob = q4 ? 16 : 32;
  w.bits = q4 ? 4 : 8, w.block = 32;
  // llama.cpp multiplies these blocks with activations quantized to 8 bits per block of 32 (its Q8_0/Q8_1);
  // accuracy_level 4 asks tern and ONNX Runtime for the same arithmetic in decode.
  w.accuracy_level = 4;
  w.blocks = Tensor(DType::UInt8, {N, K / 32, blob});
  w.scales = Tensor(DType::Float32, {blocks});
  if (t.type == GgmlType::Q4_1) w.zero_points = Tensor(DType::Float32, {blocks});
  const int64_t stride = ggml_block(t.type).bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = t.data + b * stride;
    uint8_t* out = w.blocks.data<uint8_t>() + b * blob;
    const float d = ggml_half(p);
    w.scales.data<float>()[b] = d;
    if (q8) {
      for (int j = 0; j < 32; ++j) out[j] = static_cast<uint8_t>(static_cast<int8_t>(p[2 + j]) + 128);
      continue;
    }
    const uint8_t* qs = p + (t.type == GgmlType::Q4_1 ? 4 : 2);
    auto nibble = [&](int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; };
    for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(nibble(2 * i) | (nibble(2 * i + 1) << 4));
    if (t.type == GgmlType::Q4_1) {
      // d·q + m = (q − zp)·d with zp = −m/d. A block with d = 0 is the constant m, which no zero point
      // can give: such a tensor is kept as floats instead.
      const float m = ggml_half(p + 2);
      if (d == 0.0f && m != 0.0f) return float_projection(f, t, K, N);
      w.zero_points.data<float>()[b] = d == 0.0f ? 0.0f : -m / d;
    }
  }
  return w;
}

Tensor vector_of(const GgufFile& f, const std::string& name, int64_t n) { return dequantize(f, tensor_of(f, name, {n})); }

// tokenizer.json for a gpt2-style (byte-level BPE) GGUF vocabulary.
json tokenizer_json(const GgufFile& f) {
  const std::string model = f.string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail_unsupported("'", f.path(), "': tokenizer model '", model, "' is not imported yet (tern imports gpt2-style BPE)");
  const auto& tokens = f.array("tokenizer.ggml.tokens");
  const auto& merges = f.array("tokenizer.ggml.merges");
  const std::vector<GgufValue> no_types;
  const auto& types = f.has("tokenizer.ggml.token_type") ? f.array("tokenizer.ggml.token_type") : no_types;
  json vocab = json::object(), added = json::array(), merge_list = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].type != GgufValue::Type::String) fail("'", f.path(), "': tokenizer.ggml.tokens[", i, "] is not a string");
    vocab[tokens[i].s] = i;
    const int64_t type = i < types.size() ? types[i].i : 1;
    if (type == 3 || type == 4)  // control, user-defined: matched whole before BPE
      added.push_back({{"id", i},
                       {"content", tokens[i].s},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == 3}});
  }
  for (const auto& m : merges) merge_list.push_back(m.s);
  // Pre-tokenization as llama.cpp names it (tokenizer.ggml.pre) in Hugging Face's terms.
  const std::string pre = f.has("tokenizer.ggml.pre") ? f.string("tokenizer.ggml.pre") : "default";
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json pre_tokenizer;
  if (pre == "default" || pre == "gpt2") {
    pre_tokenizer = byte_level;
  } else if (pre == "smollm") {  // digits one by one, then GPT-2's split
    pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "qwen2") {
    byte_level["use_regex"] = false;
    const json split = {{"type", "Split"},
                        {"pattern", {{"Regex", pre == "qwen2" ? llm::kQwen2SplitRegex : llm::kLlama3SplitRegex}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
    pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  } else {
    fail_unsupported("'", f.path(), "': pre-tokenizer '", pre,
                     "' is not imported yet (tern knows default, gpt2, smollm, llama-bpe, qwen2)");
  }
  json post = nullptr;
  if (f.has("tokenizer.ggml.add_bos_token") && f.integer("tokenizer.ggml.add_bos_token") && f.has("tokenizer.ggml.bos_token_id")) {
    const int64_t bos_id = f.integer("tokenizer.ggml.bos_token_id");
    if (bos_id < 0 || bos_id >= static_cast<int64_t>(tokens.size()))
      fail("'", f.path(), "': tokenizer.ggml.bos_token_id ", bos_id, " is outside the vocabulary of ", tokens.size());
    const std::string bos = tokens[static_cast<size_t>(bos_id)].s;
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", json::array()},
            {"special_tokens", {{bos, {{"id", bos}, {"ids", {f.integer("tokenizer.ggml.bos_token_id")}}, {"tokens", {bos}}}}}}};
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", post},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"ignore_merges", false}, {"byte_fallback", false}}}};
}

void write_json(const fs::path& path, const json& j) { write_whole_file(path, j.dump(2) + "\n"); }

// The GGUF's hyperparameters as DecoderShape, checked for plausibility.
DecoderShape shape_of(const GgufFile& f, const Architecture& arch, int64_t& context, double& theta) {
  auto key = [&](const std::string& k) { return std::string(arch.gguf_name) + "." + k; };
  DecoderShape s;
  s.arch = &arch;
  s.layers = f.integer(key("block_count"));
  s.hidden = f.integer(key("embedding_length"));
  s.ffn = f.integer(key("feed_forward_length"));
  s.heads = f.integer(key("attention.head_count"));
  s.kv_heads = f.has(key("attention.head_count_kv")) ? f.integer(key("attention.head_count_kv")) : s.heads;
  const double eps = f.number(key("attention.layer_norm_rms_epsilon"));
  if (!(eps > 0 && eps < 1)) fail("'", f.path(), "': ", key("attention.layer_norm_rms_epsilon"), " ", eps, " is not in (0, 1)");
  s.rms_eps = static_cast<float>(eps);
  context = f.integer(key("context_length"));
  if (s.layers <= 0 || s.layers > 1024 || s.hidden <= 0 || s.ffn <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads ||
      context <= 0 || context > llm::kMaxContextTokens)
    fail("'", f.path(), "': implausible hyperparameters (layers ", s.layers, ", hidden ", s.hidden, ", heads ", s.heads, "/", s.kv_heads,
         ", context ", context, ")");
  // The head size: attention.key_length where the family sets it apart from hidden / heads (Qwen3).
  if (f.has(key("attention.key_length"))) {
    s.head_dim = f.integer(key("attention.key_length"));
    const int64_t v = f.has(key("attention.value_length")) ? f.integer(key("attention.value_length")) : s.head_dim;
    if (s.head_dim <= 0 || s.head_dim > 65536 || v != s.head_dim)
      fail("'", f.path(), "': ", key("attention.key_length"), " ", s.head_dim, " and value_length ", v, " are not one head size");
  } else if (s.hidden % s.heads) {
    fail("'", f.path(), "': embedding_length ", s.hidden, " is not a multiple of the ", s.heads, " heads");
  }
  s.rotary_dim = f.has(key("rope.dimension_count")) ? f.integer(key("rope.dimension_count")) : s.head();
  if (s.rotary_dim <= 0 || s.rotary_dim > s.head() || s.rotary_dim % 2)
    fail("'", f.path(), "': rope.dimension_count ", s.rotary_dim, " does not fit head size ", s.head());
  theta = f.has(key("rope.freq_base")) ? f.number(key("rope.freq_base")) : 10000.0;
  if (!(theta > 1 && theta < 1e30)) fail("'", f.path(), "': ", key("rope.freq_base"), " ", theta, " is not a rope base");
  return s;
}

}  // namespace

void import_gguf(const std::string& gguf_path, const std::string& out_dir) {
  const GgufFile f(gguf_path);
  const Architecture& arch = gguf_architecture(f.string("general.architecture"), gguf_path);
  int64_t context = 0;
  double theta = 0;
  DecoderShape s = shape_of(f, arch, context, theta);
  const int64_t head = s.head(), q_dim = head * s.heads, kv_dim = head * s.kv_heads;

  const GgufTensor* embed = f.tensor("token_embd.weight");
  if (!embed || embed->dims.size() != 2 || embed->dims[0] != s.hidden) fail("'", gguf_path, "': no token_embd.weight of width ", s.hidden);
  s.vocab = embed->dims[1];
  DecoderWeights w;
  w.embed = dequantize(f, *embed).reshaped({s.vocab, s.hidden});
  rope_tables(context, s.rotary_dim, static_cast<float>(theta), w.cos, w.sin);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    DecoderLayer& lw = w.layers.emplace_back();
    lw.attn_norm = vector_of(f, p + "attn_norm.weight", s.hidden);
    lw.ffn_norm = vector_of(f, p + "ffn_norm.weight", s.hidden);
    lw.q = projection(f, p + "attn_q.weight", s.hidden, q_dim);
    lw.k = projection(f, p + "attn_k.weight", s.hidden, kv_dim);
    lw.v = projection(f, p + "attn_v.weight", s.hidden, kv_dim);
    if (arch.qkv_bias) {
      lw.q.bias = vector_of(f, p + "attn_q.bias", q_dim);
      lw.k.bias = vector_of(f, p + "attn_k.bias", kv_dim);
      lw.v.bias = vector_of(f, p + "attn_v.bias", kv_dim);
    }
    if (arch.qk_norm) {
      lw.q_norm = vector_of(f, p + "attn_q_norm.weight", head);
      lw.k_norm = vector_of(f, p + "attn_k_norm.weight", head);
    }
    lw.o = projection(f, p + "attn_output.weight", q_dim, s.hidden);
    lw.gate = projection(f, p + "ffn_gate.weight", s.hidden, s.ffn);
    lw.up = projection(f, p + "ffn_up.weight", s.hidden, s.ffn);
    lw.down = projection(f, p + "ffn_down.weight", s.ffn, s.hidden);
  }
  w.final_norm = vector_of(f, "output_norm.weight", s.hidden);
  const bool tied = !f.tensor("output.weight");
  // A float table ties as itself; a quantized one stays blocks for the head beside the floats Gather reads.
  w.lm_head = projection(f, tied ? "token_embd.weight" : "output.weight", s.hidden, s.vocab);
  w.tied = tied && w.lm_head.matrix.defined();
  if (w.tied) w.lm_head = {};
  write_decoder_onnx(s, w, out_dir, f.has("general.name") ? f.string("general.name") : "gguf");

  const fs::path dir(out_dir);
  auto id = [&](const char* k) -> json { return f.has(k) ? json(f.integer(k)) : json(nullptr); };
  write_json(dir / "config.json", {{"architectures", {std::string(arch.hf_class)}},
                                   {"model_type", std::string(arch.model_type)},
                                   {"hidden_size", s.hidden},
                                   {"head_dim", head},
                                   {"intermediate_size", s.ffn},
                                   {"num_hidden_layers", s.layers},
                                   {"num_attention_heads", s.heads},
                                   {"num_key_value_heads", s.kv_heads},
                                   {"vocab_size", s.vocab},
                                   {"max_position_embeddings", context},
                                   {"rms_norm_eps", s.rms_eps},
                                   {"rope_theta", theta},
                                   {"bos_token_id", id("tokenizer.ggml.bos_token_id")},
                                   {"eos_token_id", id("tokenizer.ggml.eos_token_id")},
                                   {"tie_word_embeddings", tied},
                                   {"imported_from", fs::path(gguf_path).filename().string()}});
  write_json(dir / "generation_config.json",
             {{"bos_token_id", id("tokenizer.ggml.bos_token_id")}, {"eos_token_id", id("tokenizer.ggml.eos_token_id")}});
  write_json(dir / "tokenizer.json", tokenizer_json(f));
  json tcfg = {{"add_bos_token", f.has("tokenizer.ggml.add_bos_token") && f.integer("tokenizer.ggml.add_bos_token") != 0}};
  const auto& tokens = f.array("tokenizer.ggml.tokens");
  for (const auto& [field, k] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"}})
    if (f.has(k) && f.integer(k) >= 0 && static_cast<size_t>(f.integer(k)) < tokens.size())
      tcfg[field] = tokens[static_cast<size_t>(f.integer(k))].s;
  if (f.has("tokenizer.chat_template")) tcfg["chat_template"] = f.string("tokenizer.chat_template");
  write_json(dir / "tokenizer_config.json", tcfg);
}

}  // namespace tern::convert
