#include "convert/gguf_import.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convert/architecture.h"
#include "convert/decoder_onnx.h"
#include "convert/gguf.h"
#include "convert/gguf_hparams.h"
#include "convert/gguf_tokenizer.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "core/output_files.h"
#include "graph/weight_pack.h"
#include "kernels/cpu/copy.h"
#include "llm/model_config.h"

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
  kernels::transpose_matrix(rows.data<float>(), N, K, w.matrix.data<float>(), sizeof(float));
  return w;
}

// Rows [first, first + count) of a [rows, K] GGUF matrix: whole rows of blocks, a view into the mapping.
GgufTensor rows_of(const GgufTensor& t, int64_t first, int64_t count) {
  const GgmlBlock b = ggml_block(t.type);
  const int64_t row_bytes = t.dims[0] / b.elements * b.bytes;  // (tensor_of checked the shape, the reader the blocks)
  GgufTensor r = t;
  r.name += "[rows " + std::to_string(first) + "+" + std::to_string(count) + "]";
  r.dims = {t.dims[0], count};
  r.elements = t.dims[0] * count;
  r.bytes = row_bytes * count;
  r.data = t.data + first * row_bytes;
  return r;
}

// A [N rows, K] GGUF matrix as x · W: its blocks (nbits_projection) where they hold it, else float32.
Projection projection(const GgufFile& f, const GgufTensor& t, int64_t K, int64_t N) {
  Projection w = nbits_projection(t.type, t.data, K, N);
  return w.blocks.defined() ? w : float_projection(f, t, K, N);
}

Projection projection(const GgufFile& f, const std::string& name, int64_t K, int64_t N) {
  return projection(f, tensor_of(f, name, {K, N}), K, N);
}

Tensor vector_of(const GgufFile& f, const std::string& name, int64_t n) { return dequantize(f, tensor_of(f, name, {n})); }

void write_json(const fs::path& path, const json& j) { write_whole_file(path, j.dump(2) + "\n"); }

}  // namespace

Projection nbits_projection(GgmlType t, const uint8_t* data, int64_t K, int64_t N) {
  const GgmlBlock type = ggml_block(t);
  if (type.elements <= 1 || t == GgmlType::Q8_1 || t == GgmlType::Q8_K || K % type.elements) return {};
  GgmlSubBlocks s;
  ggml_unpack_block(t, data, s);
  Projection w;
  w.K = K, w.N = N;
  w.bits = s.bits <= 4 ? 4 : 8, w.block = s.size;
  // llama.cpp multiplies these blocks with activations quantized to 8 bits per block (its Q8_0/Q8_K);
  // accuracy_level 4 asks tern and ONNX Runtime for the same arithmetic in decode.
  w.accuracy_level = 4;
  const int shift = w.bits == 8 ? 128 - s.zero : 0, zero = s.zero + shift, blob = s.size * w.bits / 8;
  const bool float_zp = s.has_offset || zero != (1 << (w.bits - 1));
  const int64_t sub_blocks = N * (K / s.size);
  w.blocks = Tensor(DType::UInt8, {N, K / s.size, blob});
  w.scales = Tensor(DType::Float32, {sub_blocks});
  if (float_zp) w.zero_points = Tensor(DType::Float32, {sub_blocks});
  uint8_t* out = w.blocks.data<uint8_t>();
  for (int64_t b = 0, sb = 0; b < N * K / type.elements; ++b) {
    ggml_unpack_block(t, data + b * type.bytes, s);
    for (int j = 0; j < s.count; ++j, ++sb, out += blob) {
      const uint8_t* q = s.q + j * s.size;
      const float scale = s.scale[j], offset = s.offset[j];
      if (scale == 0.0f && offset != 0.0f) {  // the constant `offset`, whatever q: (0 − (−1)) · offset exactly
        std::fill_n(out, blob, uint8_t{0});
        w.scales.data<float>()[sb] = offset;
        w.zero_points.data<float>()[sb] = -1.0f;
        continue;
      }
      w.scales.data<float>()[sb] = scale;
      if (float_zp) w.zero_points.data<float>()[sb] = static_cast<float>(zero) - (scale == 0.0f ? 0.0f : offset / scale);
      if (w.bits == 8) {
        for (int l = 0; l < s.size; ++l) out[l] = static_cast<uint8_t>(q[l] + shift);
      } else {  // MatMulNBits: value 2i in the low nibble of byte i, 2i + 1 in the high one
        for (int l = 0; l < blob; ++l) out[l] = static_cast<uint8_t>(q[2 * l] | (q[2 * l + 1] << 4));
      }
    }
  }
  return w;
}

