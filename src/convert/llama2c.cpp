#include "convert/llama2c.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "convert/decoder_onnx.h"
#include "core/mapped_file.h"
#include "core/output_files.h"

namespace tern::convert {
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  return read_file_bytes(path, size_t{1} << 36, "llama2.c checkpoint");  // (regular files only; 64 GiB)
}

// Sequential reader over the checkpoint's float tensors; every read is bounds-checked.
class FloatReader {
 public:
  FloatReader(const std::string& bytes, size_t offset, std::string path) : bytes_(bytes), pos_(offset), path_(std::move(path)) {}
  Tensor take(const char* what, Shape shape) {
    // The header's sizes are claims: checked against the bytes there are before anything is allocated.
    const double need = 4.0 * static_cast<double>(numel_of(shape));
    if (static_cast<double>(pos_) + need > static_cast<double>(bytes_.size()))
      fail("'", path_, "': file ends inside tensor '", what, "' (", bytes_.size(), " bytes; truncated or not a llama2.c checkpoint?)");
    Tensor t(DType::Float32, std::move(shape));
    std::memcpy(t.raw(), bytes_.data() + pos_, t.nbytes());
    pos_ += t.nbytes();
    return t;
  }
  void skip(size_t n) { pos_ += n; }
  size_t remaining() const { return pos_ <= bytes_.size() ? bytes_.size() - pos_ : 0; }

 private:
  const std::string& bytes_;
  size_t pos_;
  std::string path_;
};

// Slice l of a [n_layers, ...] tensor, transposed from llama2.c's [out, in] to ONNX MatMul's [in, out].
Tensor layer_transposed(const Tensor& stacked, int64_t l) {
  const int64_t out = stacked.dim(1), in = stacked.dim(2);
  Tensor t(DType::Float32, {in, out});
  const float* src = stacked.data<float>() + l * out * in;
  float* dst = t.data<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) dst[i * out + o] = src[o * in + i];
  return t;
}

Tensor layer_row(const Tensor& stacked, int64_t l) {
  const int64_t n = stacked.dim(1);
  Tensor t(DType::Float32, {n});
  std::memcpy(t.raw(), stacked.data<float>() + l * n, static_cast<size_t>(n) * 4);
  return t;
}

Tensor transposed(const Tensor& m) {
  const int64_t r = m.dim(0), c = m.dim(1);
  Tensor t(DType::Float32, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data<float>()[j * r + i] = m.data<float>()[i * c + j];
  return t;
}

}  // namespace

Llama2cConfig read_llama2c_config(const std::string& checkpoint) {
  std::string bytes = read_file(checkpoint);
  Llama2cConfig c;
  if (bytes.size() < 28) fail("'", checkpoint, "' is too small to be a llama2.c checkpoint");
  uint32_t magic;
  std::memcpy(&magic, bytes.data(), 4);
  int32_t h[7];
  if (magic == 0x616b3432) {  // "ak42": versioned export
    int32_t version;
    std::memcpy(&version, bytes.data() + 4, 4);
    if (version != 1)
      fail_unsupported("'", checkpoint, "' is a llama2.c version ", version,
                       " checkpoint; tern reads version 0 (legacy) and 1 (fp32) — re-export with --version 1");
    if (bytes.size() < 256) fail("'", checkpoint, "': header is truncated");
    std::memcpy(h, bytes.data() + 8, sizeof(h));
    c.version = 1;
    c.shared_classifier = bytes[8 + sizeof(h)] != 0;
  } else {
    std::memcpy(h, bytes.data(), sizeof(h));
    c.shared_classifier = h[5] > 0;
    h[5] = std::abs(h[5]);
  }
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5];
  c.seq_len = h[6];
  auto bad = [&](const char* what) { fail("'", checkpoint, "': implausible header (", what, "); not a llama2.c checkpoint?"); };
  if (c.dim <= 0 || c.dim > 65536) bad("dim");
  if (c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_layers > 1024 || c.vocab_size <= 0 || c.seq_len <= 0) bad("sizes");
  // RoPE tables are built for every position (llama2.c models train with 256..4096): a fuzzed header's
  // 705 M positions was 11 GB of sin/cos, computed for minutes.
  if (c.seq_len > (1 << 20)) bad("seq_len past 2^20 positions");
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0) bad("n_heads");
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0) bad("n_kv_heads");
  if ((c.dim / c.n_heads) % 2 != 0) bad("odd head size");
  return c;
}