void import_gguf(const std::string& gguf_path, const std::string& out_dir, const Progress& progress) {
  const GgufFile f(gguf_path);
  const Architecture& arch = gguf_architecture(f.string("general.architecture"), gguf_path);
  const GgufHparams h = read_gguf_hparams(f, arch);
  DecoderShape s = h.shape;
  const int64_t head = s.head(), q_dim = head * s.heads, kv_dim = head * s.kv_heads;

  const GgufTensor* embed = f.tensor("token_embd.weight");
  if (!embed || embed->dims.size() != 2 || embed->dims[0] != s.hidden) fail("'", gguf_path, "': no token_embd.weight of width ", s.hidden);
  s.vocab = embed->dims[1];
  DecoderWeights w;
  // A quantized table stays blocks, read by GatherBlockQuantized (with float zero points — Q4_K, Q5_K, Q4_1,
  // Q5_1, Q2_K, Q3_K tables — an extension ONNX Runtime refuses: a Llama-3.2-1B Q4_K_M table is 1 GB as
  // float32, 150 MB as blocks); a float one is float32 for Gather.
  const bool tied = !f.tensor("output.weight");
  Projection table;
  if (ggml_block(embed->type).elements > 1) table = projection(f, *embed, s.hidden, s.vocab);
  if (table.blocks.defined()) w.embed_blocks = table;
  else w.embed = dequantize(f, *embed).reshaped({s.vocab, s.hidden});
  gguf_rope_tables(h, w);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    DecoderLayer& lw = w.layers.emplace_back();
    lw.attn_norm = vector_of(f, p + "attn_norm.weight", s.hidden);
    lw.ffn_norm = vector_of(f, p + "ffn_norm.weight", s.hidden);
    if (arch.gemma) {
      lw.attn_post_norm = vector_of(f, p + "post_attention_norm.weight", s.hidden);
      lw.ffn_post_norm = vector_of(f, p + "post_ffw_norm.weight", s.hidden);
    }
    if (arch.fused_projections && f.tensor(p + "attn_qkv.weight")) {
      const GgufTensor& qkv = tensor_of(f, p + "attn_qkv.weight", {s.hidden, q_dim + 2 * kv_dim});
      lw.q = projection(f, rows_of(qkv, 0, q_dim), s.hidden, q_dim);
      lw.k = projection(f, rows_of(qkv, q_dim, kv_dim), s.hidden, kv_dim);
      lw.v = projection(f, rows_of(qkv, q_dim + kv_dim, kv_dim), s.hidden, kv_dim);
    } else {
      lw.q = projection(f, p + "attn_q.weight", s.hidden, q_dim);
      lw.k = projection(f, p + "attn_k.weight", s.hidden, kv_dim);
      lw.v = projection(f, p + "attn_v.weight", s.hidden, kv_dim);
    }
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
    if (arch.fused_projections) {  // gate rows, then up rows
      const GgufTensor& gate_up = tensor_of(f, p + "ffn_up.weight", {s.hidden, 2 * s.ffn});
      lw.gate = projection(f, rows_of(gate_up, 0, s.ffn), s.hidden, s.ffn);
      lw.up = projection(f, rows_of(gate_up, s.ffn, s.ffn), s.hidden, s.ffn);
    } else {
      lw.gate = projection(f, p + "ffn_gate.weight", s.hidden, s.ffn);
      lw.up = projection(f, p + "ffn_up.weight", s.hidden, s.ffn);
    }
    lw.down = projection(f, p + "ffn_down.weight", s.ffn, s.hidden);
    if (progress) progress(l + 1, s.layers + 2);
  }
  w.final_norm = vector_of(f, "output_norm.weight", s.hidden);
  // Tied: the head reads the table as it lies (Transpose of the floats, MatMulNBits over the blocks).
  if (!tied) w.lm_head = projection(f, "output.weight", s.hidden, s.vocab);
  w.tied = tied;
  f.mapping()->check();  // (truncated during the import: what was read past its end is zeros)
  write_decoder_onnx(s, w, out_dir, f.has("general.name") ? f.string("general.name") : "gguf");
  if (progress) progress(s.layers + 1, s.layers + 2);

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
                                   {"max_position_embeddings", h.context},
                                   {"rms_norm_eps", s.rms_eps},
                                   {"rope_theta", h.theta},
                                   {"bos_token_id", id("tokenizer.ggml.bos_token_id")},
                                   {"eos_token_id", id("tokenizer.ggml.eos_token_id")},
                                   {"tie_word_embeddings", tied},
                                   {"imported_from", fs::path(gguf_path).filename().string()}});
  write_json(dir / "generation_config.json",
             {{"bos_token_id", id("tokenizer.ggml.bos_token_id")}, {"eos_token_id", id("tokenizer.ggml.eos_token_id")}});
  write_json(dir / "tokenizer.json", gguf_tokenizer_json(f));
  json tcfg = {{"add_bos_token", f.has("tokenizer.ggml.add_bos_token") && f.integer("tokenizer.ggml.add_bos_token") != 0}};
  const auto& tokens = f.array("tokenizer.ggml.tokens");
  for (const auto& [field, k] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"}})
    if (f.has(k) && f.integer(k) >= 0 && static_cast<size_t>(f.integer(k)) < tokens.size())
      tcfg[field] = tokens[static_cast<size_t>(f.integer(k))].s;
  if (f.has("tokenizer.chat_template")) tcfg["chat_template"] = f.string("tokenizer.chat_template");
  write_json(dir / "tokenizer_config.json", tcfg);
  if (progress) progress(s.layers + 2, s.layers + 2);
}