void convert_llama2c(const std::string& checkpoint, const std::string& tokenizer, const std::string& out_dir) {
  const Llama2cConfig c = read_llama2c_config(checkpoint);
  if (!fs::exists(tokenizer)) fail("tokenizer '", tokenizer, "' does not exist");
  const std::string bytes = read_file(checkpoint);
  const int64_t L = c.n_layers, D = c.dim, F = c.hidden_dim, V = c.vocab_size, H = c.n_heads, KV = c.n_kv_heads;
  const int64_t head = D / H, kv_dim = head * KV;

  FloatReader r(bytes, c.version == 1 ? 256 : 28, checkpoint);
  Tensor tok_emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls, cos, sin;
  if (c.version == 1) {
    rms_att = r.take("rms_att", {L, D});
    rms_ffn = r.take("rms_ffn", {L, D});
    rms_final = r.take("rms_final", {D});
    tok_emb = r.take("tok_embeddings", {V, D});
  } else {
    tok_emb = r.take("tok_embeddings", {V, D});
    rms_att = r.take("rms_att", {L, D});
  }
  wq = r.take("wq", {L, D, D});
  wk = r.take("wk", {L, kv_dim, D});
  wv = r.take("wv", {L, kv_dim, D});
  wo = r.take("wo", {L, D, D});
  if (c.version == 0) rms_ffn = r.take("rms_ffn", {L, D});
  w1 = r.take("w1", {L, F, D});
  w2 = r.take("w2", {L, D, F});
  w3 = r.take("w3", {L, F, D});
  if (c.version == 0) {
    rms_final = r.take("rms_final", {D});
    // The legacy format stores RoPE tables: cos/sin of pos·θ_i for i < head/2, as the model was trained.
    cos = r.take("freq_cis_real", {c.seq_len, head / 2});
    sin = r.take("freq_cis_imag", {c.seq_len, head / 2});
  } else {  // computed as llama2.c's run.c does, in float
    rope_tables(c.seq_len, rope_frequencies(head, 10000.0f), 1.0f, cos, sin);
  }
  wcls = c.shared_classifier ? tok_emb : r.take("wcls", {V, D});
  if (r.remaining() != 0) fail("'", checkpoint, "': ", r.remaining(), " bytes left after the last tensor; header and weights disagree");

  DecoderShape shape;
  shape.arch = &gguf_architecture("llama", checkpoint);  // llama2.c rotates pairs (2i, 2i+1), as llama.cpp's llama
  shape.layers = L, shape.hidden = D, shape.ffn = F, shape.heads = H, shape.kv_heads = KV, shape.vocab = V;
  DecoderWeights w;
  w.embed = tok_emb;
  w.cos = cos;
  w.sin = sin;
  for (int64_t l = 0; l < L; ++l) {
    DecoderLayer& lw = w.layers.emplace_back();
    lw.attn_norm = layer_row(rms_att, l);
    lw.ffn_norm = layer_row(rms_ffn, l);
    lw.q.matrix = layer_transposed(wq, l);
    lw.k.matrix = layer_transposed(wk, l);
    lw.v.matrix = layer_transposed(wv, l);
    lw.o.matrix = layer_transposed(wo, l);
    lw.gate.matrix = layer_transposed(w1, l);
    lw.down.matrix = layer_transposed(w2, l);
    lw.up.matrix = layer_transposed(w3, l);
  }
  w.final_norm = rms_final;
  w.tied = c.shared_classifier;
  if (!w.tied) w.lm_head.matrix = transposed(wcls);
  write_decoder_onnx(shape, w, out_dir, "llama2c");
  fs::copy_file(tokenizer, fs::path(out_dir) / "tokenizer.bin", fs::copy_options::overwrite_existing);
  std::ostringstream cfg;
  cfg << "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
      << "  \"hidden_size\": " << D << ",\n  \"intermediate_size\": " << F << ",\n"
      << "  \"num_hidden_layers\": " << L << ",\n  \"num_attention_heads\": " << H << ",\n"
      << "  \"num_key_value_heads\": " << KV << ",\n  \"vocab_size\": " << V << ",\n"
      << "  \"max_position_embeddings\": " << c.seq_len << ",\n  \"rms_norm_eps\": 1e-05,\n"
      << "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"tie_word_embeddings\": " << (c.shared_classifier ? "true" : "false")
      << "\n}\n";
  write_whole_file(fs::path(out_dir) / "config.json", cfg.str());
  // llama2.c ends a sample when the model emits BOS (stories are separated by BOS in training).
  write_whole_file(fs::path(out_dir) / "generation_config.json", "{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": [1, 2]\n}\n");
}

}  // namespace tern::convert