namespace {

// An exclusive flock on `path` (created), held for the object's life: one process imports a given file at a
// time, the others wait and reuse its folder (two first runs raced at the final rename: issue 79).
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fail("cannot create the lock file '", path.string(), "': ", std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) fail("cannot lock '", path.string(), "': ", std::strerror(errno));
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() { ::close(fd_); }

 private:
  int fd_;
};

// A path's note in the cache (read_file_bytes, the one reader of small files); empty when there is none yet.
std::string cache_note(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) ? read_file_bytes(path.string(), 1 << 16, "GGUF cache note") : "";
}

}  // namespace

// The cache: <stem>-<content hash>/ per imported content (a copy at another path shares it), and per source
// path a note in .sources/ of the file's stamp and content hash, so a later run hashes nothing while the
// stamp holds (size, inode, mtime, ctime, 16 pages: a same-size replacement with its mtime set back still
// changes the ctime). When a path's content changes, the folder of its old content goes once no other
// path's note names it: one folder per source file, not one per edit.
std::string gguf_model_folder(const std::string& gguf_path, bool* imported, const Progress& progress) {
  if (imported) *imported = false;
  std::error_code ec;
  const fs::path file = fs::canonical(gguf_path, ec);
  if (ec) fail("'", gguf_path, "': ", ec.message());
  const fs::path cache = cache_dir("gguf");
  if (cache.empty())
    fail("'", gguf_path, "': no cache folder to import it into (neither XDG_CACHE_HOME nor HOME is set): `tern import-gguf` it");
  const fs::path sources = cache / ".sources";
  fs::create_directories(sources, ec);
  if (ec)
    fail("'", gguf_path, "': cannot create the GGUF cache folder '", sources.string(), "': ", ec.message(),
         " (set XDG_CACHE_HOME to a writable folder, or `tern import-gguf` it into a folder of your choice)");
  char path_id[17];
  std::snprintf(path_id, sizeof path_id, "%016llx", static_cast<unsigned long long>(fnv1a(file.string())));
  const fs::path note = sources / path_id;
  const std::string stamp = source_stamp({file.string()});
  std::istringstream noted(cache_note(note));
  std::string noted_stamp, old_content, noted_path;
  noted >> noted_stamp >> old_content;
  std::getline(noted >> std::ws, noted_path);
  const std::string content = noted_stamp == stamp && noted_path == file.string() ? old_content : source_content_hash({file.string()});
  auto folder = [&](const std::string& hash) { return file.stem().string() + "-" + hash; };
  // "." + name as an append: g++ 12 warns -Wstringop-overflow on the operator+ form.
  auto lock_file = [&](const std::string& hash) { return cache / std::string(".").append(folder(hash)).append(".lock"); };
  const fs::path dir = cache / folder(content);

  FileLock lock(lock_file(content));
  if (!fs::exists(dir / "model.onnx")) {
    StagedFolder out(dir);
    import_gguf(file.string(), out.path().string(), progress);
    out.commit();
    if (imported) *imported = true;
  }
  if (noted_stamp != stamp) write_whole_file(note, stamp + " " + content + " " + file.string() + "\n");
  if (!old_content.empty() && old_content != content) {  // this path's earlier content: its folder, unless another path holds it
    bool held = false;
    for (const auto& e : fs::directory_iterator(sources, ec))
      held = held || cache_note(e.path()).find(" " + old_content + " ") != std::string::npos;
    if (!held) {
      fs::remove_all(cache / folder(old_content), ec);
      fs::remove(lock_file(old_content), ec);
    }
  }
  return dir.string();
}

}  // namespace tern::convert
